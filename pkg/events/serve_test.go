package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// The one Watch handler is tested here through a real gRPC stream (the TaskService's
// WatchTasks, served over "things": rows of a table of the test database whose changes
// append events in the same transaction, as a service's store does).

const thingStream = "thing"

// watchServer serves WatchTasks with events.Handler over things.
type watchServer struct {
	tasksv1.UnimplementedTaskServiceServer
	pool *pgxpool.Pool
	h    *events.Handler[*tasksv1.WatchTasksResponse]
}

func (s *watchServer) WatchTasks(req *tasksv1.WatchTasksRequest, stream grpc.ServerStreamingServer[tasksv1.WatchTasksResponse]) error {
	ctx := stream.Context()
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return err
	}
	w := events.Watch[*tasksv1.WatchTasksResponse]{AfterID: req.AfterId, FromNow: req.FromNow, OwnerID: p.UserID, Scope: req.Repo, ID: req.Id}
	if req.Id != "" {
		w.State = func(ctx context.Context) (bool, error) {
			var status string
			err := s.pool.QueryRow(ctx, "SELECT status FROM things WHERE id = $1 AND owner_id = $2", req.Id, p.UserID).Scan(&status)
			if errors.Is(err, pgx.ErrNoRows) {
				return false, fmt.Errorf("thing %s: %w", req.Id, errs.ErrNotFound)
			}
			return status == "done", err
		}
		w.Ends = thingDone
	}
	return s.h.Serve(ctx, w, stream.Send)
}

// thingDone: a status change to done finishes a thing.
func thingDone(m *tasksv1.WatchTasksResponse) bool {
	return m.GetStatusChange().GetTask().GetStatus() == tasksv1.TaskStatus_TASK_STATUS_DONE
}

func decodeThing(e events.Event) (*tasksv1.WatchTasksResponse, error) {
	var p struct{ Status string }
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		return nil, err
	}
	st := tasksv1.TaskStatus_TASK_STATUS_IN_PROGRESS
	if p.Status == "done" {
		st = tasksv1.TaskStatus_TASK_STATUS_DONE
	}
	return &tasksv1.WatchTasksResponse{
		Id: e.ID, Time: timestamppb.New(e.CreateTime), TaskId: e.AggregateID,
		Type: tasksv1.TaskEventType_TASK_EVENT_TYPE_STATUS_CHANGED,
		Payload: &tasksv1.WatchTasksResponse_StatusChange{StatusChange: &tasksv1.TaskStatusChange{
			Task: &tasksv1.Task{Id: e.AggregateID, Status: st},
		}},
	}, nil
}

type serveEnv struct {
	pool   *pgxpool.Pool
	client tasksv1.TaskServiceClient
	grpc   *grpctest.Env
}

func startServe(t *testing.T, configure ...func(*events.Handler[*tasksv1.WatchTasksResponse])) *serveEnv {
	t.Helper()
	pool := newPool(t)
	if _, err := pool.Exec(t.Context(), "CREATE TABLE things (id text PRIMARY KEY, owner_id text NOT NULL, status text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	h := &events.Handler[*tasksv1.WatchTasksResponse]{
		Hub: hubFor(t, pool, events.WithPollInterval(50*time.Millisecond)), Stream: thingStream, Decode: decodeThing,
		Heartbeat: func(hb *typev1.Heartbeat) *tasksv1.WatchTasksResponse {
			return &tasksv1.WatchTasksResponse{Time: hb.Time, Payload: &tasksv1.WatchTasksResponse_Heartbeat{Heartbeat: hb}}
		},
		Every: time.Hour,
	}
	for _, c := range configure {
		c(h)
	}
	env := grpctest.Start(t, func(s *grpc.Server) { tasksv1.RegisterTaskServiceServer(s, &watchServer{pool: pool, h: h}) })
	return &serveEnv{pool: pool, client: tasksv1.NewTaskServiceClient(env.Conn), grpc: env}
}

// set moves thing id of owner to status and appends its event, in one transaction; it
// returns the event's id.
func (e *serveEnv) set(t *testing.T, id, owner, status string) int64 {
	t.Helper()
	ctx := t.Context()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after Commit
	if _, err := tx.Exec(ctx, `INSERT INTO things (id, owner_id, status) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET status = excluded.status`, id, owner, status); err != nil {
		t.Fatal(err)
	}
	evID, err := events.Append(ctx, tx, events.Event{Stream: thingStream, AggregateID: id, OwnerID: owner,
		Type: "status_changed", Payload: []byte(`{"status":"` + status + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return evID
}

func (e *serveEnv) open(t *testing.T, user string, req *tasksv1.WatchTasksRequest) grpc.ServerStreamingClient[tasksv1.WatchTasksResponse] {
	t.Helper()
	s, err := e.client.WatchTasks(e.grpc.Context(t, user), req)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// msg is what a test expects of one message: an event's id, or a heartbeat's cursor.
type msg struct {
	id        int64 // event id; 0 for a heartbeat
	cursor    int64 // a heartbeat's
	heartbeat bool
	end       bool
}

func beat(cursor int64) msg  { return msg{heartbeat: true, cursor: cursor} }
func endAt(cursor int64) msg { return msg{heartbeat: true, cursor: cursor, end: true} }
func event(id int64) msg     { return msg{id: id} }
func msgOf(m *tasksv1.WatchTasksResponse) msg {
	if hb := m.GetHeartbeat(); hb != nil {
		return msg{id: m.Id, heartbeat: true, cursor: hb.Cursor, end: hb.End}
	}
	return msg{id: m.Id}
}

// recv reads n messages.
func recv(t *testing.T, s grpc.ServerStreamingClient[tasksv1.WatchTasksResponse], n int) []msg {
	t.Helper()
	var out []msg
	for len(out) < n {
		m, err := s.Recv()
		if err != nil {
			t.Fatalf("after %v: %v", out, err)
		}
		out = append(out, msgOf(m))
	}
	return out
}

// recvAll reads until the stream ends, which it must do.
func recvAll(t *testing.T, s grpc.ServerStreamingClient[tasksv1.WatchTasksResponse]) []msg {
	t.Helper()
	var out []msg
	for {
		m, err := s.Recv()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("after %v: %v", out, err)
		}
		out = append(out, msgOf(m))
	}
}

func wantMsgs(t *testing.T, what string, got []msg, want ...msg) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s = %+v\nwant %+v", what, got, want)
	}
}

// Every stream opens with a heartbeat at its starting cursor, also when nothing is there to
// send, and a watch of many never ends by itself.
func TestServeOpensWithHeartbeat(t *testing.T) {
	t.Parallel()
	e := startServe(t)
	wantMsgs(t, "empty history", recv(t, e.open(t, "alice", &tasksv1.WatchTasksRequest{}), 1), beat(0))

	a := e.set(t, "a", "alice", "open")
	b := e.set(t, "b", "alice", "done")
	e.set(t, "c", "bob", "open")
	wantMsgs(t, "from now", recv(t, e.open(t, "alice", &tasksv1.WatchTasksRequest{FromNow: true}), 1), beat(b+1))

	all := e.open(t, "alice", &tasksv1.WatchTasksRequest{})
	wantMsgs(t, "all of alice's", recv(t, all, 3), beat(0), event(a), event(b))
	// b finished, but a watch of many goes on.
	next := e.set(t, "a", "alice", "done")
	wantMsgs(t, "all of alice's, live", recv(t, all, 1), event(next))
}

// A watch of one resource that does not exist or is someone else's is NOT_FOUND, before
// anything is sent; bad cursors are refused too.
func TestServeRefuses(t *testing.T) {
	t.Parallel()
	e := startServe(t)
	e.set(t, "bobs", "bob", "open")
	for _, tc := range []struct {
		name string
		req  *tasksv1.WatchTasksRequest
		code codes.Code
		msg  string
	}{
		{"unknown", &tasksv1.WatchTasksRequest{Id: "nope"}, codes.NotFound, "nope"},
		{"someone else's", &tasksv1.WatchTasksRequest{Id: "bobs"}, codes.NotFound, "bobs"},
		{"negative cursor", &tasksv1.WatchTasksRequest{AfterId: -1}, codes.InvalidArgument, "after_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.open(t, "alice", tc.req).Recv()
			grpctest.WantCode(t, err, tc.code, tc.msg)
		})
	}
	t.Run("expired cursor", func(t *testing.T) {
		old := e.set(t, "old", "alice", "open")
		e.set(t, "old", "alice", "open")
		if _, err := e.pool.Exec(t.Context(), "UPDATE events SET create_time = now() - interval '2 days' WHERE id <= $1", old); err != nil {
			t.Fatal(err)
		}
		if n, err := events.Prune(t.Context(), e.pool, 24*time.Hour); err != nil || n == 0 {
			t.Fatalf("Prune = %d, %v", n, err)
		}
		_, err := e.open(t, "alice", &tasksv1.WatchTasksRequest{AfterId: old - 1}).Recv()
		grpctest.WantCode(t, err, codes.OutOfRange, "the oldest id kept is")
	})
}

// A finished resource's stream replays what is after the cursor and ends with the end
// marker; so does re-watching it from anywhere, also from past its last event.
func TestServeFinishedEnds(t *testing.T) {
	t.Parallel()
	e := startServe(t)
	first := e.set(t, "x", "alice", "open")
	e.set(t, "noise", "alice", "open")
	last := e.set(t, "x", "alice", "done")

	x := &tasksv1.WatchTasksRequest{Id: "x"}
	wantMsgs(t, "whole history", recvAll(t, e.open(t, "alice", x)), beat(0), event(first), event(last), endAt(last))
	x.AfterId = first
	wantMsgs(t, "after the first", recvAll(t, e.open(t, "alice", x)), beat(first), event(last), endAt(last))
	x.AfterId = last
	wantMsgs(t, "after the last", recvAll(t, e.open(t, "alice", x)), beat(last), endAt(last))
	x.AfterId, x.FromNow = 0, true
	later := e.set(t, "noise", "alice", "done")
	wantMsgs(t, "from now", recvAll(t, e.open(t, "alice", x)), beat(later), endAt(later))
}

// A watch of a running resource follows it live and ends after the event that finishes it,
// not at an earlier ending in its history (it was reopened), nor at another's.
func TestServeLiveEnds(t *testing.T) {
	t.Parallel()
	e := startServe(t)
	done := e.set(t, "y", "alice", "done")
	reopened := e.set(t, "y", "alice", "open")

	s := e.open(t, "alice", &tasksv1.WatchTasksRequest{Id: "y"})
	wantMsgs(t, "history", recv(t, s, 3), beat(0), event(done), event(reopened))
	e.set(t, "other", "alice", "done")
	step := e.set(t, "y", "alice", "open")
	end := e.set(t, "y", "alice", "done")
	e.set(t, "y", "alice", "open") // reopened again: not this stream's business any more
	wantMsgs(t, "live", recvAll(t, s), event(step), event(end), endAt(end))
}

// Watches bounds the streams: one over the bound is RESOURCE_EXHAUSTED.
func TestServeWatches(t *testing.T) {
	t.Parallel()
	e := startServe(t, func(h *events.Handler[*tasksv1.WatchTasksResponse]) {
		h.Watches = events.NewWatches(1, "thing watches")
	})
	recv(t, e.open(t, "alice", &tasksv1.WatchTasksRequest{}), 1)
	_, err := e.open(t, "bob", &tasksv1.WatchTasksRequest{}).Recv()
	grpctest.WantCode(t, err, codes.ResourceExhausted, "too many thing watches")
}

// Heartbeats of a quiet stream carry the cursor past events that did not match.
func TestServeHeartbeatCursor(t *testing.T) {
	t.Parallel()
	e := startServe(t, func(h *events.Handler[*tasksv1.WatchTasksResponse]) { h.Every = 20 * time.Millisecond })
	e.set(t, "z", "alice", "open")
	s := e.open(t, "alice", &tasksv1.WatchTasksRequest{Id: "z", FromNow: true})
	start := recv(t, s, 1)[0]
	other := e.set(t, "w", "alice", "open")
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := recv(t, s, 1)[0]
		if !m.heartbeat || m.end {
			t.Fatalf("message on a quiet stream = %+v", m)
		}
		if m.cursor >= other {
			break
		}
		if m.cursor < start.cursor || time.Now().After(deadline) {
			t.Fatalf("heartbeat cursor %d, want it to reach %d", m.cursor, other)
		}
	}
}
