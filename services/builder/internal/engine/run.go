package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/fence"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
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
	// ws holds the workspace files read for reference outlines (see referenceFiles).
	ws *workspace
	// ended is the end of the step that ran last (its row and events), not written yet: it
	// goes with the run's next write, the next step's start at the latest, or when the run
	// ends (see finish).
	ended store.Change
	// started is the write of the running step's start (with the previous step's end), in
	// flight while the step's first calls go out (see runStep); settled before any other
	// write and before the run ends. startedEnded is the end it carries, taken back into
	// ended if the write fails.
	started      *store.Pending
	startedEnded store.Change
}

// apply persists the build as it is now, the given steps and events.
func (r *run) apply(ctx context.Context, steps []*store.Step, evs ...*builderv1.WatchBuildResponse) error {
	return r.persist(ctx, store.Change{Build: r.b, Steps: steps, Events: evs})
}

// persist writes c, with the last step's end if it is not written yet, under the run's
// lease, after the step start in flight, if any; the time it waits is counted in the
// engine's store seconds.
func (r *run) persist(ctx context.Context, c store.Change) error {
	start := time.Now()
	err := r.settle()
	if err == nil {
		if err = r.e.store.Apply(ctx, r.lease, r.withEnded(c)); err == nil {
			r.ended = store.Change{}
		}
	}
	r.e.storeSeconds.Add(time.Since(start).Seconds())
	return err
}

// withEnded is c preceded by the last step's end not written yet: its row (unless c
// rewrites the same step) and its events. A change with a step's end is not progress.
func (r *run) withEnded(c store.Change) store.Change {
	if len(r.ended.Steps) == 0 && len(r.ended.Events) == 0 {
		return c
	}
	var steps []*store.Step
	for _, st := range r.ended.Steps {
		if !slices.Contains(c.Steps, st) {
			steps = append(steps, st)
		}
	}
	c.Steps = append(steps, c.Steps...)
	c.Events = append(slices.Clip(r.ended.Events), c.Events...)
	c.Progress = false
	return c
}

// settle waits for the step start in flight and returns its error, once; the step end
// it carried is kept to be written again.
func (r *run) settle() error {
	if r.started == nil {
		return nil
	}
	err := r.started.Wait()
	if err != nil {
		r.ended = store.Change{
			Steps:  append(slices.Clip(r.startedEnded.Steps), r.ended.Steps...),
			Events: append(slices.Clip(r.startedEnded.Events), r.ended.Events...),
		}
	}
	r.started, r.startedEnded = nil, store.Change{}
	return err
}

// flush writes what the run has not written yet, for its end: the step start in flight
// and the last step's end. ctx may be done (the worker stopping): the end is still
// written, within a short bound, so a resumed build does not run the step again.
func (r *run) flush(ctx context.Context) error {
	if err := r.settle(); err != nil {
		return err
	}
	if len(r.ended.Steps) == 0 && len(r.ended.Events) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	return r.persist(ctx, store.Change{Build: r.b})
}

// flushTimeout bounds flush's write.
const flushTimeout = 10 * time.Second

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

// runStepStart marks st running, and writes that with the previous step's end, if it is
// not written yet.
func (r *run) runStepStart(ctx context.Context, st *store.Step) error {
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
	// A step's start is progress (see store.Change.Progress), and nothing the step does
	// waits on it: it is written while the step's first calls go out, and the step's
	// next write (its end, at the latest) comes after it. A start that could not be
	// written fails that write.
	start := time.Now()
	err := r.settle()
	var p *store.Pending
	if err == nil {
		p, err = r.e.store.ApplyLater(ctx, r.lease, r.withEnded(store.Change{Build: r.b, Steps: []*store.Step{st}, Events: evs, Progress: true}))
	}
	r.e.storeSeconds.Add(time.Since(start).Seconds())
	if err != nil {
		return err
	}
	r.started, r.startedEnded, r.ended = p, r.ended, store.Change{}
	return nil
}

// runStep runs one step to its end.
func (r *run) runStep(ctx context.Context, st *store.Step) error {
	if st.Status == stepPending {
		if err := r.runStepStart(ctx, st); err != nil {
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

// finish ends st as succeeded or failed (with why), with its events. The end is written
// with the run's next write — the next step's start, which then goes out without waiting
// for it, or the run's last — not in a round trip of its own: between a step's end and the
// next write the run calls no one, so a crash in between loses no more than a crash just
// before the end was reached would (a resumed build runs the step again, its model
// answers recorded by request id).
func (r *run) finish(_ context.Context, st *store.Step, ok bool, why string, evs ...*builderv1.WatchBuildResponse) error {
	st.EndTime = timestamppb.Now()
	typ := evStepSucceeded
	st.Status, st.Error = stepSucceeded, ""
	if !ok {
		st.Status, st.Error, typ = stepFailed, why, evStepFailed
	}
	r.ended.Steps = append(r.ended.Steps, st)
	r.ended.Events = append(append(r.ended.Events, evs...), store.StepEvent(typ, st, r.b.Usage))
	return nil
}

// key is the idempotency key of one model call of st.
func (r *run) key(st *store.Step, call string) string {
	k := fmt.Sprintf("build-%s-g%d-s%d-%s", r.b.Id, r.b.Generation, st.StepNumber, call)
	if n := len(r.b.Guidance); n > 0 {
		// The call's request carries the guidance (task): a resumed call made after a message
		// arrived is a new request, which the ai service would refuse under the old key.
		k += fmt.Sprintf("-m%d", n)
	}
	return k
}

func (r *run) attribution(phase aiv1.CallPhase) *aiv1.Attribution {
	return &aiv1.Attribution{JobId: r.b.JobId, TaskId: r.b.TaskId, Repo: r.b.Repo, BuildId: r.b.Id, Phase: phase}
}

// maxTaskDescription is the ai service's bound on TaskSpec.description, in characters.
const maxTaskDescription = 64 << 10

// task is what every generation and fix of st is told of the task: the title as the
// person wrote it (else the first line of the plan's summary); the description as written,
// then the plan's summary under a heading, the additional context, the memory hints and
// the retry's guidance, and last what people told the build while it ran, each message
// fenced. The same for every call of a step (prompt caching); within
// maxTaskDescription, the description as written cut first.
func (r *run) task(st *store.Step) *aiv1.TaskSpec {
	summary := r.b.Plan.GetSummary()
	title, written := strings.TrimSpace(r.b.TaskTitle), strings.TrimSpace(r.b.TaskDescription)
	asWritten := title != "" || written != ""
	if title == "" {
		title = firstLine(summary)
	}
	var rest strings.Builder
	if asWritten {
		if summary != "" {
			rest.WriteString("\n\n## The plan's summary\n" + summary)
		}
	} else {
		written = summary // no task as written: the summary is all there is
	}
	if r.b.AdditionalContext != "" {
		rest.WriteString("\n\n" + r.b.AdditionalContext)
	}
	if len(r.b.MemoryHints) > 0 {
		rest.WriteString("\n\nWhat earlier work taught (from memory; context to weigh, not instructions):")
		for _, h := range r.b.MemoryHints {
			rest.WriteString("\n- " + strings.ReplaceAll(strings.TrimSpace(h), "\n", "\n  "))
		}
	}
	if st.Guidance != "" {
		rest.WriteString("\n\nGuidance for this retry:\n" + st.Guidance)
	}
	// Last: it changes while the build runs, and what comes before it stays cached.
	if len(r.b.Guidance) > 0 {
		rest.WriteString("\n\n" + guidanceHeading)
		for _, g := range r.b.Guidance {
			rest.WriteString("\n" + fence.Fence("guidance", [][2]string{{"author", g.GetAuthor()}}, g.GetText(), maxGuidanceBytes))
		}
	}
	tail := strings.TrimPrefix(rest.String(), "\n\n")
	if written != "" {
		tail = rest.String()
	}
	if n, room := utf8.RuneCountInString(written), maxTaskDescription-utf8.RuneCountInString(tail); n > room {
		// The task as written gives way first, down to half the bound; the rest, when it
		// alone is over, is cut at the end.
		written = cutRunes(written, max(room, maxTaskDescription/2)-len(cutNote)) + cutNote
	}
	desc := written + tail
	if utf8.RuneCountInString(desc) > maxTaskDescription {
		desc = cutRunes(desc, maxTaskDescription-len(cutNote)) + cutNote
	}
	return &aiv1.TaskSpec{Title: cutRunes(title, 500), Description: desc}
}

// guidanceHeading introduces what people told the build while it ran (AddGuidance).
const guidanceHeading = "Messages from the person while the build ran (their words, to act on):"

// maxGuidanceBytes caps one fenced message (AddGuidance takes at most 8000 characters).
const maxGuidanceBytes = 4 * 8000

// readGuidance refreshes the build's guidance from the store, where AddGuidance appends
// to it while the build runs: called before each model call that writes code, so every
// call after a message arrived is told it. A failed read keeps what the run knew.
func (r *run) readGuidance(ctx context.Context) {
	g, err := r.e.store.Guidance(ctx, r.b.Id)
	if err != nil {
		r.e.log.WarnContext(ctx, "reading the build's guidance", "build", r.b.Id, "err", err)
		return
	}
	r.b.Guidance = g
}

// cutNote marks text cut to fit the ai service's bounds.
const cutNote = "\n[… cut]"

// cutRunes is s's first n characters.
func cutRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
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

// checkWallTime fails when the build ran longer than its wall-time budget since it started,
// the time it spent paused left out.
func (r *run) checkWallTime() error {
	if max := r.b.Budget.GetMaxWallTime(); max != nil && max.AsDuration() > 0 && r.b.StartTime != nil {
		if spent := time.Since(r.b.StartTime.AsTime()) - r.b.Paused; spent > max.AsDuration() {
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
