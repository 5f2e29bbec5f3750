// Package validate is the sandbox's validation pipeline: it detects a workspace's languages,
// runs their own toolchains (go build/vet/test and gofmt; tsc, eslint and npm test; Python's
// compiler and pytest) through a Runner the service backs with a sandbox backend, and turns
// the tools' output into typev1.Diagnostic values in the shape of sandboxv1.ValidateResponse
// and ValidateIncrementalResponse. It knows nothing about backends: the Runner decides where
// and how confined a command runs.
package validate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/errs"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// Runner runs argv in dir (relative to the workspace root, "." for the root) and returns its
// exit code and output. err is for a command that could not run at all (program missing,
// backend failure, timeout); a command that ran and failed returns its exit code and nil.
type Runner func(ctx context.Context, dir string, argv []string) (exitCode int, stdout, stderr []byte, err error)

// DefaultOutputLimit is how much of a step's combined output is kept (its tail).
const DefaultOutputLimit = 16 << 10

// Options chooses what Validate runs.
type Options struct {
	// Steps to run; empty runs every step that applies. Steps not asked for are left out of
	// the response.
	Steps []sandboxv1.ValidationStepKind
	// FailFast skips (SKIPPED, saying why) every step after the first that fails or errors.
	FailFast bool
	// OutputLimit caps each step's output tail in bytes; 0 means DefaultOutputLimit.
	OutputLimit int
}

// step is one pipeline step, run in each of its project directories and reported as one
// StepResult (diagnostics of all directories, the worst status).
type step struct {
	kind sandboxv1.ValidationStepKind
	// name says which tool ran, in messages ("go build").
	name string
	dirs []ProjectDir
	argv func(d ProjectDir) []string
	// parse turns one directory's output into diagnostics.
	parse func(d ProjectDir, exit int, stdout, stderr []byte) []*typev1.Diagnostic
	// failed decides the status from one directory's run; nil means: a non-zero exit or an
	// error diagnostic.
	failed func(exit int, diags []*typev1.Diagnostic) bool
	// skip, when set, is why the step does not apply (SKIPPED), e.g. a tool not installed
	// in the project.
	skip string
	// unavailable, when set, is why a step that applies cannot run (ERROR), e.g. no go
	// command for a Go module.
	unavailable string
}

// Validate detects the workspace's languages under root (a host directory holding the same
// files the Runner sees) and runs their steps in order: typecheck, lint (including format),
// test. A workspace with no recognisable project is errs.ErrFailedPrecondition.
//
// Every diagnostic's path is workspace-relative (or absolute outside the workspace, e.g. in
// GOROOT), never under the sandbox's /workspace or the host root. A step that failed only
// because the sandbox lacks a program (a C compiler for cgo, git, pytest, tsc) is ERROR,
// not FAILED: its message starts "environment: the sandbox lacks …; this is not an error
// in the code" and its diagnostics are WARNINGs with the rule RuleEnvironment. Passed is
// false all the same: the check did not happen.
func Validate(ctx context.Context, root string, run Runner, opt Options) (*sandboxv1.ValidateResponse, error) {
	start := time.Now()
	langs := Detect(root)
	if len(langs) == 0 {
		return nil, fmt.Errorf("no go.mod, package.json, tsconfig.json or Python file in the workspace: nothing to validate: %w", errs.ErrFailedPrecondition)
	}
	var steps []step
	nodePlanned := false // one plan covers TypeScript and JavaScript projects
	for _, l := range langs {
		switch l {
		case Go:
			steps = append(steps, goSteps(ctx, root, run)...)
		case TypeScript, JavaScript:
			if !nodePlanned {
				nodePlanned = true
				steps = append(steps, nodeSteps(ctx, root, run)...)
			}
		case Python:
			steps = append(steps, pythonSteps(ctx, run, pythonFiles(root, maxPythonFiles))...)
		}
	}
	resp := &sandboxv1.ValidateResponse{Passed: true, Toolchain: Toolchain(langs)}
	results := runSteps(ctx, run, steps, opt)
	for _, r := range results {
		if r.Status == sandboxv1.StepStatus_STEP_STATUS_FAILED || r.Status == sandboxv1.StepStatus_STEP_STATUS_ERROR {
			resp.Passed = false
		}
	}
	resp.Steps = results
	resp.Duration = durationpb.New(time.Since(start))
	return resp, nil
}

// Toolchain names the detected languages the way the contract does ("go", "node",
// "python"), comma-separated in detection order.
func Toolchain(langs []Language) string {
	var names []string
	for _, l := range langs {
		n := string(l)
		if l == TypeScript || l == JavaScript {
			n = "node"
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return strings.Join(names, ",")
}

func runSteps(ctx context.Context, run Runner, steps []step, opt Options) []*sandboxv1.StepResult {
	limit := opt.OutputLimit
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	var (
		results  []*sandboxv1.StepResult
		stopped  string
		wantKind = func(k sandboxv1.ValidationStepKind) bool {
			return len(opt.Steps) == 0 || slices.Contains(opt.Steps, k)
		}
	)
	for _, s := range steps {
		if !wantKind(s.kind) {
			continue
		}
		res := &sandboxv1.StepResult{Kind: s.kind, Command: s.argv(firstDir(s.dirs))}
		switch {
		case stopped != "":
			res.Status, res.Message = sandboxv1.StepStatus_STEP_STATUS_SKIPPED, stopped
		case ctx.Err() != nil:
			// The contract's ERROR covers a step that timed out: validation did not happen.
			res.Status, res.Message = sandboxv1.StepStatus_STEP_STATUS_ERROR, "not run: "+ctx.Err().Error()
		case s.unavailable != "":
			res.Status, res.Message = sandboxv1.StepStatus_STEP_STATUS_ERROR, s.unavailable
		case s.skip != "":
			res.Status, res.Message = sandboxv1.StepStatus_STEP_STATUS_SKIPPED, s.skip
		default:
			execStep(ctx, run, s, res, limit)
		}
		if opt.FailFast && stopped == "" && failedStatus(res.Status) {
			stopped = "fail_fast: " + s.name + " failed"
		}
		results = append(results, res)
	}
	return results
}

func failedStatus(s sandboxv1.StepStatus) bool {
	return s == sandboxv1.StepStatus_STEP_STATUS_FAILED || s == sandboxv1.StepStatus_STEP_STATUS_ERROR
}

func firstDir(dirs []ProjectDir) ProjectDir {
	if len(dirs) == 0 {
		return ProjectDir{Rel: "."}
	}
	return dirs[0]
}

// execStep runs s in each directory and folds the runs into res. The status is the worst
// of the runs': ERROR when a tool could not run or finish, else FAILED when the code failed
// a check, else ERROR when a check failed only because the sandbox lacks a program (see
// RuleEnvironment): that check did not happen, which is neither a pass nor the code's
// failure.
func execStep(ctx context.Context, run Runner, s step, res *sandboxv1.StepResult, limit int) {
	start := time.Now()
	var (
		out                           strings.Builder
		problems                      []string
		errored, codeFailed, envBlock bool
	)
	for _, d := range s.dirs {
		argv := s.argv(d)
		exit, stdout, stderr, err := run(ctx, d.Rel, argv)
		if len(s.dirs) > 1 {
			fmt.Fprintf(&out, "== %s ==\n", d.Rel)
		}
		out.Write(stdout)
		out.Write(stderr)
		if ctx.Err() != nil {
			// Killed at the deadline: whatever the exit code says, the tool did not finish.
			errored = true
			problems = append(problems, fmt.Sprintf("%s in %s did not finish: %v", strings.Join(argv, " "), d.Rel, ctx.Err()))
			break
		}
		if err != nil {
			errored = true
			msg := fmt.Sprintf("%s in %s could not run: %v", strings.Join(argv, " "), d.Rel, err)
			if l, ok := envLackIn(err.Error()); ok {
				// The program itself is missing: the sandbox's limitation, said plainly.
				res.Diagnostics = append(res.Diagnostics, envDiagnostic(l, s.name, ""))
				msg = l.message() + " (" + msg + ")"
			}
			problems = append(problems, msg)
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				break
			}
			continue
		}
		diags := s.parse(d, exit, stdout, stderr)
		failed := s.failed
		if failed == nil {
			failed = func(exit int, diags []*typev1.Diagnostic) bool { return exit != 0 || hasErrors(diags) }
		}
		if failed(exit, diags) {
			if res.ExitCode == 0 {
				res.ExitCode = int32(exit)
			}
			if !hasErrors(diags) && !slices.ContainsFunc(diags, isEnvironmental) {
				// Nothing in the code was found wrong: did the tool say the sandbox lacks
				// something (tsc or pytest not installed, a shell's "command not found")?
				for _, l := range envLacks(string(concat(stdout, stderr))) {
					diags = append(diags, envDiagnostic(l, s.name, ""))
				}
			}
			switch env := envSummary(diags); {
			case hasErrors(diags) || env == "":
				codeFailed = true
				if len(diags) == 0 {
					problems = append(problems, fmt.Sprintf("%s in %s exited with %d and reported nothing parseable; see the output", strings.Join(argv, " "), d.Rel, exit))
				}
				if env != "" {
					// The code failed on its own; the limitation is worth knowing too.
					problems = append(problems, env)
				}
			default:
				envBlock = true
				if len(s.dirs) > 1 {
					env += " (in " + d.Rel + ")"
				}
				problems = append(problems, env)
			}
		}
		res.Diagnostics = append(res.Diagnostics, diags...)
	}
	switch {
	case errored:
		res.Status = sandboxv1.StepStatus_STEP_STATUS_ERROR
	case codeFailed:
		res.Status = sandboxv1.StepStatus_STEP_STATUS_FAILED
	case envBlock:
		res.Status = sandboxv1.StepStatus_STEP_STATUS_ERROR
	default:
		res.Status = sandboxv1.StepStatus_STEP_STATUS_PASSED
	}
	res.Message = strings.Join(problems, "; ")
	res.Output = tail(out.String(), limit)
	res.Duration = durationpb.New(time.Since(start))
}

func hasErrors(diags []*typev1.Diagnostic) bool {
	return slices.ContainsFunc(diags, func(d *typev1.Diagnostic) bool {
		return d.Severity >= typev1.Severity_SEVERITY_ERROR
	})
}

// tail keeps the last limit bytes of s, cut at a rune boundary, with a visible marker.
func tail(s string, limit int) string {
	if len(s) <= limit {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	cut := len(s) - limit
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return fmt.Sprintf("[… %d bytes cut …]\n", cut) + strings.ToValidUTF8(s[cut:], "\uFFFD")
}
