package store

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/thefold/thefold/pkg/errs"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

func TestCreateGet(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	parent := mustCreate(t, s, task(alice, "local/demo", "parent"))
	blocker := mustCreate(t, s, task(alice, "local/demo", "blocker"))
	in := task(alice, "local/demo", "Add rate limiting", func(tk *tasksv1.Task) {
		tk.Description = "to the API"
		tk.Status = planned
		tk.Source = tasksv1.TaskSource_TASK_SOURCE_GITHUB
		tk.Priority = typev1.Priority_PRIORITY_URGENT
		tk.Labels = []string{"api", "security"}
		tk.ParentId = parent.Id
		tk.BlockedBy = []string{blocker.Id}
		tk.ExternalId = "github:local/demo#12"
		tk.ExternalUrl = "https://example.com/local/demo/issues/12"
		tk.ProjectId = project
	})
	created := mustCreate(t, s, proto.Clone(in).(*tasksv1.Task))

	if created.Id == "" || created.CreateTime == nil || created.UpdateTime == nil || created.CompleteTime != nil {
		t.Fatalf("server fields not set right: %v", created)
	}
	want := proto.Clone(in).(*tasksv1.Task)
	want.Id, want.CreateTime, want.UpdateTime = created.Id, created.CreateTime, created.UpdateTime
	if d := diffTask(want, created); d != "" {
		t.Errorf("created (-want +got):\n%s", d)
	}
	got, err := s.Get(ctx, alice, created.Id)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffTask(created, got); d != "" {
		t.Errorf("Get (-created +got):\n%s", d)
	}

	_, err = s.Get(ctx, bob, created.Id)
	wantErr(t, err, errs.ErrNotFound)
	_, err = s.Get(ctx, alice, "00000000-0000-4000-8000-000000000000")
	wantErr(t, err, errs.ErrNotFound)

	evs := allEvents(t, pool)
	if diff := cmp.Diff([]string{"created", "created", "created"}, eventTypes(evs)); diff != "" {
		t.Fatalf("event types (-want +got):\n%s", diff)
	}
	last := evs[2]
	if last.Owner != alice || last.Scope != "local/demo" || last.Agg != created.Id {
		t.Errorf("event row = %+v", last)
	}
	wantPayload := &tasksv1.WatchTasksResponse{Type: evCreated, TaskId: created.Id, Payload: &tasksv1.WatchTasksResponse_Task{Task: created}}
	if d := cmp.Diff(wantPayload, last.Payload, protocmp.Transform(), protocmp.IgnoreFields(&tasksv1.WatchTasksResponse{}, "id", "time")); d != "" {
		t.Errorf("event payload (-want +got):\n%s", d)
	}
}

func TestCreateReferencesMustBeTheOwners(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	bobs := mustCreate(t, s, task(bob, "local/demo", "bob's"))
	missing := "00000000-0000-4000-8000-000000000001"
	before := len(allEvents(t, pool))
	cases := []struct {
		name string
		opt  func(*tasksv1.Task)
	}{
		{"parent of another owner", func(tk *tasksv1.Task) { tk.ParentId = bobs.Id }},
		{"missing parent", func(tk *tasksv1.Task) { tk.ParentId = missing }},
		{"blocker of another owner", func(tk *tasksv1.Task) { tk.BlockedBy = []string{bobs.Id} }},
		{"missing blocker", func(tk *tasksv1.Task) { tk.BlockedBy = []string{missing} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Create(t.Context(), task(alice, "local/demo", c.name, c.opt), nil)
			wantErr(t, err, errs.ErrNotFound)
		})
	}
	if after := len(allEvents(t, pool)); after != before {
		t.Errorf("failed creates wrote %d events", after-before)
	}
}

func TestCreateExternalIDUniquePerOwnerAndSource(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ext := func(owner string, src tasksv1.TaskSource, id string) *tasksv1.Task {
		return task(owner, "local/demo", "t", func(tk *tasksv1.Task) { tk.Source, tk.ExternalId = src, id })
	}
	gh := tasksv1.TaskSource_TASK_SOURCE_GITHUB
	mustCreate(t, s, ext(alice, gh, "github:local/demo#1"))
	mustCreate(t, s, ext(bob, gh, "github:local/demo#1"))                                      // other owner
	mustCreate(t, s, ext(alice, tasksv1.TaskSource_TASK_SOURCE_LINEAR, "github:local/demo#1")) // other source
	mustCreate(t, s, ext(alice, gh, ""))
	mustCreate(t, s, ext(alice, gh, "")) // empty ids never collide
	before := len(allEvents(t, pool))

	_, err := s.Create(t.Context(), ext(alice, gh, "github:local/demo#1"), nil)
	wantErr(t, err, errs.ErrAlreadyExists)
	if after := len(allEvents(t, pool)); after != before {
		t.Errorf("the rejected create wrote %d events", after-before)
	}
}

func TestRollbackLeavesNoEvent(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	a := mustCreate(t, s, task(alice, "local/demo", "a"))
	b := mustCreate(t, s, task(alice, "local/demo", "b"))
	before := allEvents(t, pool)

	// Every mutation fails after its event is appended, just before commit.
	failCommits(s)
	mutations := []struct {
		name string
		run  func() error
	}{
		{"Create", func() error { _, err := s.Create(ctx, task(alice, "local/demo", "c"), nil); return err }},
		{"Update", func() error {
			_, err := s.Update(ctx, alice, &tasksv1.Task{Id: a.Id, Title: "x"}, []string{"title"})
			return err
		}},
		{"SetStatus", func() error { _, err := s.SetStatus(ctx, alice, a.Id, planned, "", 0); return err }},
		{"AddDependency", func() error { _, err := s.AddDependency(ctx, alice, a.Id, b.Id); return err }},
		{"Delete", func() error { return s.Delete(ctx, alice, b.Id) }},
	}
	for _, m := range mutations {
		if err := m.run(); !errors.Is(err, errInjected) {
			t.Errorf("%s: err = %v, want the injected failure", m.name, err)
		}
	}
	s.beforeCommit = nil

	if d := cmp.Diff(before, allEvents(t, pool), protocmp.Transform()); d != "" {
		t.Errorf("events changed by rolled-back mutations (-before +after):\n%s", d)
	}
	got, err := s.Get(ctx, alice, a.Id)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffTask(a, got); d != "" {
		t.Errorf("task changed by rolled-back mutations (-before +after):\n%s", d)
	}
	if _, err := s.Get(ctx, alice, b.Id); err != nil {
		t.Errorf("rolled-back delete: %v", err)
	}
	list, _, err := s.List(ctx, alice, ListFilter{PageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Errorf("rolled-back create left a task: %v", titles(list))
	}
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	parent := mustCreate(t, s, task(alice, "local/other", "parent"))
	mustCreate(t, s, task(alice, "local/demo", "api bug", func(tk *tasksv1.Task) {
		tk.Labels = []string{"bug", "api"}
		tk.Source = tasksv1.TaskSource_TASK_SOURCE_GITHUB
	}))
	mustCreate(t, s, task(alice, "local/demo", "planned docs", func(tk *tasksv1.Task) {
		tk.Status = planned
		tk.Labels = []string{"docs"}
		tk.ProjectId = project
	}))
	mustCreate(t, s, task(alice, "local/demo", "subtask", func(tk *tasksv1.Task) { tk.ParentId = parent.Id }))
	started := mustCreate(t, s, task(alice, "local/other", "started"))
	mustStatus(t, s, alice, started.Id, inProgress)
	mustCreate(t, s, task(bob, "local/demo", "bob's api bug", func(tk *tasksv1.Task) {
		tk.Labels = []string{"bug"}
		tk.ProjectId = project
	}))

	cases := []struct {
		name string
		f    ListFilter
		want []string // newest first
	}{
		{"all", ListFilter{}, []string{"started", "subtask", "planned docs", "api bug", "parent"}},
		{"repo", ListFilter{Repo: "local/demo"}, []string{"subtask", "planned docs", "api bug"}},
		{"one status", ListFilter{Statuses: []tasksv1.TaskStatus{inProgress}}, []string{"started"}},
		{"statuses", ListFilter{Statuses: []tasksv1.TaskStatus{inProgress, planned}}, []string{"started", "planned docs"}},
		{"source", ListFilter{Source: tasksv1.TaskSource_TASK_SOURCE_GITHUB}, []string{"api bug"}},
		{"label", ListFilter{Label: "bug"}, []string{"api bug"}},
		{"label no match", ListFilter{Label: "nope"}, nil},
		{"parent", ListFilter{ParentID: parent.Id}, []string{"subtask"}},
		{"project", ListFilter{ProjectID: project}, []string{"planned docs"}},
		{"project no match", ListFilter{ProjectID: otherProject}, nil},
		{"project and repo", ListFilter{ProjectID: project, Repo: "local/other"}, nil},
		{"combined", ListFilter{Repo: "local/demo", Label: "docs", Statuses: []tasksv1.TaskStatus{planned}}, []string{"planned docs"}},
		{"combined no match", ListFilter{Repo: "local/other", Label: "docs"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.f.PageSize = 50
			got, next, err := s.List(ctx, alice, c.f)
			if err != nil {
				t.Fatal(err)
			}
			if next != nil {
				t.Errorf("next cursor on the only page: %+v", next)
			}
			if d := cmp.Diff(c.want, titles(got), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("titles (-want +got):\n%s", d)
			}
		})
	}
}

func TestListPagination(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	var all []string
	for i := range 23 {
		all = append(all, mustCreate(t, s, task(alice, "local/demo", fmt.Sprintf("task %02d", i))).Id)
		mustCreate(t, s, task(bob, "local/demo", "noise"))
	}
	// Ten tasks share one create_time: only the id breaks the tie, and no page may
	// repeat or skip one of them.
	if _, err := pool.Exec(ctx, "UPDATE tasks SET create_time = '2024-01-01T00:00:00Z' WHERE owner_id = $1 AND id = ANY($2::uuid[])", alice, all[5:15]); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1, 4, 7, 23, 50} {
		t.Run(fmt.Sprint("page size ", size), func(t *testing.T) {
			var (
				seen  []*tasksv1.Task
				after *Cursor
				pages int
			)
			for {
				page, next, err := s.List(ctx, alice, ListFilter{PageSize: size, After: after})
				if err != nil {
					t.Fatal(err)
				}
				pages++
				if len(page) > size {
					t.Fatalf("page of %d > %d", len(page), size)
				}
				seen = append(seen, page...)
				if next == nil {
					break
				}
				if pages > 100 {
					t.Fatal("pagination does not end")
				}
				after = next
			}
			if want := (len(all) + size - 1) / size; pages != want {
				t.Errorf("pages = %d, want %d", pages, want)
			}
			got := ids(seen)
			if d := cmp.Diff(slices.Sorted(slices.Values(all)), slices.Sorted(slices.Values(got))); d != "" {
				t.Fatalf("tasks seen across pages (-want +got):\n%s", d)
			}
			for i := 1; i < len(seen); i++ {
				a, b := seen[i-1], seen[i]
				if c := a.CreateTime.AsTime().Compare(b.CreateTime.AsTime()); c < 0 || (c == 0 && a.Id <= b.Id) {
					t.Fatalf("not newest first at %d: %s %v then %s %v", i, a.Id, a.CreateTime.AsTime(), b.Id, b.CreateTime.AsTime())
				}
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	orig := mustCreate(t, s, task(alice, "local/demo", "before", func(tk *tasksv1.Task) {
		tk.Description = "keep me"
		tk.Labels = []string{"a"}
	}))
	change := &tasksv1.Task{
		Id: orig.Id, Title: "after", Description: "ignored: not in the mask", Priority: typev1.Priority_PRIORITY_HIGH,
		Labels: []string{"b", "c"}, Repo: "local/moved", ExternalUrl: "https://example.com/x", JobId: "job-1",
		PullRequest: &typev1.PullRequestRef{Repo: "local/moved", Number: 1, Url: "https://example.com/pr/1"}, Complexity: 7, EstimatedTokens: 12000, PlannedOrder: 3,
		ProjectId: project,
		Status:    done, // not updatable: ignored
	}
	fields := []string{"title", "priority", "labels", "repo", "external_url", "job_id", "pull_request",
		"complexity", "estimated_tokens", "planned_order", "project_id"}
	got, err := s.Update(ctx, alice, change, fields)
	if err != nil {
		t.Fatal(err)
	}
	want := proto.Clone(orig).(*tasksv1.Task)
	want.Title, want.Priority, want.Labels, want.Repo = "after", change.Priority, change.Labels, "local/moved"
	want.ExternalUrl, want.JobId, want.PullRequest = change.ExternalUrl, "job-1", change.PullRequest
	want.Complexity, want.EstimatedTokens, want.PlannedOrder, want.ProjectId = 7, 12000, 3, project
	if d := cmp.Diff(want, got, protocmp.Transform(), protocmp.IgnoreFields(&tasksv1.Task{}, "update_time")); d != "" {
		t.Errorf("updated (-want +got):\n%s", d)
	}
	if !got.UpdateTime.AsTime().After(orig.UpdateTime.AsTime()) {
		t.Errorf("update_time %v not after %v", got.UpdateTime.AsTime(), orig.UpdateTime.AsTime())
	}

	// Clearing labels stores an empty list; clearing project_id takes the task out of it.
	got, err = s.Update(ctx, alice, &tasksv1.Task{Id: orig.Id}, []string{"labels", "project_id"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Labels) != 0 || got.ProjectId != "" {
		t.Errorf("labels = %v, project_id = %q, want none", got.Labels, got.ProjectId)
	}

	_, err = s.Update(ctx, bob, change, []string{"title"})
	wantErr(t, err, errs.ErrNotFound)
	_, err = s.Update(ctx, alice, change, []string{"status"})
	wantErr(t, err, errs.ErrInvalid)
	_, err = s.Update(ctx, alice, change, nil)
	wantErr(t, err, errs.ErrInvalid)

	evs := allEvents(t, pool)
	if d := cmp.Diff([]string{"created", "updated", "updated"}, eventTypes(evs)); d != "" {
		t.Fatalf("event types (-want +got):\n%s", d)
	}
	if evs[1].Scope != "local/moved" || evs[1].Task.Title != "after" || evs[1].Payload.GetUpdated().GetPreviousRepo() != "local/demo" ||
		evs[1].Task.ProjectId != project {
		t.Errorf("update event = %+v", evs[1])
	}
	if evs[2].Task.ProjectId != "" || !slices.Contains(evs[2].Payload.GetUpdated().GetChangedFields().GetPaths(), "project_id") {
		t.Errorf("clearing event = %+v", evs[2])
	}
}

func TestDeleteDetachesDependentsAndSubtasks(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	doomed := mustCreate(t, s, task(alice, "local/demo", "doomed"))
	other := mustCreate(t, s, task(alice, "local/demo", "other blocker"))
	dependent := mustCreate(t, s, task(alice, "local/demo", "dependent", func(tk *tasksv1.Task) {
		tk.BlockedBy = []string{doomed.Id, other.Id}
	}))
	child := mustCreate(t, s, task(alice, "local/demo", "child", func(tk *tasksv1.Task) { tk.ParentId = doomed.Id }))
	mustDep(t, s, alice, doomed.Id, other.Id)
	doomed, _ = s.Get(ctx, alice, doomed.Id)
	before := len(allEvents(t, pool))

	wantErr(t, s.Delete(ctx, bob, doomed.Id), errs.ErrNotFound)
	if err := s.Delete(ctx, alice, doomed.Id); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(ctx, alice, doomed.Id)
	wantErr(t, err, errs.ErrNotFound)
	wantErr(t, s.Delete(ctx, alice, doomed.Id), errs.ErrNotFound)

	gotDep, err := s.Get(ctx, alice, dependent.Id)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{other.Id}, gotDep.BlockedBy); d != "" {
		t.Errorf("dependent's blockers (-want +got):\n%s", d)
	}
	gotChild, err := s.Get(ctx, alice, child.Id)
	if err != nil {
		t.Fatal(err)
	}
	if gotChild.ParentId != "" {
		t.Errorf("child's parent = %q, want none", gotChild.ParentId)
	}

	evs := allEvents(t, pool)[before:]
	if d := cmp.Diff([]string{"deleted", "updated", "updated"}, eventTypes(evs)); d != "" {
		t.Fatalf("event types (-want +got):\n%s", d)
	}
	if d := cmp.Diff(&tasksv1.TaskDeleted{TaskId: doomed.Id, Repo: doomed.Repo}, evs[0].Payload.GetDeleted(), protocmp.Transform()); d != "" {
		t.Errorf("deleted event (-want +got):\n%s", d)
	}
	for _, ev := range evs[1:] {
		want := []string{"blocked_by"}
		if ev.Agg == child.Id {
			want = []string{"parent_id"}
		}
		if d := cmp.Diff(want, ev.Payload.GetUpdated().GetChangedFields().GetPaths()); d != "" {
			t.Errorf("changed fields of %s (-want +got):\n%s", ev.Agg, d)
		}
	}
	touched := []string{evs[1].Agg, evs[2].Agg}
	if d := cmp.Diff(slices.Sorted(slices.Values([]string{dependent.Id, child.Id})), touched); d != "" {
		t.Errorf("updated events for (-want +got):\n%s", d)
	}
}

func TestStats(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	blocker := mustCreate(t, s, task(alice, "local/demo", "blocker", func(tk *tasksv1.Task) {
		tk.Priority = typev1.Priority_PRIORITY_URGENT
	}))
	mustCreate(t, s, task(alice, "local/demo", "waits", func(tk *tasksv1.Task) { tk.BlockedBy = []string{blocker.Id} }))
	finished := mustCreate(t, s, task(alice, "local/demo", "finished"))
	mustStatus(t, s, alice, finished.Id, inProgress)
	mustStatus(t, s, alice, finished.Id, done)
	mustCreate(t, s, task(alice, "local/demo", "waits on done", func(tk *tasksv1.Task) { tk.BlockedBy = []string{finished.Id} }))
	cancelledWaiter := mustCreate(t, s, task(alice, "local/other", "cancelled waiter", func(tk *tasksv1.Task) {
		tk.BlockedBy = []string{blocker.Id}
		tk.Source = tasksv1.TaskSource_TASK_SOURCE_CHAT
		tk.Priority = typev1.Priority_PRIORITY_LOW
	}))
	mustStatus(t, s, alice, cancelledWaiter.Id, cancelled)
	mustCreate(t, s, task(bob, "local/demo", "bob's"))

	cases := []struct {
		repo string
		want *Stats
	}{
		{"", &Stats{
			Total:         5,
			ByStatus:      map[string]int64{"backlog": 3, "planned": 0, "in_progress": 0, "in_review": 0, "done": 1, "blocked": 0, "cancelled": 1},
			BySource:      map[string]int64{"manual": 0, "api": 4, "github": 0, "linear": 0, "chat": 1, "healing": 0, "project": 0},
			ByPriority:    map[string]int64{"low": 1, "medium": 3, "high": 0, "urgent": 1},
			BlockedByOpen: 1,
		}},
		{"local/demo", &Stats{
			Total:         4,
			ByStatus:      map[string]int64{"backlog": 3, "planned": 0, "in_progress": 0, "in_review": 0, "done": 1, "blocked": 0, "cancelled": 0},
			BySource:      map[string]int64{"manual": 0, "api": 4, "github": 0, "linear": 0, "chat": 0, "healing": 0, "project": 0},
			ByPriority:    map[string]int64{"low": 0, "medium": 3, "high": 0, "urgent": 1},
			BlockedByOpen: 1,
		}},
		{"none/such", &Stats{
			ByStatus:   map[string]int64{"backlog": 0, "planned": 0, "in_progress": 0, "in_review": 0, "done": 0, "blocked": 0, "cancelled": 0},
			BySource:   map[string]int64{"manual": 0, "api": 0, "github": 0, "linear": 0, "chat": 0, "healing": 0, "project": 0},
			ByPriority: map[string]int64{"low": 0, "medium": 0, "high": 0, "urgent": 0},
		}},
	}
	for _, c := range cases {
		got, err := s.Stats(ctx, alice, c.repo)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("Stats(%q) (-want +got):\n%s", c.repo, d)
		}
	}
}
