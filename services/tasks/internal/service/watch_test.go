package service_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/tasks/internal/service"
)

const (
	evCreated       = tasksv1.TaskEventType_TASK_EVENT_TYPE_CREATED
	evUpdated       = tasksv1.TaskEventType_TASK_EVENT_TYPE_UPDATED
	evDeleted       = tasksv1.TaskEventType_TASK_EVENT_TYPE_DELETED
	evStatusChanged = tasksv1.TaskEventType_TASK_EVENT_TYPE_STATUS_CHANGED
)

type watchStream = grpc.ServerStreamingClient[tasksv1.WatchTasksResponse]

// watch opens a stream that ends with the test, or after 30 seconds at most, so a missing
// event fails the test instead of hanging it.
func watch(t *testing.T, ctx context.Context, c tasksv1.TaskServiceClient, req *tasksv1.WatchTasksRequest) watchStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	t.Cleanup(cancel)
	s, err := c.WatchTasks(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// recvN receives the next n events, skipping heartbeats.
func recvN(t *testing.T, s watchStream, n int) []*tasksv1.WatchTasksResponse {
	t.Helper()
	out := make([]*tasksv1.WatchTasksResponse, 0, n)
	for len(out) < n {
		ev, err := s.Recv()
		if err != nil {
			t.Fatalf("after %d of %d events: %v", len(out), n, err)
		}
		if ev.GetHeartbeat() != nil {
			if ev.Id != 0 || ev.Type != tasksv1.TaskEventType_TASK_EVENT_TYPE_UNSPECIFIED {
				t.Fatalf("heartbeat with an event id or type: %v", ev)
			}
			continue
		}
		out = append(out, ev)
	}
	return out
}

// taskOf is the task an event carries, whatever its payload.
func taskOf(ev *tasksv1.WatchTasksResponse) *tasksv1.Task {
	switch p := ev.Payload.(type) {
	case *tasksv1.WatchTasksResponse_Task:
		return p.Task
	case *tasksv1.WatchTasksResponse_Updated:
		return p.Updated.GetTask()
	case *tasksv1.WatchTasksResponse_StatusChange:
		return p.StatusChange.GetTask()
	}
	return nil
}

func created(tk *tasksv1.Task) *tasksv1.WatchTasksResponse {
	return &tasksv1.WatchTasksResponse{Type: evCreated, TaskId: tk.Id, Payload: &tasksv1.WatchTasksResponse_Task{Task: tk}}
}

func updated(tk *tasksv1.Task, fields ...string) *tasksv1.WatchTasksResponse {
	return &tasksv1.WatchTasksResponse{Type: evUpdated, TaskId: tk.Id, Payload: &tasksv1.WatchTasksResponse_Updated{
		Updated: &tasksv1.TaskUpdate{Task: tk, ChangedFields: &fieldmaskpb.FieldMask{Paths: fields}}}}
}

func statusChanged(tk *tasksv1.Task, from tasksv1.TaskStatus) *tasksv1.WatchTasksResponse {
	return &tasksv1.WatchTasksResponse{Type: evStatusChanged, TaskId: tk.Id, Payload: &tasksv1.WatchTasksResponse_StatusChange{
		StatusChange: &tasksv1.TaskStatusChange{PreviousStatus: from, Task: tk}}}
}

func deleted(tk *tasksv1.Task) *tasksv1.WatchTasksResponse {
	return &tasksv1.WatchTasksResponse{Type: evDeleted, TaskId: tk.Id, Payload: &tasksv1.WatchTasksResponse_Deleted{
		Deleted: &tasksv1.TaskDeleted{TaskId: tk.Id, Repo: tk.Repo}}}
}

func TestWatchTasks(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client

	first := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "first"})
	s := watch(t, e.alice, c, &tasksv1.WatchTasksRequest{})
	// The history first: the stream is then running when the changes below commit.
	hist := recvN(t, s, 1)
	if hist[0].Type != evCreated || taskOf(hist[0]).GetId() != first.Id || hist[0].TaskId != first.Id {
		t.Fatalf("history = %v", hist)
	}

	e.create(t, e.bob, &tasksv1.CreateTaskRequest{Title: "bob's"}) // must not reach alice
	tk := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "watched"})
	upd, err := c.UpdateTask(e.alice, &tasksv1.UpdateTaskRequest{
		Id:         tk.Id,
		Task:       &tasksv1.Task{Title: "watched, renamed"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"title"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	started := e.setStatus(t, tk.Id, inProgress)
	if _, err := c.DeleteTask(e.alice, &tasksv1.DeleteTaskRequest{Id: tk.Id}); err != nil {
		t.Fatal(err)
	}

	got := recvN(t, s, 4)
	want := []*tasksv1.WatchTasksResponse{
		created(tk),
		updated(upd.Task, "title"),
		statusChanged(started, backlog),
		deleted(started),
	}
	ignore := protocmp.IgnoreFields(&tasksv1.WatchTasksResponse{}, "id", "time")
	if d := cmp.Diff(want, got, protocmp.Transform(), ignore); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	last := hist[0].Id
	for _, ev := range got {
		if ev.Id <= last {
			t.Errorf("event id %d not after %d", ev.Id, last)
		}
		last = ev.Id
		if ev.Time == nil || ev.Time.AsTime().IsZero() {
			t.Errorf("event %d has no time", ev.Id)
		}
	}

	t.Run("reconnect from the last id seen", func(t *testing.T) {
		s2 := watch(t, e.alice, c, &tasksv1.WatchTasksRequest{AfterId: got[1].Id})
		resumed := recvN(t, s2, 2)
		if d := cmp.Diff(got[2:], resumed, protocmp.Transform()); d != "" {
			t.Errorf("resumed events (-want +got):\n%s", d)
		}
		next := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "after reconnect"})
		ev := recvN(t, s2, 1)[0]
		if ev.Type != evCreated || taskOf(ev).GetId() != next.Id || ev.Id <= got[3].Id {
			t.Errorf("next event = %v", ev)
		}
	})
}

func TestWatchTasksIsolationAndFilters(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client

	bobs := watch(t, e.bob, c, &tasksv1.WatchTasksRequest{})
	a1 := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "a1"})
	a2 := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "a2", Repo: "local/other"})
	e.setStatus(t, a1.Id, planned)
	b1 := e.create(t, e.bob, &tasksv1.CreateTaskRequest{Title: "b1"})

	// Events are delivered in id order, so had any of alice's reached bob, it would come
	// before his own.
	if ev := recvN(t, bobs, 1)[0]; taskOf(ev).GetId() != b1.Id || taskOf(ev).GetOwnerId() != "bob" {
		t.Errorf("bob's first event = %v, want his own task", ev)
	}

	cases := []struct {
		name string
		req  *tasksv1.WatchTasksRequest
		want []string // task ids of the events, in order
	}{
		{"id", &tasksv1.WatchTasksRequest{Id: a1.Id}, []string{a1.Id, a1.Id}},
		{"repo", &tasksv1.WatchTasksRequest{Repo: "local/other"}, []string{a2.Id}},
		{"all of alice's", &tasksv1.WatchTasksRequest{}, []string{a1.Id, a2.Id, a1.Id}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := watch(t, e.alice, c, tc.req)
			evs := recvN(t, s, len(tc.want))
			var gotIDs []string
			for _, ev := range evs {
				gotIDs = append(gotIDs, ev.TaskId)
			}
			if d := cmp.Diff(tc.want, gotIDs); d != "" {
				t.Errorf("event tasks (-want +got):\n%s", d)
			}
		})
	}

	// A change in the filtered task after the history arrives live; the marker shows
	// nothing else slipped through before it.
	s := watch(t, e.alice, c, &tasksv1.WatchTasksRequest{Id: a1.Id})
	recvN(t, s, 2)
	e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "noise"})
	e.setStatus(t, a1.Id, backlog)
	if ev := recvN(t, s, 1)[0]; ev.Type != evStatusChanged || ev.GetStatusChange().GetPreviousStatus() != planned || ev.TaskId != a1.Id {
		t.Errorf("live event = %v", ev)
	}
}

func TestWatchTasksLimit(t *testing.T) {
	t.Parallel()
	e := start(t, service.WithMaxWatches(1))
	c := e.client
	e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "t"})

	ctx, cancel := context.WithCancel(e.alice)
	first := watch(t, ctx, c, &tasksv1.WatchTasksRequest{})
	recvN(t, first, 1) // running
	grpctest.WantCode(t, watchErr(e.bob, c, &tasksv1.WatchTasksRequest{}), codes.ResourceExhausted)

	// Ending the first stream frees its place; the server notices asynchronously.
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := watch(t, e.alice, c, &tasksv1.WatchTasksRequest{})
		_, err := s.Recv()
		if err == nil {
			break
		}
		grpctest.WantCode(t, err, codes.ResourceExhausted)
		if time.Now().After(deadline) {
			t.Fatal("the watch limit was not released after the stream ended")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition under a deadline
	}
}

// TestWatchTasksPerUserLimit: a user holding all of their watch slots is refused with
// RetryInfo while another user still watches.
func TestWatchTasksPerUserLimit(t *testing.T) {
	t.Parallel()
	e := start(t, service.WithMaxWatches(10), service.WithMaxWatchesPerUser(2))
	c := e.client
	for range 2 {
		s := watch(t, e.alice, c, &tasksv1.WatchTasksRequest{})
		if _, err := s.Recv(); err != nil { // the first heartbeat: the slot is held
			t.Fatalf("alice within her share: %v", err)
		}
	}
	err := watchErr(e.alice, c, &tasksv1.WatchTasksRequest{})
	grpctest.WantCode(t, err, codes.ResourceExhausted, "too many task watches for one caller (2)")
	if d, ok := errs.RetryAfter(err); !ok || d <= 0 {
		t.Errorf("no RetryInfo in the refusal: %v %v", d, ok)
	}
	if _, err := watch(t, e.bob, c, &tasksv1.WatchTasksRequest{}).Recv(); err != nil {
		t.Fatalf("bob refused while alice holds her share: %v", err)
	}
}

// TestWatchTasksHeartbeats: a silent stream sends heartbeats — the first at once, so the
// response headers go out before any event — carrying the cursor to resume from.
func TestWatchTasksHeartbeats(t *testing.T) {
	t.Parallel()
	e := start(t, service.WithHeartbeat(20*time.Millisecond))
	tk := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "t"})
	s := watch(t, e.alice, e.client, &tasksv1.WatchTasksRequest{})
	first, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if first.GetHeartbeat() == nil || first.GetHeartbeat().GetCursor() != 0 {
		t.Fatalf("first message = %v, want a heartbeat at cursor 0", first)
	}
	ev := recvN(t, s, 1)[0]
	if ev.TaskId != tk.Id {
		t.Fatalf("event = %v", ev)
	}
	// Nothing else happens: heartbeats follow, at the cursor of the event seen (or later).
	for range 2 {
		hb, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if hb.GetHeartbeat() == nil || hb.GetHeartbeat().GetCursor() < ev.Id || hb.Id != 0 {
			t.Fatalf("message while idle = %v, want a heartbeat at cursor >= %d", hb, ev.Id)
		}
	}
}

// TestWatchTasksFromNow: from_now skips the history and delivers what commits next.
func TestWatchTasksFromNow(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "old"})
	s := watch(t, e.alice, e.client, &tasksv1.WatchTasksRequest{FromNow: true, AfterId: 0})
	if _, err := s.Recv(); err != nil { // the opening heartbeat: the stream is running
		t.Fatal(err)
	}
	next := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "new"})
	if ev := recvN(t, s, 1)[0]; ev.TaskId != next.Id {
		t.Fatalf("first event = %v, want the task created after the stream started", ev)
	}
}

// TestWatchTasksMovedRepo: a watcher of a repository sees a task leave it.
func TestWatchTasksMovedRepo(t *testing.T) {
	t.Parallel()
	e := start(t)
	tk := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "moving", Repo: "local/old"})
	s := watch(t, e.alice, e.client, &tasksv1.WatchTasksRequest{Repo: "local/old"})
	recvN(t, s, 1)
	moved, err := e.client.UpdateTask(e.alice, &tasksv1.UpdateTaskRequest{
		Id: tk.Id, Task: &tasksv1.Task{Repo: "local/new"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"repo"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ev := recvN(t, s, 1)[0]
	want := updated(moved.Task, "repo")
	want.GetUpdated().PreviousRepo = "local/old"
	if d := cmp.Diff(want, ev, protocmp.Transform(), protocmp.IgnoreFields(&tasksv1.WatchTasksResponse{}, "id", "time")); d != "" {
		t.Errorf("event (-want +got):\n%s", d)
	}
	// Later changes in the new repository are not the old repository's business.
	e.setStatus(t, tk.Id, planned)
	marker := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "marker", Repo: "local/old"})
	if ev := recvN(t, s, 1)[0]; ev.TaskId != marker.Id {
		t.Errorf("next event of local/old = %v, want the marker", ev)
	}
}

// TestWatchTasksRetention: a cursor older than the retained events is OUT_OF_RANGE naming
// the oldest id kept; after_id 0 still replays what is kept.
func TestWatchTasksRetention(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "old 1"})
	e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "old 2"})
	hist := recvN(t, watch(t, e.alice, e.client, &tasksv1.WatchTasksRequest{}), 2)
	// Age what was committed so far past the retention.
	if _, err := e.pool.Exec(t.Context(), "UPDATE events SET create_time = now() - interval '2 days'"); err != nil {
		t.Fatal(err)
	}
	if n, err := events.Prune(t.Context(), e.pool, 24*time.Hour); err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want 2", n, err)
	}
	kept := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "kept"})

	err := watchErr(e.alice, e.client, &tasksv1.WatchTasksRequest{AfterId: hist[0].Id})
	grpctest.WantCode(t, err, codes.OutOfRange, fmt.Sprintf("the oldest id kept is %d", hist[1].Id+1))

	if ev := recvN(t, watch(t, e.alice, e.client, &tasksv1.WatchTasksRequest{}), 1)[0]; ev.TaskId != kept.Id {
		t.Errorf("after_id 0 replayed %v, want the kept task", ev)
	}
	if ev := recvN(t, watch(t, e.alice, e.client, &tasksv1.WatchTasksRequest{AfterId: hist[1].Id}), 1)[0]; ev.TaskId != kept.Id {
		t.Errorf("a cursor at the horizon replayed %v, want the kept task", ev)
	}
}

// TestWatchTasksOneTask: a watch of one task that the caller does not have is NOT_FOUND
// (it heartbeat forever before the one Watch handler, events.Handler); a task ends only
// by deletion, after which its stream ends with the end marker — also when watched again.
func TestWatchTasksOneTask(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	bobs := e.create(t, e.bob, &tasksv1.CreateTaskRequest{Title: "bob's"})
	grpctest.WantCode(t, watchErr(e.alice, c, &tasksv1.WatchTasksRequest{Id: "0b0b0b0b-0000-4000-8000-000000000000"}), codes.NotFound)
	grpctest.WantCode(t, watchErr(e.alice, c, &tasksv1.WatchTasksRequest{Id: bobs.Id}), codes.NotFound)

	tk := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "short-lived"})
	s := watch(t, e.alice, c, &tasksv1.WatchTasksRequest{Id: tk.Id})
	recvN(t, s, 1) // created
	e.setStatus(t, tk.Id, planned)
	e.setStatus(t, tk.Id, backlog) // status changes do not end it; deleting does
	if _, err := c.DeleteTask(e.alice, &tasksv1.DeleteTaskRequest{Id: tk.Id}); err != nil {
		t.Fatal(err)
	}
	rest := func(s watchStream) []*tasksv1.WatchTasksResponse {
		var out []*tasksv1.WatchTasksResponse
		for {
			m, err := s.Recv()
			if err == io.EOF {
				return out
			}
			if err != nil {
				t.Fatalf("after %v: %v", out, err)
			}
			out = append(out, m)
		}
	}
	got := rest(s)
	if len(got) != 4 || got[2].Type != evDeleted || !got[3].GetHeartbeat().GetEnd() || got[3].GetHeartbeat().GetCursor() != got[2].Id {
		t.Fatalf("stream of the deleted task = %v, want two status changes, DELETED and the end", got)
	}
	// The deleted task's history is still the owner's to replay (not bob's), and it ends.
	again := rest(watch(t, e.alice, c, &tasksv1.WatchTasksRequest{Id: tk.Id}))
	if len(again) != 6 || again[0].GetHeartbeat() == nil || again[4].Type != evDeleted || !again[5].GetHeartbeat().GetEnd() {
		t.Fatalf("replay of the deleted task = %v", again)
	}
	grpctest.WantCode(t, watchErr(e.bob, c, &tasksv1.WatchTasksRequest{Id: tk.Id}), codes.NotFound)
}
