package engine

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/builder/internal/store"
)

// File steps: generating a file, writing it into the sandbox, validating it and its fix rounds.

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
		r.workspace().deleted(st.Path)
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
		refs := r.referenceFiles(ctx, st.Path, existing, deps)
		r.readGuidance(ctx)
		req := &aiv1.GenerateFileRequest{
			RequestId: r.key(st, "generate"), Task: r.task(st),
			File:            &aiv1.FileSpec{Path: st.Path, Description: st.Description, Action: st.Action, ExistingContent: existing},
			DependencyFiles: deps, ProjectStructure: r.projectStructure(ctx), Skills: r.b.Skills, Model: r.model(),
			Attribution: r.attribution(aiv1.CallPhase_CALL_PHASE_GENERATION), Plan: r.b.Plan, ReferenceFiles: refs,
		}
		resp, err := r.generate(ctx, req)
		for try := 2; err != nil && errs.ModelOutputInvalid(err) && try <= generateTries; try++ {
			// The model's answer could not be used even after the ai service's repair
			// rounds: ask afresh (a new key, so not the recorded failure).
			r.e.log.WarnContext(ctx, "generated file unusable; asking again", "build", r.b.Id, "path", st.Path, "try", try, "err", err)
			req.RequestId = r.key(st, fmt.Sprintf("generate-%d", try))
			resp, err = r.generate(ctx, req)
		}
		if err != nil && errs.ModelOutputInvalid(err) {
			if f != nil {
				f.Status = fileFailed
			}
			return r.finish(ctx, st, false, fmt.Sprintf("the model's answers for %s could not be used (%d tries): %s",
				st.Path, generateTries, status.Convert(err).Message()))
		}
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
	// is not the file's fault: no model can fix it, so no fix round is spent on it. Nor
	// on errors left only in files a later step changes (stepPassed).
	passed, deferred := r.stepPassed(st)
	for !passed && !environmental(st.Validation) && len(st.FixRounds) < r.e.cfg.MaxFixRounds {
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
		passed, deferred = r.stepPassed(st)
	}
	ok := passed
	why := ""
	if deferred != "" {
		r.e.log.InfoContext(ctx, "build: a file passes but for errors in files later steps change", "build", r.b.Id, "step", st.StepNumber,
			"path", st.Path, "detail", deferred)
		pending = append(pending, store.LogEvent(st.StepNumber, st.Phase, deferred))
	}
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

// generateTries is how many times a file is asked for when the model's answers cannot be
// used (MODEL_OUTPUT_INVALID) before its step fails.
const generateTries = 2

// generate makes one GenerateFile call within the call timeout.
func (r *run) generate(ctx context.Context, req *aiv1.GenerateFileRequest) (*aiv1.GenerateFileResponse, error) {
	callCtx, cancel := context.WithTimeout(ctx, r.e.cfg.CallTimeout)
	defer cancel()
	done := r.e.timed("ai")
	defer done()
	return r.e.ai.GenerateFile(callCtx, req)
}

// fixRound asks the model to fix st's file for its current diagnostics, writes the fix and
// validates the file again; st's content and validation become the round's result. A fix
// call the ai service refuses (the answer would not apply, say) is a round with its error,
// not the end of the build; one it cannot make (unavailable) is.
func (r *run) fixRound(ctx context.Context, st *store.Step, phase builderv1.BuildPhase, n int32) (*builderv1.FixRound, error) {
	before := st.Validation
	// Errors in files a later step changes are that step's: the model is shown them as
	// expected, so it does not undo this step's change to make them go away.
	fix, expected := r.splitExpected(st, before.GetDiagnostics())
	fr := &builderv1.FixRound{
		BuildId: r.b.Id, StepNumber: st.StepNumber, Round: n, Phase: phase, Path: st.Path,
		DiagnosticsBefore: fix, StartTime: timestamppb.Now(),
	}
	deps := r.contextFiles(st.Path)
	r.readGuidance(ctx)
	callCtx, cancel := context.WithTimeout(ctx, r.e.cfg.CallTimeout)
	defer cancel()
	done := r.e.timed("ai")
	resp, err := r.e.ai.FixFile(callCtx, &aiv1.FixFileRequest{
		RequestId: r.key(st, fmt.Sprintf("fix-%d", n)), Task: r.task(st), Path: st.Path, Content: st.Content,
		Errors: firstN(fix, maxDiagnostics), ErrorOutput: before.GetOutput(), DependencyFiles: deps,
		Attempt: n, Skills: r.b.Skills, Model: r.model(), Attribution: r.attribution(aiv1.CallPhase_CALL_PHASE_FIXING),
		Plan: r.b.Plan, ReferenceFiles: r.referenceFiles(ctx, st.Path, st.Content, deps),
		PreviousRounds: r.previousRounds(st), ExpectedErrors: firstN(expected, maxDiagnostics),
		RelatedFiles: r.codeUnderTest(ctx, st.Path),
	})
	done()
	switch code := status.Code(err); {
	case err == nil:
	case code == codes.InvalidArgument || code == codes.FailedPrecondition || errs.ModelOutputInvalid(err):
		// The answer could not be used (refused, or unusable after the ai service's repair
		// rounds): a failed round, not a failed build.
		fr.Error = status.Convert(err).Message()
		fr.DiagnosticsAfter, fr.EndTime = before.GetDiagnostics(), timestamppb.Now()
		return fr, nil
	default:
		return nil, fmt.Errorf("fix %s (round %d): %w", st.Path, n, err)
	}
	r.spend(st, resp.Usage)
	fr.Model, fr.Usage, fr.ChangedPaths, fr.Explanation = resp.GetUsage().GetModel(), resp.Usage, []string{st.Path}, resp.Explanation
	st.Content = resp.Content
	if err := r.write(ctx, st.Path, st.Content); err != nil {
		return nil, err
	}
	// A failing test's defect may have been in the code under test: the fix changed it.
	for _, c := range resp.RelatedChanges {
		if err := r.write(ctx, c.Path, c.Content); err != nil {
			return nil, err
		}
		fr.ChangedPaths = append(fr.ChangedPaths, c.Path)
		for _, other := range r.steps {
			if other.Kind == builderv1.StepKind_STEP_KIND_FILE && other.Path == c.Path && other.Generated {
				other.Content = c.Content
			}
		}
	}
	v, err := r.validateFile(ctx, st.Path)
	if err != nil {
		return nil, err
	}
	st.Validation = v
	resolved, _ := r.stepPassed(st)
	fr.DiagnosticsAfter, fr.Resolved, fr.EndTime = v.Diagnostics, resolved, timestamppb.Now()
	return fr, nil
}

func (r *run) write(ctx context.Context, path, content string) error {
	done := r.e.timed("sandbox")
	_, err := r.e.sb.WriteFile(ctx, &sandboxv1.WriteFileRequest{SandboxId: r.b.SandboxId, Path: path, Content: []byte(content)})
	done()
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	r.workspace().wrote(path, content)
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
