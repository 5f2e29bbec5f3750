package monitor

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/fence"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/sandboxrun"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// The names of a check's parts, in the order they run and are reported.
const (
	partBuild        = "build"
	partTest         = "test"
	partDependencies = "dependencies"
	partVulns        = "vulnerabilities"
	partTodos        = "todos"
)

const (
	// maxOutput bounds the output kept of one command; maxShownOutput what a report or a
	// task shows of it.
	maxOutput      = 4 << 20
	maxShownOutput = 4000
	// maxShownTodos bounds the markers a report lists.
	maxShownTodos = 50
)

// todoArgv finds the TODO and FIXME markers of the workspace. Only options every grep has
// (the sandbox image's may be BusyBox's): what is left out is left out when the output is
// read (skipMarkerPath).
var todoArgv = []string{"grep", "-rnE", `(^|[^A-Za-z0-9_])(TODO|FIXME)([^A-Za-z0-9_]|$)`, "."}

// skippedDirs and generatedSuffixes are the trees and files whose markers are not the
// repository's own.
var (
	skippedDirs       = []string{".git", "vendor", "node_modules", "testdata", "third_party", auditDir}
	generatedSuffixes = []string{".pb.go", ".pb.gw.go", "_gen.go", ".min.js", ".map", ".lock", ".sum"}
)

// skipMarkerPath reports whether a marker in path is left out of the count.
func skipMarkerPath(path string) bool {
	for _, part := range strings.Split(path, "/") {
		if slices.Contains(skippedDirs, part) {
			return true
		}
	}
	for _, suf := range generatedSuffixes {
		if strings.HasSuffix(path, suf) {
			return true
		}
	}
	return false
}

var (
	passed  = agentv1.RepoHealthCheckStatus_REPO_HEALTH_CHECK_STATUS_PASSED
	failed  = agentv1.RepoHealthCheckStatus_REPO_HEALTH_CHECK_STATUS_FAILED
	skipped = agentv1.RepoHealthCheckStatus_REPO_HEALTH_CHECK_STATUS_SKIPPED
	errored = agentv1.RepoHealthCheckStatus_REPO_HEALTH_CHECK_STATUS_ERROR
)

// checkRun is one check's sandbox and report.
type checkRun struct {
	m       *Monitor
	sandbox string
	report  *agentv1.RepoHealthReport
	// audited are the ecosystems whose dependency audit ran to the end.
	audited []string
}

// validate runs the sandbox's validation steps that say whether the code builds (TYPECHECK,
// the compiler's check, and BUILD) and whether its tests pass (TEST).
func (x *checkRun) validate(ctx context.Context) (build, test *agentv1.RepoHealthCheck, err error) {
	v, err := x.m.c.Sandbox.Validate(ctx, &sandboxv1.ValidateRequest{SandboxId: x.sandbox, Steps: []sandboxv1.ValidationStepKind{
		sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK, sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_BUILD,
		sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TEST}})
	if err != nil {
		return nil, nil, err
	}
	var builds, tests []*sandboxv1.StepResult
	for _, s := range v.GetSteps() {
		switch s.GetKind() {
		case sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK, sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_BUILD:
			builds = append(builds, s)
		case sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TEST:
			tests = append(tests, s)
		}
	}
	none := "no build step applies to this repository"
	if v.GetToolchain() == "" {
		none = "no toolchain found in the repository"
	}
	return stepsCheck(partBuild, builds, none), stepsCheck(partTest, tests, strings.Replace(none, "build", "test", 1)), nil
}

// stepsCheck is the part name made of validation steps: the first that failed (or errored)
// decides it, else PASSED when one passed; SKIPPED with none when no step applied.
func stepsCheck(name string, steps []*sandboxv1.StepResult, none string) *agentv1.RepoHealthCheck {
	c := &agentv1.RepoHealthCheck{Name: name, Status: skipped, Summary: none}
	rank := map[agentv1.RepoHealthCheckStatus]int{skipped: 0, passed: 1, errored: 2, failed: 3}
	for _, s := range steps {
		c.Commands = append(c.Commands, strings.Join(s.GetCommand(), " "))
		st, summary, out := stepCheck(s)
		if rank[st] > rank[c.Status] || (st == skipped && c.Status == skipped) {
			c.Status, c.Summary, c.Output = st, summary, out
		}
	}
	return c
}

// stepCheck is how a validation step went, as a check's status, summary and output.
func stepCheck(s *sandboxv1.StepResult) (agentv1.RepoHealthCheckStatus, string, string) {
	out := fence.TruncateMiddle(s.GetOutput(), maxShownOutput)
	switch s.GetStatus() {
	case sandboxv1.StepStatus_STEP_STATUS_PASSED:
		return passed, fmt.Sprintf("passed in %s", s.GetDuration().AsDuration().Round(time.Millisecond)), ""
	case sandboxv1.StepStatus_STEP_STATUS_FAILED:
		return failed, failureSummary(s), out
	case sandboxv1.StepStatus_STEP_STATUS_SKIPPED:
		return skipped, cmp.Or(s.GetMessage(), "skipped"), ""
	default:
		return errored, cmp.Or(s.GetMessage(), fmt.Sprintf("exit %d", s.GetExitCode())), out
	}
}

// failureSummary is a failed step's first diagnostics, or its exit code.
func failureSummary(s *sandboxv1.StepResult) string {
	ds := s.GetDiagnostics()
	if len(ds) == 0 {
		return fmt.Sprintf("failed (exit %d)", s.GetExitCode())
	}
	parts := make([]string, 0, 3)
	for _, d := range ds[:min(3, len(ds))] {
		parts = append(parts, diagnostic(d))
	}
	more := ""
	if len(ds) > 3 {
		more = fmt.Sprintf(" (and %d more)", len(ds)-3)
	}
	return fmt.Sprintf("%d problems: %s%s", len(ds), strings.Join(parts, "; "), more)
}

func diagnostic(d *typev1.Diagnostic) string {
	at := d.GetPath()
	if d.GetLine() > 0 {
		at += ":" + strconv.Itoa(int(d.GetLine()))
	}
	return validate.Truncate(at+": "+d.GetMessage(), 200)
}

// badField is the field an INVALID_ARGUMENT error names.
func badField(err error) (string, bool) {
	st := status.Convert(err)
	if v := errs.FieldViolations(st); err != nil && st.Code() == codes.InvalidArgument && len(v) > 0 {
		return v[0].GetField(), true
	}
	return "", false
}

// todos counts the workspace's markers, and the stale ones: those a check at least StaleAge
// older saw too. It returns the markers' fingerprints.
func (x *checkRun) todos(ctx context.Context, c *store.ConnectionRecord) (*agentv1.RepoHealthCheck, []string, error) {
	check := &agentv1.RepoHealthCheck{Name: partTodos, Commands: []string{strings.Join(todoArgv, " ")}}
	res, err := sandboxrun.Run(ctx, x.m.c.Sandbox, &sandboxv1.RunCommandRequest{SandboxId: x.sandbox, Command: todoArgv,
		Timeout: durationpb.New(x.m.cfg.CommandTimeout)}, maxOutput)
	if err != nil {
		return nil, nil, err
	}
	// grep exits 1 when nothing matched, 2 on trouble.
	if res.GetTimedOut() || res.GetExitCode() > 1 || res.GetExitCode() < 0 {
		check.Status, check.Summary, check.Output = errored, fmt.Sprintf("grep exited %d", res.GetExitCode()), fence.TruncateMiddle(string(res.Output), maxShownOutput)
		return check, nil, nil
	}
	todos := parseMarkers(res.Stdout)
	marks := make([]string, 0, len(todos))
	for _, t := range todos {
		marks = append(marks, fingerprint(t))
	}
	old, err := x.m.st.OldMarks(ctx, c.Id, time.Now().Add(-x.m.cfg.StaleAge))
	if err != nil {
		return nil, nil, err
	}
	stale := 0
	for _, m := range marks {
		if slices.Contains(old, m) {
			stale++
		}
	}
	x.report.TodoCount, x.report.StaleTodoCount = int32(len(todos)), int32(stale)
	x.report.Todos = todos[:min(len(todos), maxShownTodos)]
	threshold := c.GetHealth().GetTodoThreshold()
	check.Status, check.Summary = passed, fmt.Sprintf("%d markers (%d stale), at most %d wanted", len(todos), stale, threshold)
	if int32(len(todos)) > threshold {
		check.Status = failed
	}
	if res.Dropped {
		check.Summary = "at least " + check.Summary
	}
	return check, marks, nil
}

// parseMarkers reads grep -rn's "path:line:text" lines, leaving out the paths
// skipMarkerPath names and binary files.
func parseMarkers(out []byte) []*agentv1.TodoMarker {
	var todos []*agentv1.TodoMarker
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		path, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		num, text, ok := strings.Cut(rest, ":")
		n, err := strconv.Atoi(num)
		path = strings.TrimPrefix(path, "./")
		// A binary file's "line" is no marker of the code.
		if !ok || err != nil || n <= 0 || skipMarkerPath(path) || !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
			continue
		}
		todos = append(todos, &agentv1.TodoMarker{Path: path, Line: int32(n),
			Text: validate.Truncate(strings.TrimSpace(text), 200)})
	}
	return todos
}

// fingerprint names a marker by its file and text, not its line: moved by an edit above it,
// it is the same marker.
func fingerprint(t *agentv1.TodoMarker) string {
	h := sha256.Sum256([]byte(t.Path + "\x00" + t.Text))
	return hex.EncodeToString(h[:12])
}
