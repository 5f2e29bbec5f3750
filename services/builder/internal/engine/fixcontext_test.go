package engine

import (
	"testing"

	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/builder/internal/store"
)

func fileStepOf(n int32, kind builderv1.StepKind, path string, action typev1.FileAction, status builderv1.BuildStepStatus) *store.Step {
	return &store.Step{BuildStep: &builderv1.BuildStep{StepNumber: n, Kind: kind, Path: path, Action: action, Status: status}}
}

// Expected errors are the errors in files a later, unfinished file step modifies or
// deletes; a step whose only errors left are expected passes.
func TestExpectedErrors(t *testing.T) {
	const (
		file   = builderv1.StepKind_STEP_KIND_FILE
		modify = typev1.FileAction_FILE_ACTION_MODIFY
		create = typev1.FileAction_FILE_ACTION_CREATE
		remove = typev1.FileAction_FILE_ACTION_DELETE
	)
	cur := fileStepOf(2, file, "lib/a.go", modify, stepRunning)
	r := &run{steps: []*store.Step{
		fileStepOf(1, file, "done.go", modify, stepSucceeded),
		cur,
		fileStepOf(3, file, "app/b.go", modify, stepPending),
		fileStepOf(4, file, "old.go", remove, stepPending),
		fileStepOf(5, file, "new.go", create, stepPending),
		fileStepOf(6, builderv1.StepKind_STEP_KIND_COMMAND, "", 0, stepPending),
	}}
	errAt := func(p string) *typev1.Diagnostic {
		return &typev1.Diagnostic{Path: p, Severity: typev1.Severity_SEVERITY_ERROR, Message: "broken " + p}
	}
	warn := &typev1.Diagnostic{Path: "app/b.go", Severity: typev1.Severity_SEVERITY_WARNING, Message: "style"}
	rest, expected := r.splitExpected(cur, []*typev1.Diagnostic{errAt("lib/a.go"), errAt("app/b.go"), errAt("old.go"), errAt("new.go"), errAt("done.go"), warn})
	if got := pathsOf(expected); len(got) != 2 || got[0] != "app/b.go" || got[1] != "old.go" {
		t.Errorf("expected %v, want app/b.go and old.go", got)
	}
	if got := pathsOf(rest); len(got) != 4 || got[0] != "lib/a.go" || got[3] != "app/b.go" {
		t.Errorf("rest %v", got)
	}
	for _, c := range []struct {
		name   string
		v      *builderv1.ValidationResult
		passed bool
		logged bool
	}{
		{"passed", &builderv1.ValidationResult{Passed: true}, true, false},
		{"passed, a later step's file failing", &builderv1.ValidationResult{Passed: true, Diagnostics: []*typev1.Diagnostic{errAt("app/b.go")}}, true, true},
		{"failed on a later step's file only", &builderv1.ValidationResult{Diagnostics: []*typev1.Diagnostic{errAt("app/b.go"), warn}}, true, true},
		{"failed on its own file too", &builderv1.ValidationResult{Diagnostics: []*typev1.Diagnostic{errAt("app/b.go"), errAt("lib/a.go")}}, false, false},
		{"failed on a file no later step changes", &builderv1.ValidationResult{Diagnostics: []*typev1.Diagnostic{errAt("new.go")}}, false, false},
		{"failed without diagnostics", &builderv1.ValidationResult{Output: "exit status 2"}, false, false},
	} {
		cur.Validation = c.v
		ok, why := r.stepPassed(cur)
		if ok != c.passed || (why != "") != c.logged {
			t.Errorf("%s: passed %v (%q), want %v (logged %v)", c.name, ok, why, c.passed, c.logged)
		}
	}
}

// A fix is told every earlier round of its file, an integrate fix those of the file's
// implement step too, numbered from 1, at most 20, without the expected errors.
func TestPreviousRounds(t *testing.T) {
	round := func(why string) *builderv1.FixRound {
		return &builderv1.FixRound{Explanation: why, DiagnosticsAfter: []*typev1.Diagnostic{
			{Path: "a.go", Severity: typev1.Severity_SEVERITY_ERROR, Message: why}, {Path: "a.go", Severity: typev1.Severity_SEVERITY_WARNING}}}
	}
	impl := fileStepOf(1, builderv1.StepKind_STEP_KIND_FILE, "a.go", typev1.FileAction_FILE_ACTION_MODIFY, stepFailed)
	impl.FixRounds = []*builderv1.FixRound{round("r1"), round("r2")}
	other := fileStepOf(2, builderv1.StepKind_STEP_KIND_FILE, "b.go", typev1.FileAction_FILE_ACTION_MODIFY, stepSucceeded)
	other.FixRounds = []*builderv1.FixRound{round("b")}
	fix := fileStepOf(4, builderv1.StepKind_STEP_KIND_FIX, "a.go", typev1.FileAction_FILE_ACTION_MODIFY, stepRunning)
	r := &run{steps: []*store.Step{impl, other, fileStepOf(3, builderv1.StepKind_STEP_KIND_VALIDATE, "", 0, stepFailed), fix}}
	got := r.previousRounds(fix)
	if len(got) != 2 || got[0].Round != 1 || got[0].Explanation != "r1" || got[1].Round != 2 || got[1].Explanation != "r2" ||
		len(got[1].ErrorsAfter) != 1 || got[1].ErrorsAfter[0].Message != "r2" {
		t.Errorf("previous rounds %v", got)
	}
	if got := r.previousRounds(impl); len(got) != 2 {
		t.Errorf("the implement step's own rounds: %v", got)
	}
	for i := range 30 {
		impl.FixRounds = append(impl.FixRounds, round(string(rune('a'+i))))
	}
	if got := r.previousRounds(fix); len(got) != maxPreviousRounds || got[0].Round != 13 || got[19].Round != 32 {
		t.Errorf("%d rounds, from %d to %d", len(got), got[0].Round, got[len(got)-1].Round)
	}
}

func pathsOf(ds []*typev1.Diagnostic) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Path)
	}
	return out
}

func TestCutBytes(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{{"abc", 5, "abc"}, {"abc", 2, "ab"}, {"aé", 2, "a"}, {"éé", 3, "é"}, {"é", 0, ""}} {
		if got := cutBytes(c.s, c.n); got != c.want {
			t.Errorf("cutBytes(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
