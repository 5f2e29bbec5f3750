package project

import (
	"slices"
	"testing"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

func TestIssueNumberOfAnImportedTask(t *testing.T) {
	for id, want := range map[string]int32{
		"github:local/demo#12":  12,
		"github:acme/app#1":     1,
		"github:acme/app#0":     0,
		"github:acme/app#x":     0,
		"linear:ENG-12":         0,
		"":                      0,
		"github:acme/app#99999": 99999,
	} {
		if got := IssueNumber(&tasksv1.Task{ExternalId: id}); got != want {
			t.Errorf("IssueNumber(%q) = %d, want %d", id, got, want)
		}
	}
}

func TestCrewBranchNamesTheIssueAndTheAttempt(t *testing.T) {
	tk := &agentv1.ProjectTask{Id: "0123456789abcdef", Title: "Add a /health endpoint!", IssueNumber: 14, Attempts: 1}
	if got := crewBranch(tk); got != "thefold/issue-14-add-a-health-endpoint" {
		t.Errorf("first attempt: %q", got)
	}
	tk.Attempts = 3
	if got := crewBranch(tk); got != "thefold/issue-14-add-a-health-endpoint-3" {
		t.Errorf("third attempt: %q", got)
	}
	tk.IssueNumber, tk.Attempts = 0, 1
	if got := crewBranch(tk); got != "thefold/task-add-a-health-endpoint-01234567" {
		t.Errorf("no issue: %q", got)
	}
}

// A crew takes the first pending task (in plan order) whose dependencies are merged or
// skipped, on the lowest free worker.
func TestCrewReadyAndFreeWorker(t *testing.T) {
	mk := func(id string, deps []string, s agentv1.ProjectTaskStatus, w int32) *agentv1.ProjectTask {
		return &agentv1.ProjectTask{Id: id, DependsOn: deps, Status: s, Worker: w}
	}
	a := mk("a", nil, ptDone, 1)
	b := mk("b", []string{"a"}, ptChecking, 2)
	c := mk("c", []string{"a"}, ptPending, 0)
	d := mk("d", []string{"b", "c"}, ptPending, 0)
	e := mk("e", nil, ptRunning, 1)
	p := &agentv1.Project{Mode: agentv1.ProjectMode_PROJECT_MODE_CREW, Phases: []*agentv1.ProjectPhase{
		{Number: 1, Tasks: []*agentv1.ProjectTask{a, e}}, {Number: 2, Tasks: []*agentv1.ProjectTask{b, c}}, {Number: 3, Tasks: []*agentv1.ProjectTask{d}}}}
	if got, _ := crewReady(p); got != c {
		t.Fatalf("ready: %v, want c", got)
	}
	if n := ReadyCount(p); n != 1 {
		t.Fatalf("ReadyCount %d, want 1", n)
	}
	if w := freeWorker(p); w != 3 {
		t.Fatalf("free worker %d, want 3 (1 runs e, 2 checks b)", w)
	}
	b.Status, c.Status = ptDone, ptSkipped
	if got, _ := crewReady(p); got != d {
		t.Fatalf("ready after b merged and c skipped: %v, want d", got)
	}
	if w := freeWorker(p); w != 2 {
		t.Fatalf("free worker %d, want 2", w)
	}
	if Workers(p) != DefaultWorkers || MinQuality(p) != DefaultMinQuality {
		t.Fatalf("defaults: %d workers, quality %d", Workers(p), MinQuality(p))
	}
	p.MaxWorkers, p.AutoMergeMinQuality = 50, 6
	if Workers(p) != MaxWorkers || MinQuality(p) != 6 {
		t.Fatalf("set: %d workers, quality %d", Workers(p), MinQuality(p))
	}
}

func TestSplitCommand(t *testing.T) {
	for in, want := range map[string][]string{
		"make check":                  {"make", "check"},
		"  go   test ./... ":          {"go", "test", "./..."},
		`make "check all" 'a b' x\ y`: {"make", "check all", "a b", "x y"},
		`grep -r "say \"hi\"" .`:      {"grep", "-r", `say "hi"`, "."},
		`echo ''`:                     {"echo", ""},
		"go\ttest":                    {"go", "test"},
	} {
		got, err := SplitCommand(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SplitCommand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "   ", `make "check`, "make 'x", `make \`} {
		if got, err := SplitCommand(bad); err == nil {
			t.Errorf("SplitCommand(%q) = %q, want an error", bad, got)
		}
	}
}
