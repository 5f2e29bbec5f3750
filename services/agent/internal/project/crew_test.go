package project

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/agent/internal/store"
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
// skipped, on the lowest free worker: one whose task runs or waits at its review.
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
	if w := freeWorker(p); w != 2 {
		t.Fatalf("free worker %d, want 2 (1 runs e; b's pull request waits to merge, and its worker 2 is free)", w)
	}
	b.Status = ptReview
	if w := freeWorker(p); w != 3 {
		t.Fatalf("free worker %d, want 3 (1 runs e, 2 waits at b's review)", w)
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

// fakeChecks is a RepoService that answers GetPullRequestChecks from a list, one answer a
// call (the last repeated).
type fakeChecks struct {
	githubv1.RepoServiceClient
	answers []*githubv1.GetPullRequestChecksResponse
	calls   int
}

func (f *fakeChecks) GetPullRequestChecks(context.Context, *githubv1.GetPullRequestChecksRequest, ...grpc.CallOption) (*githubv1.GetPullRequestChecksResponse, error) {
	a := f.answers[min(f.calls, len(f.answers)-1)]
	f.calls++
	return a, nil
}

// A forge's checks: pending ones are looked at again after a backoff, a head the forge has
// not seen yet counts as pending, and a failure keeps the failing checks' names and
// summaries.
func TestCrewReadsTheForgesChecks(t *testing.T) {
	const head = "0123456789abcdef0123456789abcdef01234567"
	pending := &githubv1.GetPullRequestChecksResponse{HeadSha: head, State: githubv1.CheckState_CHECK_STATE_PENDING}
	stale := &githubv1.GetPullRequestChecksResponse{HeadSha: "ffff", State: githubv1.CheckState_CHECK_STATE_SUCCESS}
	failed := &githubv1.GetPullRequestChecksResponse{HeadSha: head, State: githubv1.CheckState_CHECK_STATE_FAILURE, Checks: []*githubv1.Check{
		{Name: "lint", State: githubv1.CheckState_CHECK_STATE_SUCCESS},
		{Name: "test", State: githubv1.CheckState_CHECK_STATE_FAILURE, Summary: "TestX failed", DetailsUrl: "https://ci/1"},
	}}
	passed := &githubv1.GetPullRequestChecksResponse{HeadSha: head, State: githubv1.CheckState_CHECK_STATE_SUCCESS, Checks: []*githubv1.Check{{Name: "ci"}}}
	for _, c := range []struct {
		name    string
		answers []*githubv1.GetPullRequestChecksResponse
		want    string
		summary string
	}{
		{"pending then passed", []*githubv1.GetPullRequestChecksResponse{pending, passed}, store.CheckPassed, "1 checks passed"},
		{"stale head then failed", []*githubv1.GetPullRequestChecksResponse{stale, failed}, store.CheckFailed, "test: TestX failed\nhttps://ci/1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeChecks{answers: c.answers}
			tk := &agentv1.ProjectTask{Id: "t1", PullRequest: &typev1.PullRequestRef{Number: 3}}
			x := &run{e: &Runner{c: Clients{Repos: f}, cfg: DefaultConfig},
				rec: &store.ProjectRecord{Project: &agentv1.Project{Repo: "acme/app", Phases: []*agentv1.ProjectPhase{{Tasks: []*agentv1.ProjectTask{tk}}}}}}
			res, err := x.checks(t.Context(), tk, head)
			if err != nil || res.State != store.CheckPending || !res.Next.After(time.Now()) {
				t.Fatalf("first look: %+v, %v; want pending with a next look", res, err)
			}
			// Before the next look is due, the forge is not asked again.
			if res, _ = x.checks(t.Context(), tk, head); f.calls != 1 || res.State != store.CheckPending {
				t.Fatalf("asked %d times before the backoff ended", f.calls)
			}
			res.Next = time.Time{}
			res, err = x.checks(t.Context(), tk, head)
			if err != nil || res.State != c.want || !strings.Contains(res.Summary, c.summary) {
				t.Fatalf("second look: %+v, %v; want %s with %q", res, err, c.want, c.summary)
			}
			// A result is kept for its head: no third call.
			if _, _ = x.checks(t.Context(), tk, head); f.calls != 2 {
				t.Fatalf("asked %d times, want 2", f.calls)
			}
		})
	}
}

// A person's order: held tasks wait, prioritized ones go first.
func TestCrewReadyHonoursHoldAndPriority(t *testing.T) {
	mk := func(id string, deps ...string) *agentv1.ProjectTask {
		return &agentv1.ProjectTask{Id: id, DependsOn: deps, Status: ptPending}
	}
	a, b, c, d := mk("a"), mk("b"), mk("c"), mk("d", "c")
	p := &agentv1.Project{Mode: agentv1.ProjectMode_PROJECT_MODE_CREW, Phases: []*agentv1.ProjectPhase{{Number: 1, Tasks: []*agentv1.ProjectTask{a, b, c, d}}}}
	if got, _ := crewReady(p); got != a {
		t.Fatalf("plan order: %v", got.GetId())
	}
	p.Priority = []string{"d", "c"}
	if got, _ := crewReady(p); got != c {
		t.Fatalf("priority (d is not ready): %v", got.GetId())
	}
	c.Held = true
	if got, _ := crewReady(p); got != a {
		t.Fatalf("c held: %v", got.GetId())
	}
	if n := ReadyCount(p); n != 2 {
		t.Fatalf("ReadyCount %d, want 2 (a and b)", n)
	}
	if !heldBefore(p, d) || heldBefore(p, a) {
		t.Fatal("heldBefore: d waits on held c, a on nothing")
	}
	// Nothing left but the held task and what waits on it: the crew waits for a person.
	a.Status, b.Status = ptDone, ptDone
	x := &run{rec: &store.ProjectRecord{Project: p}}
	p.Status = agentv1.ProjectStatus_PROJECT_STATUS_RUNNING
	x.crewFinish()
	if p.Status != agentv1.ProjectStatus_PROJECT_STATUS_HUMAN_NEEDED || c.Status != ptPending || d.Status != ptPending ||
		!strings.Contains(p.StatusReason, "2 merged, 0 skipped, 2 waiting on a person") || !strings.Contains(p.StatusReason, "held by a person") {
		t.Fatalf("finish with held tasks: %v %q; c %v, d %v", p.Status, p.StatusReason, c.Status, d.Status)
	}
}

// The merge queue keeps the order tasks joined it, leaves out those sent back to a worker
// (until a worker takes them again), and adds a CHECKING task without a place at the end.
func TestCrewMergeQueueOrder(t *testing.T) {
	mk := func(id string, s agentv1.ProjectTaskStatus, pr int32) *agentv1.ProjectTask {
		return &agentv1.ProjectTask{Id: id, Title: "task " + id, Status: s, PullRequest: &typev1.PullRequestRef{Number: pr}}
	}
	a, b, c, d, e := mk("a", ptChecking, 1), mk("b", ptChecking, 2), mk("c", ptChecking, 3), mk("d", ptRunning, 0), mk("e", ptChecking, 5)
	p := &agentv1.Project{Mode: agentv1.ProjectMode_PROJECT_MODE_CREW, Phases: []*agentv1.ProjectPhase{{Number: 1, Tasks: []*agentv1.ProjectTask{a, b, c, d, e}}}}
	rec := &store.ProjectRecord{Project: p, State: store.ProjectState{MergeQueue: []string{"c", "a", "d", "b", "gone"},
		Fixes: map[string]*store.CrewFix{"b": {Checks: "FAIL"}}, Group: &store.MergeGroup{Sha: "0123456789abcdef", Members: []store.GroupMember{{Task: "c", Number: 3}, {Task: "a", Number: 1}}}}}
	if got := queueOrder(&rec.State, p); !slices.Equal(got, []string{"c", "a", "e"}) {
		t.Fatalf("queue %v, want c a e", got)
	}
	x := &run{rec: rec}
	if got, fix := x.nextFix(); got != b || fix.Checks != "FAIL" {
		t.Fatalf("next fix %v %v, want b", got, fix)
	}
	q := MergeQueue(rec)
	if len(q) != 3 || q[0].ProjectTaskId != "c" || !q[0].InGroup || !q[1].InGroup || q[2].InGroup || q[2].PullRequest.GetNumber() != 5 {
		t.Fatalf("pool's merge queue %v", q)
	}
	if got := groupNumbers(rec.State.Group); got != "#3 and #1" {
		t.Fatalf("group %q", got)
	}
	rec.State.Group.Members = append(rec.State.Group.Members, store.GroupMember{Number: 5})
	if got := groupNumbers(rec.State.Group); got != "#3, #1 and #5" {
		t.Fatalf("group %q", got)
	}
}
