package service

import (
	"encoding/base64"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/ai/internal/registry"
	"github.com/thefold/thefold/services/ai/internal/store"
)

// Limits on registry input. They keep a catalogue row and a page bounded.
const (
	regMaxModelName   = 200
	regMaxDisplayName = 200
	regMaxKeyRef      = 200
	regMaxTags        = 20
	regMaxTag         = 32
	// regMaxPrice is $1,000,000 per million tokens: far above any real price, low enough
	// that a price × a token count stays within int64 arithmetic in the ledger's sums.
	regMaxPrice     = 1_000_000_000_000
	regMaxEmbedDims = 65536
	regMaxExcluded  = 100
	regMaxFilter    = 200
	regMaxRPCName   = 64
	regDefaultPage  = 50
	regMaxPageSize  = 200
	regPageTokenV1  = "v1"
)

var (
	// Provider names are what THEFOLD_AI_PROVIDER names: short, ASCII, no ':' (page tokens).
	regProviderName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	regTag          = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)
	regEnvVar       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	// Keys pasted where their reference belongs (Anthropic/OpenAI "sk-…", Google "AIza…").
	regLooksLikeKey = regexp.MustCompile(`^(sk-|AIza)`)
)

// regCheckProviderFields validates the fields of p named in fields (store.ProviderFields
// names); prefix goes before field names in errors.
func regCheckProviderFields(prefix string, p *aiv1.Provider, fields []string) error {
	for _, f := range fields {
		name := prefix + f
		var err error
		switch f {
		case "name":
			err = regCheckProviderName(name, p.Name, true)
		case "kind":
			err = validate.Enum(name, p.Kind, false)
		case "base_url":
			err = validate.URL(name, p.BaseUrl)
		case "api_key_ref":
			err = regCheckKeyRef(name, p.ApiKeyRef)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// regCheckProvider holds for a whole provider: an OpenAI-compatible server has no public
// endpoint to fall back on.
func regCheckProvider(prefix string, p *aiv1.Provider) error {
	if p.Kind == aiv1.ProviderKind_PROVIDER_KIND_OPENAI_COMPATIBLE && p.BaseUrl == "" {
		return errs.Invalid(prefix+"base_url", "required for an OpenAI-compatible provider (e.g. http://localhost:11434/v1)")
	}
	return nil
}

func regCheckProviderName(field, name string, required bool) error {
	switch {
	case name == "" && !required:
		return nil
	case name == "":
		return errs.Invalid(field, "required")
	case !regProviderName.MatchString(name):
		return errs.Invalid(field, "want letters, digits, '.', '_' or '-' (at most 63, starting with a letter or digit), got %q", validate.Truncate(name, 64))
	}
	return nil
}

// regCheckKeyRef accepts "" (no key, e.g. a local server), "env:NAME" or a secret's name, and
// refuses what looks like a key itself: the registry stores where a key lives, never a key.
func regCheckKeyRef(field, ref string) error {
	switch {
	case ref == "":
		return nil
	case len(ref) > regMaxKeyRef:
		return errs.Invalid(field, "at most %d bytes", regMaxKeyRef)
	case !validate.PrintableASCII(ref, false):
		return errs.Invalid(field, "printable ASCII without spaces only")
	case regLooksLikeKey.MatchString(ref):
		return errs.Invalid(field, "looks like an API key; give where the key lives (env:NAME), never the key")
	}
	if name, ok := strings.CutPrefix(ref, "env:"); ok && !regEnvVar.MatchString(name) {
		return errs.Invalid(field, "want env:NAME with NAME an environment variable name, got %q", validate.Truncate(ref, 64))
	}
	return nil
}

// regCheckModelFields validates the fields of m named in fields (store.ModelFields names),
// normalizing tags in place; prefix goes before field names in errors.
func regCheckModelFields(prefix string, m *aiv1.Model, fields []string) error {
	for _, f := range fields {
		name := prefix + f
		var err error
		switch f {
		case "name":
			err = regCheckModelName(name, m.Name, true)
		case "display_name":
			err = validate.MaxLen(name, m.DisplayName, regMaxDisplayName)
		case "tier":
			if m.Tier < 1 || m.Tier > 5 {
				err = errs.Invalid(name, "want 1 to 5, got %d", m.Tier)
			}
		case "input_micros_per_mtok":
			err = regCheckPrice(name, m.InputMicrosPerMtok)
		case "output_micros_per_mtok":
			err = regCheckPrice(name, m.OutputMicrosPerMtok)
		case "cache_read_micros_per_mtok":
			err = regCheckPrice(name, m.CacheReadMicrosPerMtok)
		case "cache_write_micros_per_mtok":
			err = regCheckPrice(name, m.CacheWriteMicrosPerMtok)
		case "context_window":
			err = regCheckNonNegative(name, m.ContextWindow)
		case "max_output_tokens":
			err = regCheckNonNegative(name, m.MaxOutputTokens)
		case "embedding_dimensions":
			if m.EmbeddingDimensions < 0 || m.EmbeddingDimensions > regMaxEmbedDims {
				err = errs.Invalid(name, "want 0 to %d, got %d", regMaxEmbedDims, m.EmbeddingDimensions)
			}
		case "tags":
			m.Tags, err = regNormalizeTags(name, m.Tags)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// regCheckModel holds for a whole model.
func regCheckModel(prefix string, m *aiv1.Model) error {
	if m.ContextWindow > 0 && m.MaxOutputTokens > m.ContextWindow {
		return errs.Invalid(prefix+"max_output_tokens", "%d is more than the context window (%d)", m.MaxOutputTokens, m.ContextWindow)
	}
	if m.SupportsReasoning && registry.IsEmbedding(m) {
		// Nothing would use it, and a reasoning setting sent with an embedding request is
		// one the provider refuses.
		return errs.Invalid(prefix+"supports_reasoning", "an embedding model (embedding_dimensions or the embedding tag) does not reason")
	}
	return nil
}

// regCheckModelName accepts a provider's model name: printable ASCII without spaces (names such
// as "llama3.1:8b" or "models/gemini-2.0-flash" occur).
func regCheckModelName(field, name string, required bool) error {
	switch {
	case name == "" && !required:
		return nil
	case name == "":
		return errs.Invalid(field, "required")
	case len(name) > regMaxModelName:
		return errs.Invalid(field, "at most %d bytes", regMaxModelName)
	case !validate.PrintableASCII(name, false):
		return errs.Invalid(field, "printable ASCII without spaces only")
	}
	return nil
}

func regCheckPrice(field string, v int64) error {
	if v < 0 || v > regMaxPrice {
		return errs.Invalid(field, "want 0 to %d micro-dollars per million tokens, got %d", int64(regMaxPrice), v)
	}
	return nil
}

func regCheckNonNegative(field string, v int32) error {
	if v < 0 {
		return errs.Invalid(field, "must not be negative, got %d", v)
	}
	return nil
}

// regNormalizeTags checks tags and drops duplicates, keeping the first-seen order.
func regNormalizeTags(field string, tags []string) ([]string, error) {
	var out []string
	for _, t := range tags {
		if !regTag.MatchString(t) {
			return nil, errs.Invalid(field, "tag %q: want lower-case letters, digits, '_' or '-', at most %d", validate.Truncate(t, 40), regMaxTag)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if len(out) > regMaxTags {
		return nil, errs.Invalid(field, "at most %d tags", regMaxTags)
	}
	return out, nil
}

// regCheckBodyID checks that a body's id, when set, names the resource the request names.
func regCheckBodyID(field, bodyID, id string) error {
	if bodyID == "" {
		return nil
	}
	got, err := validate.UUID(field, bodyID, false)
	if err != nil {
		return err
	}
	if got != id {
		return errs.Invalid(field, "names another resource than id (%s); leave it empty", id)
	}
	return nil
}

// regUsageQuery is what GetUsage and ListUsageRecords requests share.
type regUsageQuery interface {
	GetStartTime() *timestamppb.Timestamp
	GetEndTime() *timestamppb.Timestamp
	GetUserId() string
	GetModelId() string
	GetRepo() string
	GetJobId() string
	GetTaskId() string
	GetBuildId() string
	GetProjectId() string
	GetRpc() string
	GetPhase() aiv1.CallPhase
	GetConversationId() string
}

// regUsageFilter validates the filters of q.
func regUsageFilter(q regUsageQuery) (store.UsageFilter, error) {
	f := store.UsageFilter{
		UserID: q.GetUserId(), Repo: q.GetRepo(), JobID: q.GetJobId(), TaskID: q.GetTaskId(),
		BuildID: q.GetBuildId(), ProjectID: q.GetProjectId(), RPC: q.GetRpc(), Phase: q.GetPhase(),
		ConversationID: q.GetConversationId(),
	}
	var err error
	if f.Start, err = regCheckTime("start_time", q.GetStartTime()); err != nil {
		return f, err
	}
	if f.End, err = regCheckTime("end_time", q.GetEndTime()); err != nil {
		return f, err
	}
	if !f.Start.IsZero() && !f.End.IsZero() && f.End.Before(f.Start) {
		return f, errs.Invalid("end_time", "is before start_time")
	}
	for _, c := range []struct{ field, v string }{
		{"user_id", f.UserID}, {"job_id", f.JobID}, {"task_id", f.TaskID}, {"build_id", f.BuildID}, {"project_id", f.ProjectID},
		{"conversation_id", f.ConversationID},
	} {
		if err := validate.MaxLen(c.field, c.v, regMaxFilter); err != nil {
			return f, err
		}
	}
	if err := validate.MaxLen("rpc", f.RPC, regMaxRPCName); err != nil {
		return f, err
	}
	if f.ModelID, err = validate.UUID("model_id", q.GetModelId(), false); err != nil {
		return f, err
	}
	if err := validate.Repo("repo", f.Repo, false); err != nil {
		return f, err
	}
	return f, validate.Enum("phase", f.Phase, true)
}

// regCheckTime converts an optional timestamp; unset is the zero time (an open end).
func regCheckTime(field string, ts *timestamppb.Timestamp) (time.Time, error) {
	if ts == nil {
		return time.Time{}, nil
	}
	if err := ts.CheckValid(); err != nil {
		return time.Time{}, errs.Invalid(field, "not a valid time")
	}
	return ts.AsTime(), nil
}

// Page tokens are opaque to clients (validate's format). Names are base64url-encoded inside
// them: model names may contain ':'.

func regEncodeName(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func regDecodeName(s, method string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return "", validate.BadPageToken(method)
	}
	return string(b), nil
}

func regDecodeUUID(s, method string) (string, error) {
	u, err := uuid.Parse(s)
	if err != nil {
		return "", validate.BadPageToken(method)
	}
	return u.String(), nil
}

func regEncodeProviderToken(c *store.ProviderCursor) string {
	if c == nil {
		return ""
	}
	return validate.EncodePageToken(regPageTokenV1, regEncodeName(c.Name), c.ID)
}

func regDecodeProviderToken(tok string) (*store.ProviderCursor, error) {
	const method = "ListProviders"
	if tok == "" {
		return nil, nil
	}
	parts, err := validate.DecodePageToken(tok, regPageTokenV1, 2, method)
	if err != nil {
		return nil, err
	}
	var c store.ProviderCursor
	if c.Name, err = regDecodeName(parts[0], method); err != nil {
		return nil, err
	}
	if c.ID, err = regDecodeUUID(parts[1], method); err != nil {
		return nil, err
	}
	return &c, nil
}

func regEncodeModelToken(c *store.ModelCursor) string {
	if c == nil {
		return ""
	}
	return validate.EncodePageToken(regPageTokenV1, regEncodeName(c.Provider), strconv.Itoa(int(c.Tier)), regEncodeName(c.Name), c.ID)
}

func regDecodeModelToken(tok string) (*store.ModelCursor, error) {
	const method = "ListModels"
	if tok == "" {
		return nil, nil
	}
	parts, err := validate.DecodePageToken(tok, regPageTokenV1, 4, method)
	if err != nil {
		return nil, err
	}
	var c store.ModelCursor
	if c.Provider, err = regDecodeName(parts[0], method); err != nil {
		return nil, err
	}
	tier, err := strconv.Atoi(parts[1])
	if err != nil || tier < 1 || tier > 5 {
		return nil, validate.BadPageToken(method)
	}
	c.Tier = int32(tier)
	if c.Name, err = regDecodeName(parts[2], method); err != nil {
		return nil, err
	}
	if c.ID, err = regDecodeUUID(parts[3], method); err != nil {
		return nil, err
	}
	return &c, nil
}

func regEncodeUsageToken(c *store.UsageCursor) string {
	if c == nil {
		return ""
	}
	return validate.EncodeTimeIDToken(regPageTokenV1, c.CreateTime, c.ID)
}

func regDecodeUsageToken(tok string) (*store.UsageCursor, error) {
	if tok == "" {
		return nil, nil
	}
	at, id, err := validate.DecodeTimeIDToken(tok, regPageTokenV1, "ListUsageRecords")
	if err != nil {
		return nil, err
	}
	return &store.UsageCursor{CreateTime: at, ID: id}, nil
}
