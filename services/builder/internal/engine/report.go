package engine

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/builder/internal/store"
)

// The end of a build: finalizing, the report, failing, and the events and text they carry.

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
	switch {
	case !rep.ValidationPassed:
		r.b.Status = builderv1.BuildStatus_BUILD_STATUS_FAILED
		r.b.Error = "validation failed: " + summarize(rep.Diagnostics)
		if len(rep.FailedPaths) > 0 {
			r.b.Error = fmt.Sprintf("validation failed in %s: %s", strings.Join(rep.FailedPaths, ", "), summarize(rep.Diagnostics))
		}
	case len(rep.FailedPaths) > 0:
		// The rest validates, but planned files were never written.
		r.b.Status = builderv1.BuildStatus_BUILD_STATUS_FAILED
		r.b.Error = fmt.Sprintf("planned files not written: %s", strings.Join(rep.FailedPaths, ", "))
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
