// Package service implements MemoryService: memories are sanitized, hashed, embedded through
// ai.Embed and stored with a full-text vector (package store); SearchMemories fuses the
// vector and full-text rankings (an alpha blend or reciprocal-rank fusion), applies temporal
// decay by type and a boost for memories that were used, and never returns a memory whose
// content no longer matches its hash.
package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/memory/internal/store"
)

// Server implements memoryv1.MemoryServiceServer.
type Server struct {
	memoryv1.UnimplementedMemoryServiceServer

	cfg   Config
	store *store.Store
	ai    aiv1.AIServiceClient
	log   *slog.Logger
	now   func() time.Time

	integrity prometheus.Counter
	emb       embeddings
	// signer is the service's own identity, which the re-embedding calls ai with.
	signer *auth.ServiceSigner
}

var _ memoryv1.MemoryServiceServer = (*Server)(nil)

// Option configures a Server.
type Option func(*Server)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithServiceSigner sets the service's own identity, which the background re-embedding
// calls ai.Embed with (without one it cannot run).
func WithServiceSigner(signer *auth.ServiceSigner) Option {
	return func(s *Server) { s.signer = signer }
}

// WithClock sets the clock decay is measured by (tests).
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithMetrics registers the service's metrics (memory_integrity_failures_total).
func WithMetrics(reg prometheus.Registerer) Option {
	return func(s *Server) { _ = reg.Register(s.integrity) }
}

// New returns a server storing in st and embedding through ai.
func New(cfg Config, st *store.Store, ai aiv1.AIServiceClient, opts ...Option) *Server {
	s := &Server{cfg: cfg, store: st, ai: ai, log: slog.New(slog.DiscardHandler), now: time.Now,
		integrity: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "thefold_memory_integrity_failures_total",
			Help: "Memories read whose content no longer matches their SHA-256 content hash (never returned).",
		}),
		emb: embeddings{state: map[string]store.EmbeddingState{}, checked: map[string]time.Time{}, kick: make(chan struct{}, 1)}}
	for _, o := range opts {
		o(s)
	}
	if cfg.VectorRanking == "scan" {
		st.EnableScan(cfg.ScanPool)
	}
	return s
}

// caller is the authenticated owner and whether a person (not a service) is calling.
func caller(ctx context.Context) (auth.Principal, error) { return auth.MustFromContext(ctx) }

// hash is the lower-case hex SHA-256 of content.
func hash(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

// markers are texts that imitate TheFold's own prompt structure: a memory repeating them
// could pose as a hint or as the end of the data it is fenced in.
var markers = regexp.MustCompile(`(?i)\[(\s*)(strategy hint|system|instruction|instructions|assistant|memory|hint|context|/?inst)\b|</?\s*data\b|<\|[a-z_]+\|>`)

// sanitize removes control characters (tab and newline stay) and invalid UTF-8, and
// defuses text imitating prompt markers ("[STRATEGY HINT" becomes "(STRATEGY HINT", "</data"
// becomes "<\/data").
func sanitize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if r == '\r' || unicode.IsControl(r) || r == '\u200b' || r == '\u2028' || r == '\u2029' {
			return -1
		}
		return r
	}, s)
	s = markers.ReplaceAllStringFunc(s, func(m string) string {
		switch {
		case strings.HasPrefix(m, "["):
			return "(" + m[1:]
		case strings.HasPrefix(m, "<|"):
			return "< |" + m[2:]
		default:
			return strings.Replace(m, "<", `<\`, 1)
		}
	})
	return strings.TrimSpace(s)
}

// summarize is the first sentence or line of content, at most 200 characters.
func summarize(content string) string {
	line, _, _ := strings.Cut(content, "\n")
	if i := strings.Index(line, ". "); i > 0 {
		line = line[:i+1]
	}
	if utf8.RuneCountInString(line) > 200 {
		r := []rune(line)
		line = string(r[:199]) + "…"
	}
	return line
}

// embed asks ai for the embedding of texts with the configured model, and notes the model
// (and version) ai answered as the target of the stored vectors.
func (s *Server) embed(ctx context.Context, texts ...string) ([]store.Vector, error) {
	vecs, err := s.embedAs(ctx, s.cfg.EmbedModel, 0, texts...)
	if err == nil {
		s.observe(ctx, vecs[0].Pair())
	}
	return vecs, err
}

// embedAs asks ai for the embedding of texts with model ("": ai's default) at dims (0: the
// model's size).
func (s *Server) embedAs(ctx context.Context, model string, dims int, texts ...string) ([]store.Vector, error) {
	resp, err := s.ai.Embed(ctx, &aiv1.EmbedRequest{Texts: texts, Model: model, Dimensions: int32(dims),
		Attribution: &aiv1.Attribution{}})
	if err != nil {
		var d *errs.Downstream
		if errors.As(err, &d) {
			s.log.WarnContext(ctx, "ai Embed failed", "code", d.Status.Code().String(), "err", err)
			if d.Status.Code() == codes.InvalidArgument || d.Status.Code() == codes.FailedPrecondition {
				return nil, errs.Public(codes.FailedPrecondition, "the ai service cannot embed with model %q: %s", model,
					validate.Truncate(d.Status.Message(), 300)).Wrap(err)
			}
			return nil, errs.Public(codes.Unavailable, "the ai service could not embed the text (%s); try again later", d.Status.Code()).Wrap(err)
		}
		return nil, err
	}
	if len(resp.GetEmbeddings()) != len(texts) {
		return nil, fmt.Errorf("ai Embed answered %d vectors for %d texts", len(resp.GetEmbeddings()), len(texts))
	}
	if err := store.CheckModel(resp.GetModel()); err != nil {
		return nil, err
	}
	out := make([]store.Vector, len(texts))
	for i, e := range resp.GetEmbeddings() {
		out[i] = store.Vector{Model: resp.GetModel(), Values: e.GetValues()}
		if len(out[i].Values) == 0 || len(out[i].Values) > 16000 || len(out[i].Values) != len(out[0].Values) {
			return nil, fmt.Errorf("ai Embed answered a vector of %d dimensions", len(out[i].Values))
		}
	}
	return out, nil
}

// identifier matches identifiers worth splitting for full-text search.
var identifier = regexp.MustCompile(`[A-Za-z][A-Za-z0-9]*(?:[_.-][A-Za-z0-9]+)*`)

// searchText is what the full-text vector of a memory is made of: its summary and content,
// and the parts of its identifiers (ValidateToken → validate token; max_retries → max
// retries), so a question in words finds a memory written in code.
func searchText(summary, content string) string {
	var parts []string
	seen := map[string]bool{}
	for _, id := range identifier.FindAllString(content, -1) {
		for _, p := range splitIdentifier(id) {
			if len(p) > 1 && !seen[p] && !strings.EqualFold(p, id) {
				seen[p] = true
				parts = append(parts, p)
			}
		}
	}
	return summary + "\n" + content + "\n" + strings.Join(parts, " ")
}

// splitIdentifier cuts an identifier at '_', '.', '-' and lower→upper and letter↔digit
// changes, lower-casing the parts.
func splitIdentifier(id string) []string {
	var parts []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			parts = append(parts, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(id)
	for i, r := range rs {
		switch {
		case r == '_' || r == '.' || r == '-':
			flush()
			continue
		case i > 0 && unicode.IsUpper(r) && (unicode.IsLower(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(rs[i-1]))):
			flush()
		case i > 0 && unicode.IsDigit(r) != unicode.IsDigit(rs[i-1]):
			flush()
		}
		cur = append(cur, r)
	}
	flush()
	return parts
}

// queryWords is the words of a free-text query for the full-text ranking, space-separated,
// with identifiers split as in searchText (the ranking ORs their lexemes: a task
// description rarely has all its words in one memory, and ts_rank rewards the ones that
// have more).
func queryWords(q string) string {
	var words []string
	seen := map[string]bool{}
	add := func(w string) {
		w = strings.ToLower(w)
		if len(w) < 2 || seen[w] || len(words) >= 64 {
			return
		}
		seen[w] = true
		words = append(words, w)
	}
	for _, id := range identifier.FindAllString(q, -1) {
		parts := splitIdentifier(id)
		if len(parts) > 1 {
			add(strings.Map(func(r rune) rune {
				if unicode.IsLetter(r) || unicode.IsDigit(r) {
					return r
				}
				return -1
			}, id))
		}
		for _, p := range parts {
			add(p)
		}
	}
	return strings.Join(words, " ")
}

// integrityFailure reports a memory whose content no longer matches its hash.
func (s *Server) integrityFailure(ctx context.Context, owner, id string) {
	s.integrity.Inc()
	s.log.ErrorContext(ctx, "memory integrity failure: content does not match content_hash; the memory is not returned", "memory_id", id, "owner", owner)
	if err := s.store.RecordIntegrityFailure(ctx, owner, id); err != nil {
		s.log.WarnContext(ctx, "recording an integrity failure", "err", err)
	}
}

func ts(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

// LoadVectors loads owner's memory vectors for the in-process vector ranking now
// (THEFOLD_MEMORY_VECTOR_RANKING=scan; a search otherwise starts the load in the
// background and walks the HNSW index until it is done). Benchmarks use it to measure the
// scan from their first search.
func (s *Server) LoadVectors(ctx context.Context, owner string) error {
	return s.store.LoadScan(ctx, owner)
}
