package service

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/pkg/embed"
	"github.com/thefold/thefold/services/ai/internal/engine"
	"github.com/thefold/thefold/services/ai/internal/llm"
	"github.com/thefold/thefold/services/ai/internal/prompts"
	"github.com/thefold/thefold/services/ai/internal/registry"
)

// AIServer implements aiv1.AIServiceServer: it validates each request, builds the RPC's
// prompt, and lets the engine call, parse, repair, price and record.
type AIServer struct {
	aiv1.UnimplementedAIServiceServer
	eng *engine.Engine
	reg *registry.Registry
}

// NewAIServer returns the AIService handlers.
func NewAIServer(eng *engine.Engine, reg *registry.Registry) *AIServer {
	return &AIServer{eng: eng, reg: reg}
}

// Selection defaults per RPC, used when the caller gives no hints: assessments are cheap
// and quick, planning and project work want a stronger model, file work sits between.
var (
	assessDefaults  = engine.Defaults{Complexity: 3, Tags: []string{"analysis"}}
	planDefaults    = engine.Defaults{Complexity: 6, Tags: []string{"planning"}}
	codeDefaults    = engine.Defaults{Complexity: 5, Tags: []string{"coding"}}
	reviewDefaults  = engine.Defaults{Complexity: 5, Tags: []string{"analysis"}}
	projectDefaults = engine.Defaults{Complexity: 7, Tags: []string{"planning"}}
	orderDefaults   = engine.Defaults{Complexity: 3, Tags: []string{"planning"}}
	chatDefaults    = engine.Defaults{Complexity: 3, Tags: []string{"chat"}}
)

// repairable gives a prompts.ParseError its repair round: one, quoting the reply and what
// was wrong with it. A reply cut off at the output limit is not repaired: the same request
// goes again with twice the room, when the request set a limit that can grow.
type repairable struct {
	error
	p         *prompts.Prompt
	truncated bool
}

func (r repairable) Unwrap() error { return r.error }

func (r repairable) Repair(req llm.Request, reply string, n int) (llm.Request, bool) {
	if n > 1 {
		return llm.Request{}, false
	}
	if r.truncated {
		if req.MaxTokens <= 0 {
			return llm.Request{}, false // the model's own maximum already applied
		}
		req.MaxTokens = min(req.MaxTokens*2, maxRepairTokens)
		return req, true
	}
	req.Messages = append(slices.Clone(req.Messages), prompts.Repair(r.p, reply, r.error)...)
	return req, true
}

// maxRepairTokens caps the output limit a cut-off reply's retry asks for (the engine caps it
// at the model's own maximum as well).
const maxRepairTokens = 128000

// parseWith adapts a prompts parser to the engine: parse errors become repairable.
func parseWith[T proto.Message](p *prompts.Prompt, parse func(string) (T, error)) func(*llm.Response) (T, error) {
	return func(r *llm.Response) (T, error) {
		out, err := parse(r.Text)
		if err != nil {
			if _, ok := errors.AsType[*prompts.ParseError](err); ok {
				return out, repairable{err, p, r.StopReason == llm.StopMaxTokens}
			}
		}
		return out, err
	}
}

// fileRepairable gives a file session's problem its rounds.
type fileRepairable struct{ *prompts.FileProblem }

func (r fileRepairable) Unwrap() error { return r.FileProblem }

func (r fileRepairable) Repair(req llm.Request, reply string, n int) (llm.Request, bool) {
	return r.Next(req, reply, n)
}

// readFile adapts a file session to the engine.
func readFile[T proto.Message](s *prompts.FileSession, convert func(*prompts.FileResult) T) func(*llm.Response) (T, error) {
	return func(r *llm.Response) (T, error) {
		res, err := s.Read(r.Text, r.StopReason == llm.StopMaxTokens)
		if err != nil {
			var zero T
			if fp, ok := errors.AsType[*prompts.FileProblem](err); ok {
				return zero, fileRepairable{fp}
			}
			return zero, err
		}
		return convert(res), nil
	}
}

// reasoning is how much each RPC lets a model think before it answers (models that support
// it, unless THEFOLD_AI_REASONING is off): planning most, since every later step builds on
// the plan; fixing, diagnosis, intervention and review a middle amount, where a verdict or a
// fix follows from analysis; writing a planned file little; the assessments, the task order
// and Complete none (quick, cheap calls, and Complete is the caller's own request).
var reasoning = map[string]llm.Effort{
	"PlanTask":           llm.EffortHigh,
	"DecomposeProject":   llm.EffortHigh,
	"ReviseProjectPhase": llm.EffortHigh,
	"FixFile":            llm.EffortMedium,
	"DiagnoseFailure":    llm.EffortMedium,
	"Intervene":          llm.EffortMedium,
	"ReviewCode":         llm.EffortMedium,
	"ReviewProject":      llm.EffortMedium,
	"GenerateFile":       llm.EffortLow,
}

func call(rpc string, phase aiv1.CallPhase, req proto.Message, requestID string, m *aiv1.ModelChoice,
	a *aiv1.Attribution, d engine.Defaults, p *prompts.Prompt) *engine.Call {
	return &engine.Call{
		RPC: rpc, Phase: phase, RequestID: requestID, Request: req, Model: m, Attribution: a, Defaults: d,
		LLM: llm.Request{System: p.System, Messages: p.Messages, MaxTokens: p.MaxTokens, JSON: !p.Text,
			Reasoning: reasoning[rpc]},
	}
}

// generatingRequest is what every generating RPC's request has.
type generatingRequest interface {
	proto.Message
	GetRequestId() string
	GetModel() *aiv1.ModelChoice
	GetAttribution() *aiv1.Attribution
}

// rpcSpec is what tells the generating RPCs apart in the ledger and in model selection.
type rpcSpec struct {
	name     string
	phase    aiv1.CallPhase
	defaults engine.Defaults
}

// generate builds req's prompt and runs the call, parsing the answer with parse.
func generate[Req generatingRequest, Resp proto.Message](ctx context.Context, eng *engine.Engine, sp rpcSpec, req Req,
	build func(Req) (*prompts.Prompt, error), parse func(string) (Resp, error)) (Resp, error) {
	p, err := build(req)
	if err != nil {
		var zero Resp
		return zero, err
	}
	c := call(sp.name, sp.phase, req, req.GetRequestId(), req.GetModel(), req.GetAttribution(), sp.defaults, p)
	c.Fit = p.Fit
	return engine.Run(ctx, eng, c, parseWith(p, parse))
}

// AssessConfidence judges whether a task is clear enough to start.
func (s *AIServer) AssessConfidence(ctx context.Context, req *aiv1.AssessConfidenceRequest) (*aiv1.AssessConfidenceResponse, error) {
	if err := firstErr(
		checkCommon(req.RequestId, req.Model, req.Attribution),
		checkTask("task", req.Task),
		checkTree("project_tree", req.ProjectTree),
		checkContextFiles("context_files", req.ContextFiles),
		checkMemories("memories", req.Memories),
	); err != nil {
		return nil, err
	}
	return generate(ctx, s.eng, rpcSpec{"AssessConfidence", aiv1.CallPhase_CALL_PHASE_CONFIDENCE, assessDefaults}, req, prompts.AssessConfidence,
		prompts.ParseAssessConfidence)
}

// AssessComplexity rates a task and suggests the model for it.
func (s *AIServer) AssessComplexity(ctx context.Context, req *aiv1.AssessComplexityRequest) (*aiv1.AssessComplexityResponse, error) {
	if err := firstErr(
		checkCommon(req.RequestId, req.Model, req.Attribution),
		checkTask("task", req.Task),
		checkTree("project_tree", req.ProjectTree),
		checkContextFiles("context_files", req.ContextFiles),
	); err != nil {
		return nil, err
	}
	return generate(ctx, s.eng, rpcSpec{"AssessComplexity", aiv1.CallPhase_CALL_PHASE_COMPLEXITY, assessDefaults}, req, prompts.AssessComplexity,
		prompts.ParseAssessComplexity)
}

// PlanTask makes (or revises) the plan the builder executes.
func (s *AIServer) PlanTask(ctx context.Context, req *aiv1.PlanTaskRequest) (*aiv1.PlanTaskResponse, error) {
	if err := firstErr(
		checkCommon(req.RequestId, req.Model, req.Attribution),
		checkTask("task", req.Task),
		checkTree("project_tree", req.ProjectTree),
		checkContextFiles("context_files", req.ContextFiles),
		checkMemories("memories", req.Memories),
		checkCount("skills", len(req.Skills), maxListItems),
		checkAttempts("previous_attempts", req.PreviousAttempts),
		checkBytes("feedback", req.Feedback, maxDescription),
		checkBytes("strategy_hint", req.StrategyHint, maxDescription),
		checkBytes("enriched_context", req.EnrichedContext, maxText),
	); err != nil {
		return nil, err
	}
	return generate(ctx, s.eng, rpcSpec{"PlanTask", aiv1.CallPhase_CALL_PHASE_PLANNING, planDefaults}, req, prompts.PlanTask,
		prompts.ParsePlanTask)
}

// GenerateFile writes one planned file.
func (s *AIServer) GenerateFile(ctx context.Context, req *aiv1.GenerateFileRequest) (*aiv1.GenerateFileResponse, error) {
	if err := firstErr(
		checkCommon(req.RequestId, req.Model, req.Attribution),
		checkTask("task", req.Task),
		checkFileSpec(req.File),
		checkContextFiles("dependency_files", req.DependencyFiles),
		checkTree("project_structure", req.ProjectStructure),
		checkCount("skills", len(req.Skills), maxListItems),
		checkCount("patterns", len(req.Patterns), maxListItems),
		checkBytes("conventions", req.Conventions, maxText),
		validate.Enum("form", req.Form, true),
		checkShownPlan("plan", req.Plan),
		checkContextFiles("reference_files", req.ReferenceFiles),
	); err != nil {
		return nil, err
	}
	p, err := prompts.GenerateFile(req)
	if err != nil {
		return nil, err
	}
	c := call("GenerateFile", aiv1.CallPhase_CALL_PHASE_GENERATION, req, req.RequestId, req.Model, req.Attribution, codeDefaults, p)
	c.Fit = p.Fit
	return engine.Run(ctx, s.eng, c, readFile(prompts.NewGenerateSession(req),
		func(r *prompts.FileResult) *aiv1.GenerateFileResponse { return prompts.GenerateFileResponse(req, r) }))
}

func checkFileSpec(f *aiv1.FileSpec) error {
	if f == nil {
		return errs.Invalid("file", "required")
	}
	if err := checkPath("file.path", f.Path); err != nil {
		return err
	}
	if f.Action != typev1.FileAction_FILE_ACTION_CREATE && f.Action != typev1.FileAction_FILE_ACTION_MODIFY {
		return errs.Invalid("file.action", "want FILE_ACTION_CREATE or FILE_ACTION_MODIFY, got %s", f.Action)
	}
	if err := checkBytes("file.description", f.Description, maxDescription); err != nil {
		return err
	}
	return checkBytes("file.existing_content", f.ExistingContent, maxText)
}

// FixFile rewrites or edits a file so its diagnostics go away.
func (s *AIServer) FixFile(ctx context.Context, req *aiv1.FixFileRequest) (*aiv1.FixFileResponse, error) {
	if err := firstErr(
		checkCommon(req.RequestId, req.Model, req.Attribution),
		checkTask("task", req.Task),
		checkPath("path", req.Path),
		checkBytes("content", req.Content, maxText),
		checkDiagnostics("errors", req.Errors),
		checkBytes("error_output", req.ErrorOutput, maxText),
		checkContextFiles("dependency_files", req.DependencyFiles),
		validate.Enum("form", req.Form, true),
		checkCount("skills", len(req.Skills), maxListItems),
		checkCount("patterns", len(req.Patterns), maxListItems),
		checkBytes("conventions", req.Conventions, maxText),
		checkShownPlan("plan", req.Plan),
		checkContextFiles("reference_files", req.ReferenceFiles),
		checkFixHistory("previous_rounds", req.PreviousRounds),
		checkDiagnostics("expected_errors", req.ExpectedErrors),
		checkRelated("related_files", req.Path, req.RelatedFiles),
	); err != nil {
		return nil, err
	}
	if len(req.Errors) == 0 && req.ErrorOutput == "" {
		return nil, errs.Invalid("errors", "nothing to fix: give diagnostics or error_output")
	}
	if req.Attempt < 0 {
		return nil, errs.Invalid("attempt", "must not be negative, got %d", req.Attempt)
	}
	p, err := prompts.FixFile(req)
	if err != nil {
		return nil, err
	}
	c := call("FixFile", aiv1.CallPhase_CALL_PHASE_FIXING, req, req.RequestId, req.Model, req.Attribution, codeDefaults, p)
	c.Fit = p.Fit
	return engine.Run(ctx, s.eng, c, readFile(prompts.NewFixSession(req), prompts.FixFileResponse))
}

// ReviewCode reviews one task's changes.
func (s *AIServer) ReviewCode(ctx context.Context, req *aiv1.ReviewCodeRequest) (*aiv1.ReviewCodeResponse, error) {
	if err := firstErr(
		checkCommon(req.RequestId, req.Model, req.Attribution),
		checkTask("task", req.Task),
		checkReviewFiles("files", req.Files, true),
		checkBytes("validation_summary", req.ValidationSummary, maxText),
	); err != nil {
		return nil, err
	}
	return generate(ctx, s.eng, rpcSpec{"ReviewCode", aiv1.CallPhase_CALL_PHASE_REVIEW, reviewDefaults}, req, prompts.ReviewCode,
		prompts.ParseReviewCode)
}

// DiagnoseFailure classifies a failed attempt and recommends the recovery.
func (s *AIServer) DiagnoseFailure(ctx context.Context, req *aiv1.DiagnoseFailureRequest) (*aiv1.DiagnoseFailureResponse, error) {
	if err := firstErr(
		checkCommon(req.RequestId, req.Model, req.Attribution),
		checkTask("task", req.Task),
		checkDiagnostics("errors", req.Errors),
		checkBytes("error_output", req.ErrorOutput, maxText),
		checkAttempts("attempts", req.Attempts),
		checkContextFiles("files", req.Files),
	); err != nil {
		return nil, err
	}
	if len(req.Errors) == 0 && req.ErrorOutput == "" {
		return nil, errs.Invalid("errors", "nothing to diagnose: give diagnostics or error_output")
	}
	return generate(ctx, s.eng, rpcSpec{"DiagnoseFailure", aiv1.CallPhase_CALL_PHASE_DIAGNOSIS, reviewDefaults}, req, prompts.DiagnoseFailure,
		prompts.ParseDiagnoseFailure)
}

// Intervene decides what to do after repeated failures.
func (s *AIServer) Intervene(ctx context.Context, req *aiv1.InterveneRequest) (*aiv1.InterveneResponse, error) {
	if err := firstErr(
		checkCommon(req.RequestId, req.Model, req.Attribution),
		checkTask("task", req.Task),
		checkAttempts("attempts", req.Attempts),
	); err != nil {
		return nil, err
	}
	if len(req.Attempts) == 0 {
		return nil, errs.Invalid("attempts", "at least one failed attempt")
	}
	return generate(ctx, s.eng, rpcSpec{"Intervene", aiv1.CallPhase_CALL_PHASE_INTERVENTION, planDefaults}, req, prompts.Intervene,
		prompts.ParseIntervene)
}

// DecomposeProject breaks a project request into phases of tasks.
func (s *AIServer) DecomposeProject(ctx context.Context, req *aiv1.DecomposeProjectRequest) (*aiv1.DecomposeProjectResponse, error) {
	if err := firstErr(
		checkCommon(req.RequestId, req.Model, req.Attribution),
		requiredText("request", req.Request),
		checkTree("project_tree", req.ProjectTree),
		checkContextFiles("context_files", req.ContextFiles),
		checkMemories("memories", req.Memories),
	); err != nil {
		return nil, err
	}
	return generate(ctx, s.eng, rpcSpec{"DecomposeProject", aiv1.CallPhase_CALL_PHASE_PROJECT, projectDefaults}, req, prompts.DecomposeProject,
		prompts.ParseDecomposeProject)
}

// ReviseProjectPhase adjusts the next phase after the completed ones.
func (s *AIServer) ReviseProjectPhase(ctx context.Context, req *aiv1.ReviseProjectPhaseRequest) (*aiv1.ReviseProjectPhaseResponse, error) {
	if err := firstErr(
		checkCommon(req.RequestId, req.Model, req.Attribution),
		requiredText("request", req.Request),
		checkProjectPlan("plan", req.Plan),
		checkCount("completed", len(req.Completed), maxTasks),
	); err != nil {
		return nil, err
	}
	if req.PhaseIndex < 0 || int(req.PhaseIndex) >= len(req.Plan.Phases) {
		return nil, errs.Invalid("phase_index", "want 0 to %d, got %d", len(req.Plan.Phases)-1, req.PhaseIndex)
	}
	return generate(ctx, s.eng, rpcSpec{"ReviseProjectPhase", aiv1.CallPhase_CALL_PHASE_PROJECT, projectDefaults}, req, prompts.ReviseProjectPhase,
		func(raw string) (*aiv1.ReviseProjectPhaseResponse, error) {
			return prompts.ParseReviseProjectPhase(raw, req)
		})
}

// ReviewProject reviews a whole project before its human review.
func (s *AIServer) ReviewProject(ctx context.Context, req *aiv1.ReviewProjectRequest) (*aiv1.ReviewProjectResponse, error) {
	if err := firstErr(
		checkCommon(req.RequestId, req.Model, req.Attribution),
		requiredText("request", req.Request),
		checkProjectPlan("plan", req.Plan),
		checkCount("outcomes", len(req.Outcomes), maxTasks),
		checkReviewFiles("files", req.Files, false),
	); err != nil {
		return nil, err
	}
	return generate(ctx, s.eng, rpcSpec{"ReviewProject", aiv1.CallPhase_CALL_PHASE_PROJECT, projectDefaults}, req, prompts.ReviewProject,
		prompts.ParseReviewProject)
}

// PlanTaskOrder orders tasks by dependencies, complexity and priority.
func (s *AIServer) PlanTaskOrder(ctx context.Context, req *aiv1.PlanTaskOrderRequest) (*aiv1.PlanTaskOrderResponse, error) {
	if err := firstErr(
		checkCommon(req.RequestId, req.Model, req.Attribution),
		checkOrderable(req.Tasks),
	); err != nil {
		return nil, err
	}
	return generate(ctx, s.eng, rpcSpec{"PlanTaskOrder", aiv1.CallPhase_CALL_PHASE_ORDERING, orderDefaults}, req, prompts.PlanTaskOrder,
		func(raw string) (*aiv1.PlanTaskOrderResponse, error) { return prompts.ParsePlanTaskOrder(raw, req) })
}

// Embed returns one vector per text; the local embedder needs no provider.
func (s *AIServer) Embed(ctx context.Context, req *aiv1.EmbedRequest) (*aiv1.EmbedResponse, error) {
	if err := firstErr(
		validate.RequestID("request_id", req.RequestId),
		checkAttribution(req.Attribution),
		validate.MaxLen("model", req.Model, maxModelName),
	); err != nil {
		return nil, err
	}
	if len(req.Texts) == 0 {
		return nil, errs.Invalid("texts", "at least one text")
	}
	if len(req.Texts) > maxEmbedTexts {
		return nil, errs.Invalid("texts", "at most %d texts", maxEmbedTexts)
	}
	for i, t := range req.Texts {
		if len(t) > maxEmbedText {
			return nil, errs.Invalid("texts", "text %d: at most %d bytes", i, maxEmbedText)
		}
	}
	if d := req.Dimensions; d != 0 && (d < embed.MinDims || d > embed.MaxDims) {
		return nil, errs.Invalid("dimensions", "want 0 or %d to %d, got %d", embed.MinDims, embed.MaxDims, d)
	}
	return s.eng.Embed(ctx, req)
}

// EstimateCost prices tokens on a registry model; it calls nothing and records nothing.
func (s *AIServer) EstimateCost(ctx context.Context, req *aiv1.EstimateCostRequest) (*aiv1.EstimateCostResponse, error) {
	if _, err := validate.RequiredText("model", req.Model, maxModelName); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"input_tokens", req.InputTokens}, {"output_tokens", req.OutputTokens}, {"cache_read_tokens", req.CacheReadTokens}, {"cache_write_tokens", req.CacheWriteTokens}} {
		if f.v < 0 || f.v > 1<<40 {
			return nil, errs.Invalid(f.name, "want 0 to %d, got %d", int64(1)<<40, f.v)
		}
	}
	if req.CacheReadTokens+req.CacheWriteTokens > req.InputTokens {
		return nil, errs.Invalid("input_tokens", "includes the cache-read and cache-write tokens, so it cannot be less than their sum (%d)", req.CacheReadTokens+req.CacheWriteTokens)
	}
	cand, err := s.reg.ResolveModel(ctx, req.Model)
	if err != nil {
		return nil, err
	}
	c := registry.Price(cand.Model, req.InputTokens, req.OutputTokens, req.CacheReadTokens, req.CacheWriteTokens)
	return &aiv1.EstimateCostResponse{
		CostMicros: c.Total, InputCostMicros: c.Input, OutputCostMicros: c.Output,
		CacheReadCostMicros: c.CacheRead, CacheWriteCostMicros: c.CacheWrite, Model: cand.Model,
	}, nil
}

func requiredText(field, v string) error {
	if _, err := validate.RequiredText(field, v, maxText); err != nil {
		return err
	}
	return nil
}

// firstErr returns the first non-nil error: checks run in the order of the fields.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
