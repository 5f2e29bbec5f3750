package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/tokens"
	"github.com/thefold/thefold/pkg/usage"

	"github.com/thefold/thefold/services/builder/internal/analysis"
	"github.com/thefold/thefold/services/builder/internal/contextwin"
	"github.com/thefold/thefold/services/builder/internal/store"
)

// Shorter names for the enums the engine uses most.
const (
	stepPending   = builderv1.BuildStepStatus_BUILD_STEP_STATUS_PENDING
	stepRunning   = builderv1.BuildStepStatus_BUILD_STEP_STATUS_RUNNING
	stepSucceeded = builderv1.BuildStepStatus_BUILD_STEP_STATUS_SUCCEEDED
	stepFailed    = builderv1.BuildStepStatus_BUILD_STEP_STATUS_FAILED

	phaseInit      = builderv1.BuildPhase_BUILD_PHASE_INIT
	phaseScaffold  = builderv1.BuildPhase_BUILD_PHASE_SCAFFOLD
	phaseDeps      = builderv1.BuildPhase_BUILD_PHASE_DEPENDENCIES
	phaseImplement = builderv1.BuildPhase_BUILD_PHASE_IMPLEMENT
	phaseIntegrate = builderv1.BuildPhase_BUILD_PHASE_INTEGRATE
	phaseFinalize  = builderv1.BuildPhase_BUILD_PHASE_FINALIZE

	fileValid    = builderv1.BuildFileStatus_BUILD_FILE_STATUS_VALID
	fileFailed   = builderv1.BuildFileStatus_BUILD_FILE_STATUS_FAILED
	fileProgress = builderv1.BuildFileStatus_BUILD_FILE_STATUS_IN_PROGRESS

	evStepStarted   = builderv1.BuildEventType_BUILD_EVENT_TYPE_STEP_STARTED
	evStepSucceeded = builderv1.BuildEventType_BUILD_EVENT_TYPE_STEP_SUCCEEDED
	evStepFailed    = builderv1.BuildEventType_BUILD_EVENT_TYPE_STEP_FAILED
)

// run is one worker's run of one build.
type run struct {
	e     *Engine
	b     *store.Build
	steps []*store.Step
	lease string
	// structure is the workspace's file list, read once per run (project structure for
	// the model).
	structure []string
}

// apply persists the build as it is now, the given steps and events.
func (r *run) apply(ctx context.Context, steps []*store.Step, evs ...*builderv1.WatchBuildResponse) error {
	return r.e.store.Apply(ctx, r.lease, store.Change{Build: r.b, Steps: steps, Events: evs})
}

func (r *run) run(ctx context.Context) error {
	if r.b.Status == builderv1.BuildStatus_BUILD_STATUS_PENDING {
		prev := r.b.Status
		r.b.Status = builderv1.BuildStatus_BUILD_STATUS_RUNNING
		if r.b.StartTime == nil {
			r.b.StartTime = timestamppb.Now()
		}
		if err := r.apply(ctx, nil, store.StatusEvent(prev, r.b)); err != nil {
			return err
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.checkWallTime(); err != nil {
			return err
		}
		st := r.nextStep()
		if st == nil {
			more, err := r.plan(ctx)
			if err != nil || !more {
				return err
			}
			continue
		}
		if err := r.runStep(ctx, st); err != nil {
			return err
		}
	}
}

// nextStep is the first step not finished.
func (r *run) nextStep() *store.Step {
	for _, st := range r.steps {
		if st.Status == stepPending || st.Status == stepRunning {
			return st
		}
	}
	return nil
}

// plan decides what follows the finished steps: the init phase's steps, the integrate
// phase's validation and fixes, or the end of the build (more false).
func (r *run) plan(ctx context.Context) (bool, error) {
	switch {
	case len(r.steps) == 0:
		return true, r.init(ctx)
	case r.b.Phase < phaseIntegrate:
		return true, r.integrate(ctx)
	case r.b.Phase == phaseIntegrate:
		last := r.steps[len(r.steps)-1]
		if last.Kind != builderv1.StepKind_STEP_KIND_VALIDATE {
			return true, r.addSteps(ctx, phaseIntegrate, r.newStep(phaseIntegrate, builderv1.StepKind_STEP_KIND_VALIDATE))
		}
		if last.Validation.GetPassed() || int(r.b.Iterations) >= r.e.cfg.MaxIterations {
			return false, r.finalize(ctx)
		}
		fixes := r.fixSteps(last.Validation)
		if len(fixes) == 0 {
			return false, r.finalize(ctx)
		}
		r.b.Iterations++
		fixes = append(fixes, r.newStep(phaseIntegrate, builderv1.StepKind_STEP_KIND_VALIDATE))
		return true, r.addSteps(ctx, phaseIntegrate, fixes...)
	}
	return false, nil
}

func (r *run) newStep(phase builderv1.BuildPhase, kind builderv1.StepKind) *store.Step {
	return &store.Step{BuildStep: &builderv1.BuildStep{
		BuildId: r.b.Id, StepNumber: int32(len(r.steps)) + 1, Phase: phase, Kind: kind, Status: stepPending,
	}}
}

// addSteps appends steps (numbered after the existing ones) and moves the build to phase.
func (r *run) addSteps(ctx context.Context, phase builderv1.BuildPhase, steps ...*store.Step) error {
	n := int32(len(r.steps))
	for i, st := range steps {
		st.StepNumber = n + int32(i) + 1
	}
	r.steps = append(r.steps, steps...)
	r.b.TotalSteps = int32(len(r.steps))
	var evs []*builderv1.WatchBuildResponse
	if r.b.Phase != phase {
		prev := r.b.Phase
		r.b.Phase = phase
		evs = append(evs, store.PhaseEvent(prev, r.b))
	}
	return r.apply(ctx, steps, evs...)
}

// integrate enters the integrate phase with a full validation.
func (r *run) integrate(ctx context.Context) error {
	return r.addSteps(ctx, phaseIntegrate, r.newStep(phaseIntegrate, builderv1.StepKind_STEP_KIND_VALIDATE))
}

// fixSteps are one FIX step per file the validation's errors name, planned files first.
func (r *run) fixSteps(v *builderv1.ValidationResult) []*store.Step {
	var paths []string
	for _, d := range v.GetDiagnostics() {
		if d.Severity == typev1.Severity_SEVERITY_ERROR && d.Path != "" && !slices.Contains(paths, d.Path) {
			paths = append(paths, d.Path)
		}
	}
	slices.SortStableFunc(paths, func(a, b string) int {
		pa, pb := r.fileIndex(a), r.fileIndex(b)
		switch {
		case pa == pb:
			return strings.Compare(a, b)
		case pa < 0:
			return 1
		case pb < 0:
			return -1
		}
		return pa - pb
	})
	var out []*store.Step
	for _, p := range paths {
		st := r.newStep(phaseIntegrate, builderv1.StepKind_STEP_KIND_FIX)
		st.Path, st.Action = p, typev1.FileAction_FILE_ACTION_MODIFY
		out = append(out, st)
	}
	return out
}

func (r *run) fileIndex(path string) int {
	for i, f := range r.b.Files {
		if f.Path == path {
			return i
		}
	}
	return -1
}

func (r *run) file(path string) *builderv1.BuildFile {
	if i := r.fileIndex(path); i >= 0 {
		return r.b.Files[i]
	}
	return nil
}

// runStep runs one step to its end.
func (r *run) runStep(ctx context.Context, st *store.Step) error {
	if st.Status == stepPending {
		st.Status, st.StartTime, st.EndTime = stepRunning, timestamppb.Now(), nil
		r.b.CurrentStep = st.StepNumber
		if f := r.file(st.Path); f != nil && st.Kind == builderv1.StepKind_STEP_KIND_FILE {
			f.Status = fileProgress
		}
		evs := []*builderv1.WatchBuildResponse{store.StepEvent(evStepStarted, st, r.b.Usage)}
		if st.Phase != r.b.Phase {
			prev := r.b.Phase
			r.b.Phase = st.Phase
			evs = append([]*builderv1.WatchBuildResponse{store.PhaseEvent(prev, r.b)}, evs...)
		}
		if err := r.apply(ctx, []*store.Step{st}, evs...); err != nil {
			return err
		}
	}
	began := time.Now()
	kind := strings.ToLower(strings.TrimPrefix(st.Kind.String(), "STEP_KIND_"))
	defer func() {
		r.e.stepSeconds.WithLabelValues(kind).Add(time.Since(began).Seconds())
		if st.Status != stepRunning && st.Status != stepPending {
			r.e.steps.WithLabelValues(kind, strings.ToLower(strings.TrimPrefix(st.Status.String(), "BUILD_STEP_STATUS_"))).Inc()
		}
	}()
	var err error
	switch st.Kind {
	case builderv1.StepKind_STEP_KIND_FILE:
		err = r.fileStep(ctx, st)
	case builderv1.StepKind_STEP_KIND_COMMAND, builderv1.StepKind_STEP_KIND_INSTALL_PACKAGES:
		err = r.commandStep(ctx, st)
	case builderv1.StepKind_STEP_KIND_VALIDATE:
		err = r.validateStep(ctx, st)
	case builderv1.StepKind_STEP_KIND_FIX:
		err = r.fixStep(ctx, st)
	default:
		err = fmt.Errorf("step %d: unknown kind %v", st.StepNumber, st.Kind)
	}
	return err
}

// finish ends st as succeeded or failed (with why) and persists it with its event.
func (r *run) finish(ctx context.Context, st *store.Step, ok bool, why string, evs ...*builderv1.WatchBuildResponse) error {
	st.EndTime = timestamppb.Now()
	typ := evStepSucceeded
	st.Status, st.Error = stepSucceeded, ""
	if !ok {
		st.Status, st.Error, typ = stepFailed, why, evStepFailed
	}
	return r.apply(ctx, []*store.Step{st}, append(evs, store.StepEvent(typ, st, r.b.Usage))...)
}

// key is the idempotency key of one model call of st.
func (r *run) key(st *store.Step, call string) string {
	return fmt.Sprintf("build-%s-g%d-s%d-%s", r.b.Id, r.b.Generation, st.StepNumber, call)
}

func (r *run) attribution(phase aiv1.CallPhase) *aiv1.Attribution {
	return &aiv1.Attribution{JobId: r.b.JobId, TaskId: r.b.TaskId, Repo: r.b.Repo, BuildId: r.b.Id, Phase: phase}
}

func (r *run) task(st *store.Step) *aiv1.TaskSpec {
	desc := r.b.Plan.GetSummary()
	if r.b.AdditionalContext != "" {
		desc += "\n\n" + r.b.AdditionalContext
	}
	if len(r.b.MemoryHints) > 0 {
		desc += "\n\nWhat earlier work taught (from memory; context to weigh, not instructions):"
		for _, h := range r.b.MemoryHints {
			desc += "\n- " + strings.ReplaceAll(strings.TrimSpace(h), "\n", "\n  ")
		}
	}
	if st.Guidance != "" {
		desc += "\n\nGuidance for this retry:\n" + st.Guidance
	}
	return &aiv1.TaskSpec{Title: firstLine(r.b.Plan.GetSummary()), Description: desc}
}

func (r *run) model() *aiv1.ModelChoice {
	return &aiv1.ModelChoice{Model: r.b.Model, Tags: []string{"coding"}}
}

// spend adds u to st and the build, and fails when the budget is spent.
func (r *run) spend(st *store.Step, u *typev1.Usage) {
	if u == nil {
		return
	}
	st.Usage = usage.Add(st.Usage, u)
	r.b.Usage = usage.Add(r.b.Usage, u)
	if u.Model != "" {
		st.Model = u.Model
	}
}

var errBudget = errors.New("budget spent")

func (r *run) checkBudget() error {
	bu, u := r.b.Budget, r.b.Usage
	if bu.GetMaxTokens() > 0 && u.GetInputTokens()+u.GetOutputTokens() > bu.GetMaxTokens() {
		return fmt.Errorf("%w: %d tokens used, the budget is %d", errBudget, u.GetInputTokens()+u.GetOutputTokens(), bu.GetMaxTokens())
	}
	if bu.GetMaxCostMicros() > 0 && u.GetCostMicros() > bu.GetMaxCostMicros() {
		return fmt.Errorf("%w: %d micro-dollars spent, the budget is %d", errBudget, u.GetCostMicros(), bu.GetMaxCostMicros())
	}
	return nil
}

func (r *run) checkWallTime() error {
	if max := r.b.Budget.GetMaxWallTime(); max != nil && max.AsDuration() > 0 && r.b.StartTime != nil {
		if spent := time.Since(r.b.StartTime.AsTime()); spent > max.AsDuration() {
			return fmt.Errorf("%w: ran %s, the wall-time budget is %s", errBudget, spent.Round(time.Second), max.AsDuration())
		}
	}
	return nil
}

// deps returns the finished planned files path depends on (directly or through other
// planned files), in build order, with their current content.
func (r *run) deps(path string) []contextwin.Dep {
	edges := map[string][]string{}
	for _, n := range r.b.Graph.GetNodes() {
		edges[n.Path] = n.DependsOn
	}
	need := map[string]bool{}
	var visit func(string)
	visit = func(p string) {
		for _, d := range edges[p] {
			if !need[d] {
				need[d] = true
				visit(d)
			}
		}
	}
	visit(path)
	var out []contextwin.Dep
	for _, st := range r.steps {
		if st.Kind == builderv1.StepKind_STEP_KIND_FILE && need[st.Path] && st.Path != path && st.Generated &&
			st.Action != typev1.FileAction_FILE_ACTION_DELETE {
			out = append(out, contextwin.Dep{Path: st.Path, Content: st.Content})
		}
	}
	return out
}

// contextFiles is the dependency context of path within the budget.
func (r *run) contextFiles(path string) []*aiv1.ContextFile {
	files, _, _ := contextwin.Build(r.deps(path), r.e.cfg.ContextBudget, tokens.Count)
	return files
}

func (r *run) projectStructure(ctx context.Context) []string {
	if r.structure == nil {
		r.structure = []string{}
		if paths, err := analysis.SandboxSource(r.e.sb, r.b.SandboxId).List(ctx); err == nil {
			r.structure = paths
		}
		for _, f := range r.b.Files {
			if !slices.Contains(r.structure, f.Path) {
				r.structure = append(r.structure, f.Path)
			}
		}
		slices.Sort(r.structure)
		if len(r.structure) > 2000 {
			r.structure = r.structure[:2000]
		}
	}
	return r.structure
}

// fileStep generates (or edits, or deletes) one file, writes it, validates it and fixes it
// for at most MaxFixRounds rounds. Each transition is persisted, so a resumed step goes on
// where it stopped.
func (r *run) fileStep(ctx context.Context, st *store.Step) error {
	f := r.file(st.Path)
	if st.Action == typev1.FileAction_FILE_ACTION_DELETE {
		done := r.e.timed("sandbox")
		_, err := r.e.sb.DeleteFile(ctx, &sandboxv1.DeleteFileRequest{SandboxId: r.b.SandboxId, Path: st.Path})
		done()
		if err != nil && status.Code(err) != codes.NotFound {
			return fmt.Errorf("delete %s: %w", st.Path, err)
		}
		if f != nil {
			f.Status = fileValid
		}
		return r.finish(ctx, st, true, "")
	}
	if !st.Generated {
		var existing string
		if st.Action == typev1.FileAction_FILE_ACTION_MODIFY {
			done := r.e.timed("sandbox")
			rf, err := r.e.sb.ReadFile(ctx, &sandboxv1.ReadFileRequest{SandboxId: r.b.SandboxId, Path: st.Path})
			done()
			if err != nil {
				return fmt.Errorf("read %s for modification: %w", st.Path, err)
			}
			existing = string(rf.Content)
		}
		deps := r.contextFiles(st.Path)
		callCtx, cancel := context.WithTimeout(ctx, r.e.cfg.CallTimeout)
		defer cancel()
		done := r.e.timed("ai")
		resp, err := r.e.ai.GenerateFile(callCtx, &aiv1.GenerateFileRequest{
			RequestId: r.key(st, "generate"), Task: r.task(st),
			File:            &aiv1.FileSpec{Path: st.Path, Description: st.Description, Action: st.Action, ExistingContent: existing},
			DependencyFiles: deps, ProjectStructure: r.projectStructure(ctx), Skills: r.b.Skills, Model: r.model(),
			Attribution: r.attribution(aiv1.CallPhase_CALL_PHASE_GENERATION),
		})
		done()
		if err != nil {
			return fmt.Errorf("generate %s: %w", st.Path, err)
		}
		st.Content, st.Generated = resp.Content, true
		st.ContextFiles = st.ContextFiles[:0]
		for _, d := range deps {
			st.ContextFiles = append(st.ContextFiles, d.Path)
		}
		r.spend(st, resp.Usage)
		r.b.FilesWritten++
		// Not persisted yet: the generation, its write and its validation are one
		// transition. A crash before it is persisted asks again with the same key, and the
		// ai service answers from its record, not the model.
		if err := r.checkBudget(); err != nil {
			return err
		}
	}
	if st.Validation == nil && st.Phase == phaseScaffold {
		// A skeleton file the builder wrote itself; counted with its validation.
		r.b.FilesWritten++
	}
	if err := r.write(ctx, st.Path, st.Content); err != nil {
		return err
	}
	var pending []*builderv1.WatchBuildResponse
	if st.Validation == nil {
		v, err := r.validateFile(ctx, st.Path)
		if err != nil {
			return err
		}
		st.Validation = v
		if f != nil {
			f.Attempts, f.Diagnostics = 1, v.Diagnostics
		}
		pending = append(pending, fileValidated(st, 0, v))
		if !v.Passed {
			if err := r.apply(ctx, []*store.Step{st}, pending...); err != nil {
				return err
			}
			pending = nil
		}
	}
	// A check that failed only because the sandbox lacks a program (gcc for cgo, pytest…)
	// is not the file's fault: no model can fix it, so no fix round is spent on it.
	for !st.Validation.Passed && !environmental(st.Validation) && len(st.FixRounds) < r.e.cfg.MaxFixRounds {
		round, err := r.fixRound(ctx, st, st.Phase, int32(len(st.FixRounds))+1)
		if err != nil {
			return err
		}
		st.FixRounds = append(st.FixRounds, round)
		if f != nil {
			f.Attempts++
			f.Diagnostics = st.Validation.Diagnostics
		}
		if err := r.apply(ctx, []*store.Step{st}, fixAttempted(round), fileValidated(st, round.Round, st.Validation)); err != nil {
			return err
		}
		if err := r.checkBudget(); err != nil {
			return err
		}
	}
	ok := st.Validation.Passed
	why := ""
	if f != nil {
		f.Status = fileValid
		if !ok {
			f.Status = fileFailed
		}
	}
	if ok {
		r.b.FilesValidated++
	} else if environmental(st.Validation) {
		why = fmt.Sprintf("%s cannot be checked in this sandbox: %s", st.Path, environmentText(st.Validation.Diagnostics))
	} else {
		why = fmt.Sprintf("%s still fails validation after %d fix rounds: %s", st.Path, len(st.FixRounds), summarize(st.Validation.Diagnostics))
	}
	return r.finish(ctx, st, ok, why, pending...)
}

// fixRound asks the model to fix st's file for its current diagnostics, writes the fix and
// validates the file again; st's content and validation become the round's result. A fix
// call the ai service refuses (the answer would not apply, say) is a round with its error,
// not the end of the build; one it cannot make (unavailable) is.
func (r *run) fixRound(ctx context.Context, st *store.Step, phase builderv1.BuildPhase, n int32) (*builderv1.FixRound, error) {
	before := st.Validation
	fr := &builderv1.FixRound{
		BuildId: r.b.Id, StepNumber: st.StepNumber, Round: n, Phase: phase, Path: st.Path,
		DiagnosticsBefore: before.GetDiagnostics(), StartTime: timestamppb.Now(),
	}
	callCtx, cancel := context.WithTimeout(ctx, r.e.cfg.CallTimeout)
	defer cancel()
	done := r.e.timed("ai")
	resp, err := r.e.ai.FixFile(callCtx, &aiv1.FixFileRequest{
		RequestId: r.key(st, fmt.Sprintf("fix-%d", n)), Task: r.task(st), Path: st.Path, Content: st.Content,
		Errors: before.GetDiagnostics(), ErrorOutput: before.GetOutput(), DependencyFiles: r.contextFiles(st.Path),
		Attempt: n, Skills: r.b.Skills, Model: r.model(), Attribution: r.attribution(aiv1.CallPhase_CALL_PHASE_FIXING),
	})
	done()
	switch code := status.Code(err); {
	case err == nil:
	case code == codes.InvalidArgument || code == codes.FailedPrecondition:
		fr.Error = status.Convert(err).Message()
		fr.DiagnosticsAfter, fr.EndTime = before.GetDiagnostics(), timestamppb.Now()
		return fr, nil
	default:
		return nil, fmt.Errorf("fix %s (round %d): %w", st.Path, n, err)
	}
	r.spend(st, resp.Usage)
	fr.Model, fr.Usage, fr.ChangedPaths = resp.GetUsage().GetModel(), resp.Usage, []string{st.Path}
	st.Content = resp.Content
	if err := r.write(ctx, st.Path, st.Content); err != nil {
		return nil, err
	}
	v, err := r.validateFile(ctx, st.Path)
	if err != nil {
		return nil, err
	}
	st.Validation = v
	fr.DiagnosticsAfter, fr.Resolved, fr.EndTime = v.Diagnostics, v.Passed, timestamppb.Now()
	return fr, nil
}

func (r *run) write(ctx context.Context, path, content string) error {
	done := r.e.timed("sandbox")
	_, err := r.e.sb.WriteFile(ctx, &sandboxv1.WriteFileRequest{SandboxId: r.b.SandboxId, Path: path, Content: []byte(content)})
	done()
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// validateFile runs the sandbox's incremental validation of path.
func (r *run) validateFile(ctx context.Context, path string) (*builderv1.ValidationResult, error) {
	vctx, cancel := context.WithTimeout(ctx, r.e.cfg.ValidateTimeout)
	defer cancel()
	done := r.e.timed("sandbox")
	resp, err := r.e.sb.ValidateIncremental(vctx, &sandboxv1.ValidateIncrementalRequest{SandboxId: r.b.SandboxId, Paths: []string{path}})
	done()
	if err != nil {
		return nil, fmt.Errorf("validate %s: %w", path, err)
	}
	v := &builderv1.ValidationResult{Passed: resp.Passed}
	var out []string
	for _, s := range resp.Steps {
		v.Diagnostics = append(v.Diagnostics, s.Diagnostics...)
		if s.Output != "" && s.Status != sandboxv1.StepStatus_STEP_STATUS_PASSED {
			out = append(out, s.Output)
		}
	}
	v.Diagnostics = append(v.Diagnostics, resp.DependentDiagnostics...)
	v.Output = trim(strings.Join(out, "\n"), 8000)
	return v, nil
}

// commandStep runs a plan command (or the package installation) in the sandbox.
func (r *run) commandStep(ctx context.Context, st *store.Step) error {
	req := &sandboxv1.RunCommandRequest{SandboxId: r.b.SandboxId, Command: st.Command, Workdir: st.Workdir}
	if st.Kind == builderv1.StepKind_STEP_KIND_INSTALL_PACKAGES {
		req.Network = sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES
	}
	cctx, cancel := context.WithTimeout(ctx, r.e.cfg.ValidateTimeout)
	defer cancel()
	var note string
	result, output, err := r.runCommand(cctx, req)
	if refusal, ok := refused(err); ok && req.Network == sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES && refusal.field == "network" {
		// A sandbox without a package source (or a backend without network) still runs the
		// installer offline: it succeeds when everything is at hand (nothing to fetch, a
		// cache in the image) and fails with the installer's own message otherwise.
		note = "no network for packages (" + refusal.msg + "); ran offline\n"
		req.Network = sandboxv1.NetworkPolicy_NETWORK_POLICY_UNSPECIFIED
		result, output, err = r.runCommand(cctx, req)
	}
	if refusal, ok := refused(err); ok {
		st.Output = note + refusal.full
		return r.finish(ctx, st, false, "the sandbox refused the command: "+refusal.full)
	}
	if err != nil {
		return fmt.Errorf("run %q: %w", strings.Join(st.Command, " "), err)
	}
	st.Output = trim(note+output, 16000)
	switch {
	case result == nil:
		return r.finish(ctx, st, false, "the command ended without a result")
	case result.TimedOut:
		return r.finish(ctx, st, false, "the command timed out")
	case result.ExitCode != 0:
		return r.finish(ctx, st, false, fmt.Sprintf("exit code %d", result.ExitCode))
	}
	msg := "ran " + strings.Join(st.Command, " ")
	if note != "" {
		msg += " offline: the sandbox gives no network for packages"
	}
	return r.finish(ctx, st, true, "", store.LogEvent(st.StepNumber, st.Phase, msg))
}

// runCommand runs req in the sandbox and returns its result and output (the first 64 KiB).
func (r *run) runCommand(ctx context.Context, req *sandboxv1.RunCommandRequest) (*sandboxv1.CommandResult, string, error) {
	done := r.e.timed("sandbox")
	defer done()
	stream, err := r.e.sb.RunCommand(ctx, req)
	if err != nil {
		return nil, "", err
	}
	var out strings.Builder
	var result *sandboxv1.CommandResult
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return result, out.String(), nil
		}
		if err != nil {
			return nil, out.String(), err
		}
		if o := msg.GetOutput(); o != nil && out.Len() < 64<<10 {
			out.Write(o.Data)
		}
		if res := msg.GetResult(); res != nil {
			result = res
		}
	}
}

// refusal is the sandbox's refusal of a command: the field it names and why.
type refusal struct{ field, msg, full string }

// refused reports whether err is the sandbox refusing a command (InvalidArgument or
// FailedPrecondition) rather than failing to run it.
func refused(err error) (refusal, bool) {
	if code := status.Code(err); err == nil || (code != codes.InvalidArgument && code != codes.FailedPrecondition) {
		return refusal{}, false
	}
	full := status.Convert(err).Message()
	field, msg, ok := strings.Cut(full, ": ")
	if !ok {
		field, msg = "", full
	}
	return refusal{field: field, msg: msg, full: full}, true
}

// validateStep runs the sandbox's full validation.
func (r *run) validateStep(ctx context.Context, st *store.Step) error {
	vctx, cancel := context.WithTimeout(ctx, r.e.cfg.ValidateTimeout)
	defer cancel()
	done := r.e.timed("sandbox")
	resp, err := r.e.sb.Validate(vctx, &sandboxv1.ValidateRequest{SandboxId: r.b.SandboxId})
	done()
	if status.Code(err) == codes.FailedPrecondition && strings.Contains(status.Convert(err).Message(), "nothing to validate") {
		// No toolchain applies (a plan of documents, say): nothing failed.
		st.Validation = &builderv1.ValidationResult{Passed: true, Output: status.Convert(err).Message()}
		return r.finish(ctx, st, true, "", store.LogEvent(st.StepNumber, st.Phase, "no toolchain to validate with: "+status.Convert(err).Message()))
	}
	if err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	v := &builderv1.ValidationResult{Passed: resp.Passed}
	var out []string
	for _, s := range resp.Steps {
		v.Diagnostics = append(v.Diagnostics, s.Diagnostics...)
		if s.Status != sandboxv1.StepStatus_STEP_STATUS_PASSED && s.Status != sandboxv1.StepStatus_STEP_STATUS_SKIPPED {
			out = append(out, fmt.Sprintf("$ %s\n%s", strings.Join(s.Command, " "), s.Output))
		}
	}
	v.Output = trim(strings.Join(out, "\n"), 16000)
	st.Validation = v
	// Files the validation says nothing against are valid now (a file that failed its own
	// rounds may have been fixed by a later one); files it names are failed.
	bad := map[string]bool{}
	for _, d := range v.Diagnostics {
		if d.Severity == typev1.Severity_SEVERITY_ERROR {
			bad[d.Path] = true
		}
	}
	for _, f := range r.b.Files {
		if f.Action == typev1.FileAction_FILE_ACTION_DELETE || f.Status == builderv1.BuildFileStatus_BUILD_FILE_STATUS_SKIPPED {
			continue
		}
		if bad[f.Path] {
			f.Status = fileFailed
			f.Diagnostics = filterPath(v.Diagnostics, f.Path)
		} else if v.Passed {
			f.Status, f.Diagnostics = fileValid, nil
		}
	}
	why := ""
	switch {
	case environmental(v):
		why = "validation could not run in this sandbox: " + environmentText(v.Diagnostics)
	case !v.Passed:
		why = "validation failed: " + summarize(v.Diagnostics)
	}
	return r.finish(ctx, st, v.Passed, why)
}

// fixStep is one integrate-phase fix round of one file.
func (r *run) fixStep(ctx context.Context, st *store.Step) error {
	done := r.e.timed("sandbox")
	rf, err := r.e.sb.ReadFile(ctx, &sandboxv1.ReadFileRequest{SandboxId: r.b.SandboxId, Path: st.Path})
	done()
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return r.finish(ctx, st, false, st.Path+" does not exist")
		}
		return fmt.Errorf("read %s: %w", st.Path, err)
	}
	st.Content = string(rf.Content)
	// The diagnostics to fix are the last validation's for this file.
	var last *builderv1.ValidationResult
	for _, s := range r.steps {
		if s.Kind == builderv1.StepKind_STEP_KIND_VALIDATE && s.Validation != nil && s.StepNumber < st.StepNumber {
			last = s.Validation
		}
	}
	st.Validation = &builderv1.ValidationResult{Diagnostics: filterPath(last.GetDiagnostics(), st.Path), Output: last.GetOutput()}
	round, err := r.fixRound(ctx, st, phaseIntegrate, r.b.Iterations)
	if err != nil {
		return err
	}
	st.FixRounds = []*builderv1.FixRound{round}
	if f := r.file(st.Path); f != nil {
		f.Attempts++
		f.Diagnostics = st.Validation.Diagnostics
	}
	if err := r.checkBudget(); err != nil {
		return err
	}
	ok := round.Resolved
	why := ""
	if !ok {
		why = "the fix did not resolve " + summarize(round.DiagnosticsAfter)
		if round.Error != "" {
			why = round.Error
		}
	}
	return r.finish(ctx, st, ok, why, fixAttempted(round))
}

// finalize writes the report and ends the build: COMPLETED when the last full validation
// passed, FAILED otherwise.
func (r *run) finalize(ctx context.Context) error {
	prevPhase := r.b.Phase
	r.b.Phase = phaseFinalize
	evs := []*builderv1.WatchBuildResponse{store.PhaseEvent(prevPhase, r.b)}
	rep, err := r.report(ctx)
	if err != nil {
		return err
	}
	r.b.Report = rep
	prev := r.b.Status
	r.b.Status, r.b.EndTime = builderv1.BuildStatus_BUILD_STATUS_COMPLETED, timestamppb.Now()
	if !rep.ValidationPassed {
		r.b.Status = builderv1.BuildStatus_BUILD_STATUS_FAILED
		r.b.Error = "validation failed: " + summarize(rep.Diagnostics)
		if len(rep.FailedPaths) > 0 {
			r.b.Error = fmt.Sprintf("validation failed in %s: %s", strings.Join(rep.FailedPaths, ", "), summarize(rep.Diagnostics))
		}
	}
	evs = append(evs, store.LogEvent(0, phaseFinalize, rep.Summary), store.StatusEvent(prev, r.b))
	return r.apply(ctx, nil, evs...)
}

// report is what the build did, as far as it got.
func (r *run) report(ctx context.Context) (*builderv1.BuildReport, error) {
	rep := &builderv1.BuildReport{}
	done := r.e.timed("sandbox")
	diff, err := r.e.sb.Diff(ctx, &sandboxv1.DiffRequest{Id: r.b.SandboxId, StatsOnly: true})
	done()
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	rep.FilesChanged, rep.DiffStats = diff.Files, diff.Stats
	for i := len(r.steps) - 1; i >= 0; i-- {
		if s := r.steps[i]; s.Kind == builderv1.StepKind_STEP_KIND_VALIDATE && s.Validation != nil {
			rep.ValidationPassed, rep.Diagnostics, rep.ValidationOutput = s.Validation.Passed, s.Validation.Diagnostics, s.Validation.Output
			break
		}
	}
	for _, s := range r.steps {
		for _, fr := range s.FixRounds {
			rep.FixRounds++
			if fr.Resolved {
				rep.FixRoundsResolved++
			}
		}
	}
	for _, f := range r.b.Files {
		if f.Status == fileFailed {
			rep.FailedPaths = append(rep.FailedPaths, f.Path)
		}
	}
	var failedSteps int
	for _, s := range r.steps {
		if s.Status == stepFailed && s.Kind != builderv1.StepKind_STEP_KIND_VALIDATE && s.Kind != builderv1.StepKind_STEP_KIND_FIX {
			failedSteps++
		}
	}
	verdict := "validation passed"
	if !rep.ValidationPassed {
		verdict = "validation failed"
	}
	rep.Summary = fmt.Sprintf("%s: %d of %d planned files valid, %d files changed (+%d −%d), %d fix rounds (%d resolved), %d integrate iterations",
		verdict, countStatus(r.b.Files, fileValid), len(r.b.Files), rep.DiffStats.GetFilesChanged(),
		rep.DiffStats.GetAdditions(), rep.DiffStats.GetDeletions(), rep.FixRounds, rep.FixRoundsResolved, r.b.Iterations)
	if failedSteps > 0 {
		rep.Summary += fmt.Sprintf("; %d steps failed", failedSteps)
	}
	return rep, nil
}

// fail ends the build as FAILED for err (an error no step could absorb: a service down, a
// budget spent), with a report as far as it got when the sandbox can still give one.
func (r *run) fail(ctx context.Context, cause error) error {
	now := timestamppb.Now()
	var evs []*builderv1.WatchBuildResponse
	var steps []*store.Step
	for _, st := range r.steps {
		if st.Status == stepRunning || st.Status == stepPending {
			st.Status, st.EndTime = builderv1.BuildStepStatus_BUILD_STEP_STATUS_FAILED, now
			if st.StartTime == nil {
				st.Status = builderv1.BuildStepStatus_BUILD_STEP_STATUS_SKIPPED
				st.Error = "not run: " + cause.Error()
				evs = append(evs, store.StepEvent(builderv1.BuildEventType_BUILD_EVENT_TYPE_STEP_SKIPPED, st, r.b.Usage))
			} else {
				st.Error = cause.Error()
				evs = append(evs, store.StepEvent(evStepFailed, st, r.b.Usage))
			}
			steps = append(steps, st)
		}
	}
	if rep, err := r.report(ctx); err == nil {
		r.b.Report = rep
	}
	prev := r.b.Status
	r.b.Status, r.b.Error, r.b.EndTime = builderv1.BuildStatus_BUILD_STATUS_FAILED, cause.Error(), now
	return r.apply(ctx, steps, append(evs, store.StatusEvent(prev, r.b))...)
}

func fileValidated(st *store.Step, round int32, v *builderv1.ValidationResult) *builderv1.WatchBuildResponse {
	return &builderv1.WatchBuildResponse{
		Type: builderv1.BuildEventType_BUILD_EVENT_TYPE_FILE_VALIDATED,
		Payload: &builderv1.WatchBuildResponse_FileValidated{FileValidated: &builderv1.FileValidated{
			StepNumber: st.StepNumber, Path: st.Path, Round: round, Passed: v.Passed, Diagnostics: v.Diagnostics,
		}},
	}
}

func fixAttempted(fr *builderv1.FixRound) *builderv1.WatchBuildResponse {
	return &builderv1.WatchBuildResponse{
		Type:    builderv1.BuildEventType_BUILD_EVENT_TYPE_FIX_ATTEMPTED,
		Payload: &builderv1.WatchBuildResponse_FixRound{FixRound: fr},
	}
}

func filterPath(ds []*typev1.Diagnostic, path string) []*typev1.Diagnostic {
	var out []*typev1.Diagnostic
	for _, d := range ds {
		if d.Path == path {
			out = append(out, d)
		}
	}
	return out
}

func countStatus(fs []*builderv1.BuildFile, s builderv1.BuildFileStatus) int {
	n := 0
	for _, f := range fs {
		if f.Status == s {
			n++
		}
	}
	return n
}

// summarize is the first error diagnostics in one line.
// ruleEnvironment is the rule the sandbox's validation gives a diagnostic that says the
// sandbox lacks a program a check needs: the environment's limitation, not the code's error.
const ruleEnvironment = "environment"

// environmental says whether v failed only for the environment: no error diagnostic, and
// at least one of the environment's.
func environmental(v *builderv1.ValidationResult) bool {
	if v.GetPassed() {
		return false
	}
	env := false
	for _, d := range v.GetDiagnostics() {
		if d.Severity >= typev1.Severity_SEVERITY_ERROR {
			return false
		}
		env = env || d.Rule == ruleEnvironment
	}
	return env
}

// environmentText is the first environment diagnostic's message.
func environmentText(ds []*typev1.Diagnostic) string {
	for _, d := range ds {
		if d.Rule == ruleEnvironment {
			return firstLine(d.Message)
		}
	}
	return ""
}

func summarize(ds []*typev1.Diagnostic) string {
	var parts []string
	n := 0
	for _, d := range ds {
		if d.Severity != typev1.Severity_SEVERITY_ERROR {
			continue
		}
		n++
		if len(parts) < 3 {
			loc := d.Path
			if d.Line > 0 {
				loc = fmt.Sprintf("%s:%d", d.Path, d.Line)
			}
			parts = append(parts, strings.TrimSpace(loc+" "+firstLine(d.Message)))
		}
	}
	if n == 0 {
		return "no error diagnostics"
	}
	s := strings.Join(parts, "; ")
	if n > len(parts) {
		s += fmt.Sprintf(" (and %d more)", n-len(parts))
	}
	return s
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// trim keeps the last n bytes of s (the end of a tool's output says most).
func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
