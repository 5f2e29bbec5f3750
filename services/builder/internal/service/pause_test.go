package service_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/builder/internal/store"
)

// statusChanges are build id's STATUS_CHANGED events as stored, "FROM>TO error".
func statusChanges(t *testing.T, e *env, id string) []string {
	t.Helper()
	// The history is replayed at once; a watch of an unfinished build then stays open
	// until the deadline.
	ctx, cancel := context.WithTimeout(e.alice, time.Second)
	defer cancel()
	s, err := e.client.WatchBuild(ctx, &builderv1.WatchBuildRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		m, err := s.Recv()
		if err != nil {
			if status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("the watch of build %s ended with %v, want it open until the deadline", id, err)
			}
			return out
		}
		if m.GetHeartbeat().GetEnd() {
			t.Errorf("the watch of build %s ended (%v)", id, m)
			return out
		}
		if sc := m.GetStatusChange(); sc != nil {
			out = append(out, short(sc.PreviousStatus)+">"+short(sc.Status)+" "+sc.Error)
		}
	}
}

func short(s builderv1.BuildStatus) string { return store.StatusName(s) }

// A pending or running build pauses (the run in this process stopped at once), takes a
// person's guidance while paused, is claimed by no worker, and resumes to PENDING, queued
// again in the same transaction; pausing it again changes nothing, and the wrong states
// are FailedPrecondition naming the status.
func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	e := start(t)
	c, ctx := e.client, e.alice
	b := e.startBuild(t, ctx, "p1")
	const lease = "9d9d9d9d-9d9d-4d9d-8d9d-9d9d9d9d9d9d"

	// A worker runs it.
	sb, _, ok, err := e.store.Claim(ctx, b.Id, lease, time.Minute)
	if err != nil || !ok {
		t.Fatalf("Claim: %v %v", ok, err)
	}
	prev := sb.Status
	sb.Status, sb.StartTime = builderv1.BuildStatus_BUILD_STATUS_RUNNING, timestamppb.New(time.Now().Add(-time.Minute))
	if err := e.store.Apply(ctx, lease, store.Change{Build: sb, Events: []*builderv1.WatchBuildResponse{store.StatusEvent(prev, sb)}}); err != nil {
		t.Fatal(err)
	}

	resp, err := c.PauseBuild(ctx, &builderv1.PauseBuildRequest{Id: b.Id, Reason: "hold on"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Build.Status != builderv1.BuildStatus_BUILD_STATUS_PAUSED || resp.Build.Error != "hold on" || resp.Build.EndTime != nil {
		t.Errorf("paused build = %v %q end %v", resp.Build.Status, resp.Build.Error, resp.Build.EndTime)
	}
	if got := e.cancel.got(); !slices.Equal(got, []string{b.Id}) {
		t.Errorf("the run in this process was stopped for %v, want [%s]", got, b.Id)
	}
	// The worker that ran it has lost it: its renewal and its writes are refused.
	if err := e.store.Renew(ctx, b.Id, lease); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Renew of a paused build = %v, want ErrLeaseLost", err)
	}
	sb.CurrentStep = 3
	if err := e.store.Apply(ctx, lease, store.Change{Build: sb}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("a write of the paused build's worker = %v, want ErrLeaseLost", err)
	}
	// No worker takes it, nor does the reaper.
	if _, _, ok, err := e.store.Claim(ctx, b.Id, "8d8d8d8d-8d8d-4d8d-8d8d-8d8d8d8d8d8d", time.Millisecond); ok || err != nil {
		t.Errorf("Claim of a paused build = %v, %v; want not claimed", ok, err)
	}
	if ids, err := e.store.TakeStale(ctx, time.Millisecond, 10); err != nil || slices.Contains(ids, b.Id) {
		t.Errorf("TakeStale = %v, %v; the paused build is not stale", ids, err)
	}

	// Again: unchanged, no second event.
	again, err := c.PauseBuild(ctx, &builderv1.PauseBuildRequest{Id: b.Id, Reason: "another reason"})
	if err != nil || again.Build.Status != builderv1.BuildStatus_BUILD_STATUS_PAUSED || again.Build.Error != "hold on" {
		t.Errorf("second PauseBuild = %v, %v", again, err)
	}
	// Paused is not finished: GetBuild says so, guidance is taken, RetryStep is refused.
	if got, err := c.GetBuild(ctx, &builderv1.GetBuildRequest{Id: b.Id}); err != nil || got.Build.Status != builderv1.BuildStatus_BUILD_STATUS_PAUSED {
		t.Errorf("GetBuild = %v, %v", got, err)
	}
	if g, err := c.AddGuidance(ctx, &builderv1.AddGuidanceRequest{BuildId: b.Id, Text: "keep it tiny"}); err != nil || len(g.Build.Guidance) != 1 {
		t.Errorf("AddGuidance while paused = %v, %v", g, err)
	}
	_, err = c.RetryStep(ctx, &builderv1.RetryStepRequest{BuildId: b.Id, StepNumber: 1})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "paused")
	// A watch of it replays its history and stays open (no end).
	if got, want := statusChanges(t, e, b.Id), []string{"pending>running ", "running>paused hold on"}; !slices.Equal(got, want) {
		t.Errorf("status changes %q, want %q", got, want)
	}

	// It started two hours ago and was paused one (as if): that hour is not the build's.
	if _, err := e.store.Pool().Exec(ctx, `UPDATE builds SET start_time = now() - interval '2 hours', pause_time = now() - interval '1 hour'
		WHERE id = $1`, b.Id); err != nil {
		t.Fatal(err)
	}
	queued := len(e.queue.got())
	res, err := c.ResumeBuild(ctx, &builderv1.ResumeBuildRequest{Id: b.Id})
	if err != nil {
		t.Fatal(err)
	}
	if res.Build.Status != builderv1.BuildStatus_BUILD_STATUS_PENDING || res.Build.Error != "" || len(res.Build.Guidance) != 1 {
		t.Errorf("resumed build = %v %q guidance %v", res.Build.Status, res.Build.Error, res.Build.Guidance)
	}
	if got := e.queue.got(); len(got) != queued+1 || got[len(got)-1] != b.Id {
		t.Errorf("enqueued %v, want %s queued again", got, b.Id)
	}
	stored, err := e.store.Get(ctx, "alice", b.Id)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Paused < time.Hour-time.Minute || stored.Paused > time.Hour+time.Minute {
		t.Errorf("paused %s, want about an hour", stored.Paused)
	}
	if got, want := statusChanges(t, e, b.Id), []string{"pending>running ", "running>paused hold on", "paused>pending "}; !slices.Equal(got, want) {
		t.Errorf("status changes %q, want %q", got, want)
	}
	// A worker takes it again where it was.
	if s2, _, ok, err := e.store.Claim(ctx, b.Id, "7d7d7d7d-7d7d-4d7d-8d7d-7d7d7d7d7d7d", time.Minute); err != nil || !ok {
		t.Errorf("Claim after resume = %v, %v", ok, err)
	} else if s2.Status != builderv1.BuildStatus_BUILD_STATUS_PENDING || s2.Paused != stored.Paused {
		t.Errorf("claimed after resume: %v, paused %s", s2.Status, s2.Paused)
	}

	// Not paused: resuming is refused, naming the status.
	_, err = c.ResumeBuild(ctx, &builderv1.ResumeBuildRequest{Id: b.Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "pending")
}

// A paused build can be cancelled (its unfinished steps skipped); a finished build can be
// neither paused nor resumed.
func TestPauseFinishedAndCancelPaused(t *testing.T) {
	t.Parallel()
	e := start(t)
	c, ctx := e.client, e.alice

	b := e.startBuild(t, ctx, "pc1")
	if _, err := c.PauseBuild(ctx, &builderv1.PauseBuildRequest{Id: b.Id}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetBuild(ctx, &builderv1.GetBuildRequest{Id: b.Id})
	if err != nil || got.Build.Error != "paused" {
		t.Fatalf("a pause without a reason = %v, %v", got, err)
	}
	cancelled, err := c.CancelBuild(ctx, &builderv1.CancelBuildRequest{Id: b.Id, Reason: "never mind"})
	if err != nil || cancelled.Build.Status != builderv1.BuildStatus_BUILD_STATUS_CANCELLED || cancelled.Build.Error != "never mind" {
		t.Fatalf("CancelBuild of a paused build = %v, %v", cancelled, err)
	}
	for name, call := range map[string]func() error{
		"pause cancelled": func() error {
			_, err := c.PauseBuild(ctx, &builderv1.PauseBuildRequest{Id: b.Id})
			return err
		},
		"resume cancelled": func() error {
			_, err := c.ResumeBuild(ctx, &builderv1.ResumeBuildRequest{Id: b.Id})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) { grpctest.WantCode(t, call(), codes.FailedPrecondition, "cancelled") })
	}

	for _, end := range []builderv1.BuildStatus{builderv1.BuildStatus_BUILD_STATUS_COMPLETED, builderv1.BuildStatus_BUILD_STATUS_FAILED} {
		done := e.startBuild(t, ctx, "pc-"+short(end))
		lease := "9d9d9d9d-9d9d-4d9d-8d9d-9d9d9d9d9d9d"
		sb, _, ok, err := e.store.Claim(ctx, done.Id, lease, time.Minute)
		if err != nil || !ok {
			t.Fatalf("Claim: %v %v", ok, err)
		}
		sb.Status = end
		if err := e.store.Apply(ctx, lease, store.Change{Build: sb}); err != nil {
			t.Fatal(err)
		}
		_, err = c.PauseBuild(ctx, &builderv1.PauseBuildRequest{Id: done.Id})
		grpctest.WantCode(t, err, codes.FailedPrecondition, short(end))
		_, err = c.ResumeBuild(ctx, &builderv1.ResumeBuildRequest{Id: done.Id})
		grpctest.WantCode(t, err, codes.FailedPrecondition, short(end))
		if got, err := c.GetBuild(ctx, &builderv1.GetBuildRequest{Id: done.Id}); err != nil || got.Build.Status != end {
			t.Errorf("%s build after a refused pause = %v, %v", short(end), got, err)
		}
	}
	// Only the one pause reached the engine.
	if got := e.cancel.got(); !slices.Equal(got, []string{b.Id, b.Id}) {
		t.Errorf("stopped %v, want the pause and the cancel of %s", got, b.Id)
	}
}
