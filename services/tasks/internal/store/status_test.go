package store

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/thefold/thefold/pkg/errs"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

var allStatuses = []status{backlog, planned, inProgress, inReview, done, blocked, cancelled}

func TestCheckTransition(t *testing.T) {
	t.Parallel()
	allowed := map[string]bool{}
	for _, pair := range []string{
		"backlog>planned", "backlog>in_progress", "backlog>blocked", "backlog>cancelled",
		"planned>backlog", "planned>in_progress", "planned>blocked", "planned>cancelled",
		"in_progress>in_review", "in_progress>done", "in_progress>blocked", "in_progress>backlog", "in_progress>cancelled",
		"in_review>done", "in_review>in_progress", "in_review>blocked", "in_review>cancelled",
		"blocked>backlog", "blocked>planned", "blocked>in_progress", "blocked>cancelled",
		"done>backlog",
		"cancelled>backlog",
	} {
		allowed[pair] = true
	}
	for _, from := range allStatuses {
		for _, to := range allStatuses {
			pair := StatusName(from) + ">" + StatusName(to)
			err := CheckTransition(from, to)
			switch {
			case from == to || allowed[pair]:
				if err != nil {
					t.Errorf("%s: %v, want allowed", pair, err)
				}
			default:
				wantErr(t, err, errs.ErrFailedPrecondition)
				want := fmt.Sprintf("cannot move task from %s to %s", StatusName(from), StatusName(to))
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: error %q does not say %q", pair, err, want)
				}
			}
		}
	}
}

func TestSetStatus(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	tk := mustCreate(t, s, task(alice, "local/demo", "work"))

	// Blocked records the reason; leaving blocked clears it.
	got, err := s.SetStatus(ctx, alice, tk.Id, blocked, "needs a decision", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != blocked || got.StatusReason != "needs a decision" {
		t.Errorf("blocked task = %v %q", got.Status, got.StatusReason)
	}
	got, err = s.SetStatus(ctx, alice, tk.Id, inProgress, "ignored: not blocked or cancelled", blocked)
	if err != nil {
		t.Fatal(err)
	}
	if got.StatusReason != "" {
		t.Errorf("reason kept after leaving blocked: %q", got.StatusReason)
	}

	// Done sets complete_time; reopening clears it.
	got = mustStatus(t, s, alice, tk.Id, done)
	if got.CompleteTime == nil {
		t.Error("complete_time not set on done")
	}
	got = mustStatus(t, s, alice, tk.Id, backlog)
	if got.CompleteTime != nil {
		t.Errorf("complete_time %v kept after reopening", got.CompleteTime.AsTime())
	}

	// Same status: success without a change or an event.
	before := allEvents(t, pool)
	same, err := s.SetStatus(ctx, alice, tk.Id, backlog, "", backlog)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffTask(got, same); d != "" {
		t.Errorf("same-status call changed the task (-before +after):\n%s", d)
	}

	// Refusals.
	_, err = s.SetStatus(ctx, alice, tk.Id, planned, "", inReview)
	wantErr(t, err, errs.ErrFailedPrecondition)
	if !strings.Contains(err.Error(), "task is backlog, not the expected in_review") {
		t.Errorf("expected-status error = %q", err)
	}
	_, err = s.SetStatus(ctx, alice, tk.Id, done, "", 0)
	wantErr(t, err, errs.ErrFailedPrecondition)
	if !strings.Contains(err.Error(), "cannot move task from backlog to done") {
		t.Errorf("transition error = %q", err)
	}
	_, err = s.SetStatus(ctx, bob, tk.Id, planned, "", 0)
	wantErr(t, err, errs.ErrNotFound)
	if d := cmp.Diff(before, allEvents(t, pool), protocmp.Transform()); d != "" {
		t.Errorf("no-ops and refusals wrote events (-before +after):\n%s", d)
	}

	// The event history of the task's status changes.
	var got2 []string
	for _, e := range allEvents(t, pool) {
		if e.Type == "status_changed" {
			got2 = append(got2, StatusName(e.Payload.GetStatusChange().GetPreviousStatus())+">"+StatusName(e.Task.Status))
		}
	}
	want := []string{"backlog>blocked", "blocked>in_progress", "in_progress>done", "done>backlog"}
	if d := cmp.Diff(want, got2); d != "" {
		t.Errorf("status_changed events (-want +got):\n%s", d)
	}
}

func TestStartRequiresBlockersDone(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	b1 := mustCreate(t, s, task(alice, "local/demo", "b1"))
	b2 := mustCreate(t, s, task(alice, "local/demo", "b2"))
	tk := mustCreate(t, s, task(alice, "local/demo", "waits", func(tk *tasksv1.Task) { tk.BlockedBy = []string{b1.Id, b2.Id} }))

	_, err := s.SetStatus(ctx, alice, tk.Id, inProgress, "", 0)
	wantErr(t, err, errs.ErrFailedPrecondition)
	for _, b := range []string{b1.Id, b2.Id} {
		if !strings.Contains(err.Error(), b) {
			t.Errorf("error %q does not name blocker %s", err, b)
		}
	}
	mustStatus(t, s, alice, b1.Id, inProgress)
	mustStatus(t, s, alice, b1.Id, done)
	_, err = s.SetStatus(ctx, alice, tk.Id, inProgress, "", 0)
	wantErr(t, err, errs.ErrFailedPrecondition)
	if strings.Contains(err.Error(), b1.Id) || !strings.Contains(err.Error(), b2.Id+" (backlog)") {
		t.Errorf("error %q should name only the open blocker %s", err, b2.Id)
	}
	mustStatus(t, s, alice, b2.Id, cancelled) // cancelled is not done
	_, err = s.SetStatus(ctx, alice, tk.Id, inProgress, "", 0)
	wantErr(t, err, errs.ErrFailedPrecondition)
	if _, err := s.RemoveDependency(ctx, alice, tk.Id, b2.Id); err != nil {
		t.Fatal(err)
	}
	if got := mustStatus(t, s, alice, tk.Id, inProgress); got.Status != inProgress {
		t.Errorf("status = %v", got.Status)
	}
	// Other moves do not look at blockers.
	mustDep(t, s, alice, tk.Id, b2.Id)
	mustStatus(t, s, alice, tk.Id, inReview)
}

// Within a project, a blocker of the same project that waits for the project's review
// (in_review) or was skipped in it (cancelled) lets its dependents start; a blocker of
// another project, or of none, in those states does not.
func TestStartWithinAProject(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	const proj, other = "7a1f0000-0000-4000-8000-000000000001", "7a1f0000-0000-4000-8000-000000000002"
	in := func(p string) func(*tasksv1.Task) { return func(tk *tasksv1.Task) { tk.ProjectId = p } }
	reviewed := mustCreate(t, s, task(alice, "local/demo", "reviewed", in(proj)))
	skipped := mustCreate(t, s, task(alice, "local/demo", "skipped", in(proj)))
	foreign := mustCreate(t, s, task(alice, "local/demo", "foreign", in(other)))
	mustStatus(t, s, alice, reviewed.Id, inProgress)
	mustStatus(t, s, alice, reviewed.Id, inReview)
	mustStatus(t, s, alice, skipped.Id, cancelled)
	mustStatus(t, s, alice, foreign.Id, inProgress)
	mustStatus(t, s, alice, foreign.Id, inReview)

	tk := mustCreate(t, s, task(alice, "local/demo", "waits", in(proj), func(tk *tasksv1.Task) { tk.BlockedBy = []string{reviewed.Id, skipped.Id} }))
	mustStatus(t, s, alice, tk.Id, inProgress)

	loose := mustCreate(t, s, task(alice, "local/demo", "no project", func(tk *tasksv1.Task) { tk.BlockedBy = []string{reviewed.Id} }))
	_, err := s.SetStatus(ctx, alice, loose.Id, inProgress, "", 0)
	wantErr(t, err, errs.ErrFailedPrecondition)
	mixed := mustCreate(t, s, task(alice, "local/demo", "other project", in(proj), func(tk *tasksv1.Task) { tk.BlockedBy = []string{foreign.Id} }))
	_, err = s.SetStatus(ctx, alice, mixed.Id, inProgress, "", 0)
	wantErr(t, err, errs.ErrFailedPrecondition)
	if !strings.Contains(err.Error(), foreign.Id+" (in_review)") {
		t.Errorf("error %q should name the other project's blocker", err)
	}
}
