package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/builder/internal/store"
)

// Command steps (install, build, test) and the validation and fix steps of a whole build.

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
		if r.neverWritten(f.Path) {
			// Its generation failed: a passing check of the rest says nothing about it.
			f.Status = fileFailed
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

// neverWritten reports a planned file whose step failed before the model's file was
// written (its answers could not be used).
func (r *run) neverWritten(path string) bool {
	for _, st := range r.steps {
		if st.Kind == builderv1.StepKind_STEP_KIND_FILE && st.Path == path && st.Status == stepFailed && !st.Generated &&
			st.Action != typev1.FileAction_FILE_ACTION_DELETE {
			return true
		}
	}
	return false
}
