// Package service implements SkillService: CRUD of skills for admins; routing them to a task
// within a token budget, ordered by match strength × priority × confidence; running their
// deterministic checks before an AI call (forbidden paths, the project's toolchain and
// conventions) and after it (secrets, dangerous APIs, configured rules); and counting how
// the jobs that used them went.
package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	"github.com/thefold/thefold/pkg/tokens"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/skills/internal/detect"
	"github.com/thefold/thefold/services/skills/internal/glob"
	"github.com/thefold/thefold/services/skills/internal/store"
)

// Server implements skillsv1.SkillServiceServer.
type Server struct {
	skillsv1.UnimplementedSkillServiceServer

	store *store.Store
	jobs  Jobs
	log   *slog.Logger
}

// Jobs finds a job of the owner a call acts for: the agent service's GetJob (a client from
// pkg/grpcclient forwards the caller's token).
type Jobs interface {
	GetJob(ctx context.Context, in *agentv1.GetJobRequest, opts ...grpc.CallOption) (*agentv1.GetJobResponse, error)
}

var _ skillsv1.SkillServiceServer = (*Server)(nil)

// Option configures a Server.
type Option func(*Server)

// WithJobs sets where LogResult checks jobs (without it LogResult is UNAVAILABLE).
func WithJobs(j Jobs) Option { return func(s *Server) { s.jobs = j } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// New returns a Server over st.
func New(st *store.Store, opts ...Option) *Server {
	s := &Server{store: st, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Limits of a skill.
const (
	maxName        = 100
	maxDescription = 1000
	maxFragment    = 40_000 // characters
	maxRules       = 100
	maxRoutingList = 100
	maxEntry       = 200
	maxMessage     = 500
	defaultPrio    = 50
)

var (
	namePattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	ruleIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_/-]*$`)
	langPattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9+#._-]*$`)
)

// checkSkill validates sk (a whole skill, as created or after an update's changes) and
// fills in defaults and the token count. field prefixes the names of fields in errors.
func checkSkill(field string, sk *skillsv1.Skill) error {
	if sk == nil {
		return errs.Invalid(field, "required")
	}
	if err := validate.Strings(sk); err != nil {
		return err
	}
	sk.Name = strings.TrimSpace(sk.GetName())
	switch {
	case sk.GetName() == "":
		return errs.Invalid(field+".name", "required")
	case len(sk.GetName()) > maxName || !namePattern.MatchString(sk.GetName()):
		return errs.Invalid(field+".name", "%q: want lower-case letters, digits, '.', '_' and '-' (at most %d), starting with a letter or digit", sk.GetName(), maxName)
	}
	if err := validate.MaxLen(field+".description", sk.GetDescription(), maxDescription); err != nil {
		return err
	}
	if sk.GetCategory() == skillsv1.SkillCategory_SKILL_CATEGORY_UNSPECIFIED {
		sk.Category = skillsv1.SkillCategory_SKILL_CATEGORY_GENERAL
	}
	if err := validate.Enum(field+".category", sk.GetCategory(), false); err != nil {
		return err
	}
	if err := validate.Enum(field+".phase", sk.GetPhase(), false); err != nil {
		return err
	}
	if err := validate.MaxLen(field+".prompt_fragment", sk.GetPromptFragment(), maxFragment); err != nil {
		return err
	}
	switch sk.GetPhase() {
	case skillsv1.SkillPhase_SKILL_PHASE_INJECT:
		if strings.TrimSpace(sk.GetPromptFragment()) == "" {
			return errs.Invalid(field+".prompt_fragment", "required for an INJECT skill")
		}
		if len(sk.GetRules()) > 0 {
			return errs.Invalid(field+".rules", "an INJECT skill has no rules (checks belong to PRE_RUN and POST_RUN skills)")
		}
	default:
		if strings.TrimSpace(sk.GetPromptFragment()) == "" && len(sk.GetRules()) == 0 {
			return errs.Invalid(field+".rules", "a PRE_RUN or POST_RUN skill needs rules or a prompt_fragment")
		}
	}
	if sk.GetPriority() == 0 {
		sk.Priority = defaultPrio
	}
	if sk.GetPriority() < 1 || sk.GetPriority() > 100 {
		return errs.Invalid(field+".priority", "%d: want 1 to 100", sk.GetPriority())
	}
	if sk.GetScope() == skillsv1.SkillScope_SKILL_SCOPE_UNSPECIFIED {
		sk.Scope = skillsv1.SkillScope_SKILL_SCOPE_GLOBAL
	}
	if err := validate.Enum(field+".scope", sk.GetScope(), false); err != nil {
		return err
	}
	switch sk.GetScope() {
	case skillsv1.SkillScope_SKILL_SCOPE_REPO:
		if err := validate.Repo(field+".repo", sk.GetRepo(), true); err != nil {
			return err
		}
	default:
		if sk.GetRepo() != "" {
			return errs.Invalid(field+".repo", "only a REPO-scoped skill names a repository")
		}
	}
	if err := checkRouting(field+".routing", sk); err != nil {
		return err
	}
	if err := checkRules(field+".rules", sk.GetRules()); err != nil {
		return err
	}
	sk.Tokens = int32(tokens.Count(sk.GetPromptFragment()))
	return nil
}

func checkRouting(field string, sk *skillsv1.Skill) error {
	if sk.Routing == nil {
		sk.Routing = &skillsv1.SkillRouting{}
	}
	r := sk.GetRouting()
	lists := []struct {
		name  string
		items *[]string
		check func(string) error
	}{
		{"keywords", &r.Keywords, func(k string) error {
			if strings.TrimSpace(k) == "" {
				return fmt.Errorf("empty")
			}
			return nil
		}},
		{"file_globs", &r.FileGlobs, glob.Validate},
		{"languages", &r.Languages, func(l string) error {
			if !langPattern.MatchString(l) {
				return fmt.Errorf("%q: want a lower-case language name such as go or typescript", l)
			}
			return nil
		}},
		{"repos", &r.Repos, func(repo string) error { return validate.Repo("repo", repo, true) }},
		{"labels", &r.Labels, func(l string) error {
			if strings.TrimSpace(l) == "" {
				return fmt.Errorf("empty")
			}
			return nil
		}},
	}
	for _, l := range lists {
		if len(*l.items) > maxRoutingList {
			return errs.Invalid(field+"."+l.name, "at most %d entries", maxRoutingList)
		}
		for i, item := range *l.items {
			f := fmt.Sprintf("%s.%s[%d]", field, l.name, i)
			if len(item) > maxEntry {
				return errs.Invalid(f, "at most %d characters", maxEntry)
			}
			if err := l.check(item); err != nil {
				return errs.Invalid(f, "%v", err)
			}
		}
	}
	r.Keywords = dedupFold(r.GetKeywords())
	return nil
}

// dedupFold trims, lower-cases and de-duplicates keywords.
func dedupFold(xs []string) []string {
	var out []string
	for _, x := range xs {
		x = strings.ToLower(strings.TrimSpace(x))
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func checkRules(field string, rules []*skillsv1.SkillRule) error {
	if len(rules) > maxRules {
		return errs.Invalid(field, "at most %d rules", maxRules)
	}
	seen := map[string]bool{}
	for i, r := range rules {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case r.GetId() == "":
			return errs.Invalid(f+".id", "required")
		case len(r.GetId()) > maxName || !ruleIDPattern.MatchString(r.GetId()):
			return errs.Invalid(f+".id", "%q: want lower-case letters, digits, '-', '_' and '/'", r.GetId())
		case seen[r.GetId()]:
			return errs.Invalid(f+".id", "%q is used twice in this skill", r.GetId())
		}
		seen[r.GetId()] = true
		if err := validate.Enum(f+".kind", r.GetKind(), true); err != nil {
			return err
		}
		if err := validate.Enum(f+".severity", r.GetSeverity(), true); err != nil {
			return err
		}
		if err := validate.MaxLen(f+".message", r.GetMessage(), maxMessage); err != nil {
			return err
		}
		if r.GetPattern() == "" {
			return errs.Invalid(f+".pattern", "required")
		}
		switch r.GetKind() {
		case skillsv1.SkillRuleKind_SKILL_RULE_KIND_DETECTOR:
			if !slices.Contains(detectorNames(), r.GetPattern()) {
				return errs.Invalid(f+".pattern", "%q is not a detector: want one of %s", r.GetPattern(), strings.Join(detectorNames(), ", "))
			}
		case skillsv1.SkillRuleKind_SKILL_RULE_KIND_GLOB:
			if err := glob.Validate(r.GetPattern()); err != nil {
				return errs.Invalid(f+".pattern", "%v", err)
			}
		default:
			if _, err := regexp.Compile(r.GetPattern()); err != nil {
				return errs.Invalid(f+".pattern", "not an RE2 regular expression: %v", err)
			}
		}
		if r.GetMustMatch() && r.GetKind() != skillsv1.SkillRuleKind_SKILL_RULE_KIND_REGEX && r.GetKind() != skillsv1.SkillRuleKind_SKILL_RULE_KIND_UNSPECIFIED {
			return errs.Invalid(f+".must_match", "applies to REGEX rules only")
		}
		for j, g := range r.GetFileGlobs() {
			if err := glob.Validate(g); err != nil {
				return errs.Invalid(fmt.Sprintf("%s.file_globs[%d]", f, j), "%v", err)
			}
		}
	}
	return nil
}

// detectorNames are the built-in detectors a DETECTOR rule may name.
func detectorNames() []string { return append(detect.Names(), toolchainDetector) }

// admin is the caller when it is an admin, else PermissionDenied.
func admin(ctx context.Context) (auth.Principal, error) { return auth.RequireRole(ctx, auth.RoleAdmin) }

// CreateSkill creates a skill (admins only).
func (s *Server) CreateSkill(ctx context.Context, req *skillsv1.CreateSkillRequest) (*skillsv1.CreateSkillResponse, error) {
	p, err := admin(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetSkill() == nil {
		return nil, errs.Invalid("skill", "required")
	}
	sk := proto.Clone(req.GetSkill()).(*skillsv1.Skill)
	// Server-set fields are ignored.
	sk.Id, sk.SuccessCount, sk.FailureCount, sk.Confidence, sk.Version, sk.OwnerId, sk.CreateTime, sk.UpdateTime = "", 0, 0, 0, 0, "", nil, nil
	if err := checkSkill("skill", sk); err != nil {
		return nil, err
	}
	out, err := s.store.Insert(ctx, sk, p.UserID, false)
	if err != nil {
		return nil, err
	}
	return &skillsv1.CreateSkillResponse{Skill: out}, nil
}

// GetSkill returns one skill.
func (s *Server) GetSkill(ctx context.Context, req *skillsv1.GetSkillRequest) (*skillsv1.GetSkillResponse, error) {
	if _, err := auth.MustFromContext(ctx); err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.GetId(), true)
	if err != nil {
		return nil, err
	}
	sk, err := s.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return &skillsv1.GetSkillResponse{Skill: sk}, nil
}

const pageTokenVersion = "v1"

// ListSkills lists skills, highest priority first.
func (s *Server) ListSkills(ctx context.Context, req *skillsv1.ListSkillsRequest) (*skillsv1.ListSkillsResponse, error) {
	if _, err := auth.MustFromContext(ctx); err != nil {
		return nil, err
	}
	if err := validate.Enum("category", req.GetCategory(), true); err != nil {
		return nil, err
	}
	if err := validate.Enum("phase", req.GetPhase(), true); err != nil {
		return nil, err
	}
	if err := validate.Repo("repo", req.GetRepo(), false); err != nil {
		return nil, err
	}
	size, err := validate.PageSize(req.GetPageSize(), 50, 200)
	if err != nil {
		return nil, err
	}
	var after *store.Cursor
	if tok := req.GetPageToken(); tok != "" {
		parts, err := validate.DecodePageToken(tok, pageTokenVersion, 3, "ListSkills")
		if err != nil {
			return nil, err
		}
		var prio int32
		if _, err := fmt.Sscan(parts[0], &prio); err != nil {
			return nil, validate.BadPageToken("ListSkills")
		}
		after = &store.Cursor{Priority: prio, Name: parts[1], ID: parts[2]}
		if _, err := validate.UUID("page_token", after.ID, true); err != nil {
			return nil, validate.BadPageToken("ListSkills")
		}
	}
	f := store.Filter{Category: req.GetCategory(), Phase: req.GetPhase(), Repo: req.GetRepo()}
	if req.Enabled != nil {
		f.Enabled = req.Enabled
	}
	skills, next, err := s.store.List(ctx, f, after, size)
	if err != nil {
		return nil, err
	}
	resp := &skillsv1.ListSkillsResponse{Skills: skills}
	if next != nil {
		resp.NextPageToken = validate.EncodePageToken(pageTokenVersion, fmt.Sprint(next.Priority), next.Name, next.ID)
	}
	return resp, nil
}

// updatable are the fields UpdateSkill may change.
var updatable = []string{"name", "description", "category", "phase", "prompt_fragment", "routing", "rules", "priority", "enabled", "scope", "repo"}

// UpdateSkill changes the fields named in update_mask (admins only).
func (s *Server) UpdateSkill(ctx context.Context, req *skillsv1.UpdateSkillRequest) (*skillsv1.UpdateSkillResponse, error) {
	if _, err := admin(ctx); err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.GetId(), true)
	if err != nil {
		return nil, err
	}
	in := req.GetSkill()
	if in == nil {
		return nil, errs.Invalid("skill", "required")
	}
	if in.GetId() != "" && in.GetId() != id {
		return nil, errs.Invalid("skill.id", "%q differs from id %q", in.GetId(), id)
	}
	paths, err := validate.UpdatePaths(req.GetUpdateMask(), in, updatable)
	if err != nil {
		return nil, err
	}
	out, err := s.store.Update(ctx, id, in.GetVersion(), func(sk *skillsv1.Skill) error {
		for _, p := range paths {
			switch p {
			case "name":
				sk.Name = in.GetName()
			case "description":
				sk.Description = in.GetDescription()
			case "category":
				sk.Category = in.GetCategory()
			case "phase":
				sk.Phase = in.GetPhase()
			case "prompt_fragment":
				sk.PromptFragment = in.GetPromptFragment()
			case "routing":
				sk.Routing = in.GetRouting()
			case "rules":
				sk.Rules = in.GetRules()
			case "priority":
				sk.Priority = in.GetPriority()
			case "enabled":
				sk.Enabled = in.GetEnabled()
			case "scope":
				sk.Scope = in.GetScope()
			case "repo":
				sk.Repo = in.GetRepo()
			}
		}
		return checkSkill("skill", sk)
	})
	if err != nil {
		return nil, err
	}
	return &skillsv1.UpdateSkillResponse{Skill: out}, nil
}

// DeleteSkill deletes a skill (admins only).
func (s *Server) DeleteSkill(ctx context.Context, req *skillsv1.DeleteSkillRequest) (*skillsv1.DeleteSkillResponse, error) {
	if _, err := admin(ctx); err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.GetId(), true)
	if err != nil {
		return nil, err
	}
	if err := s.store.Delete(ctx, id); err != nil {
		return nil, err
	}
	return &skillsv1.DeleteSkillResponse{}, nil
}

// LogResult records how a job that used skills went and returns their scores. Skill
// confidence is shared by every user, so only the agent may move it, for a job of the owner
// it acts for (see checkJob).
func (s *Server) LogResult(ctx context.Context, req *skillsv1.LogResultRequest) (*skillsv1.LogResultResponse, error) {
	p, err := agentCaller(ctx)
	if err != nil {
		return nil, err
	}
	jobID, err := validate.UUID("job_id", req.GetJobId(), true)
	if err != nil {
		return nil, err
	}
	if _, err := validate.UUID("task_id", req.GetTaskId(), false); err != nil {
		return nil, err
	}
	if q := req.GetQualityScore(); q < 0 || q > 10 {
		return nil, errs.Invalid("quality_score", "%d: want 1 to 10, or 0 when not reviewed", q)
	}
	ids, err := checkIDs("skill_ids", req.GetSkillIds(), true)
	if err != nil {
		return nil, err
	}
	job, err := s.checkJob(ctx, p, jobID)
	if err != nil {
		return nil, err
	}
	if t := req.GetTaskId(); t != "" && !strings.EqualFold(t, job.GetTaskId()) {
		return nil, errs.Invalid("task_id", "%q is not the task of job %s", t, jobID)
	}
	scores, err := s.store.LogResult(ctx, store.Result{JobID: jobID, TaskID: job.GetTaskId(), Owner: p.UserID,
		Success: req.GetSuccess(), QualityScore: req.GetQualityScore()}, ids)
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "skill results logged", "job_id", jobID, "owner", p.UserID, "skills", len(ids), "success", req.GetSuccess())
	return &skillsv1.LogResultResponse{Scores: scores}, nil
}

// agentCaller is the caller of LogResult: the agent service acting for a job's owner. A
// person's token (or an API key's) is refused, however privileged: the scores are shared by
// every user, and a person could otherwise bury a skill for everyone by logging failures.
func agentCaller(ctx context.Context) (auth.Principal, error) {
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return p, err
	}
	switch {
	case p.Service == "":
		return p, errs.Public(codes.PermissionDenied, "LogResult is called by the agent service for the jobs it runs, not with a person's token or an API key: skill scores are shared by every user")
	case p.Service != agentService:
		return p, errs.Public(codes.PermissionDenied, "LogResult is called by the agent service only, not by %s", p.Service)
	case strings.HasPrefix(p.UserID, auth.ServiceSubjectPrefix):
		return p, errs.Public(codes.PermissionDenied, "LogResult needs the agent acting on behalf of the job's owner")
	}
	return p, nil
}

// agentService is the service identity allowed to log results.
const agentService = "agent"

// checkJob asks the agent service for the job with the caller's token forwarded, so the
// agent answers for the owner the token acts for: a job that does not exist or is another
// owner's is NOT_FOUND.
func (s *Server) checkJob(ctx context.Context, p auth.Principal, id string) (*agentv1.Job, error) {
	if s.jobs == nil {
		return nil, errs.Public(codes.Unavailable, "the job cannot be checked: this skills server has no connection to the agent service")
	}
	resp, err := s.jobs.GetJob(ctx, &agentv1.GetJobRequest{Id: id})
	switch {
	case status.Code(err) == codes.NotFound:
		return nil, errs.NotFound("job", id)
	case err != nil:
		return nil, err // mapped as a downstream failure (errs.ToStatus)
	case resp.GetJob().GetOwnerId() != p.UserID:
		// The agent scopes GetJob by owner; a job of another owner here is a bug there,
		// and is still not the caller's.
		s.log.ErrorContext(ctx, "agent GetJob returned another owner's job", "job_id", id, "owner", p.UserID, "job_owner", resp.GetJob().GetOwnerId())
		return nil, errs.NotFound("job", id)
	}
	return resp.GetJob(), nil
}

// checkIDs validates and de-duplicates skill ids.
func checkIDs(field string, ids []string, required bool) ([]string, error) {
	if required && len(ids) == 0 {
		return nil, errs.Invalid(field, "required")
	}
	if len(ids) > 200 {
		return nil, errs.Invalid(field, "at most 200 ids")
	}
	var out []string
	for i, id := range ids {
		id, err := validate.UUID(fmt.Sprintf("%s[%d]", field, i), id, true)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// Seed validates the built-in skills and stores each one not seeded before (see
// store.Seed): an invalid built-in skill is an error at start, not a skill nobody can use.
func (s *Server) Seed(ctx context.Context, skills []*skillsv1.Skill) error {
	for i, sk := range skills {
		if err := checkSkill(fmt.Sprintf("builtin[%d] (%s)", i, sk.GetName()), sk); err != nil {
			return fmt.Errorf("skills: built-in skill: %w", err)
		}
	}
	n, err := s.store.Seed(ctx, skills)
	if err != nil {
		return err
	}
	if n > 0 {
		s.log.InfoContext(ctx, "seeded built-in skills", "count", n)
	}
	return nil
}
