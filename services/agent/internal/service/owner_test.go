package service_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/events"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"

	"github.com/thefold/thefold/services/agent/internal/service"
	"github.com/thefold/thefold/services/agent/internal/store"
	"github.com/thefold/thefold/services/agent/migrations"
)

// stopper records the runs the service stops (the loop engine's part).
type stopper struct {
	mu  sync.Mutex
	ids []string
}

func (s *stopper) Stop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, id)
}

func (s *stopper) stopped() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ids)
}

// TestDisabledOwnersJobsAreCancelled: when the verifier learns that an owner was disabled
// (the gateway's revocation, as main wires it through auth.OwnersDisabled), every
// unfinished job of theirs is cancelled with the reason "owner disabled" and its run is
// stopped; their finished jobs and other owners' jobs are left alone.
func TestDisabledOwnersJobsAreCancelled(t *testing.T) {
	pool, _ := dbtest.NewDatabase(t, "agent", migrations.FS)
	hub := events.NewHub(pool, events.WithPollInterval(50*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = hub.Run(ctx) }()
	st := store.New(pool, hub)
	q := &queue{}
	stop := &stopper{}
	srv := service.New(st, service.Options{Queue: q, Stopper: stop, Heartbeat: time.Second, MaxWatches: 4})
	e := &env{st: st, q: q}

	running := e.job(t, alice, taskA)
	if _, ok, err := st.Claim(ctx, running.Id, "5d6f3c7e-8a9b-4c0d-9e1f-2a3b4c5d6e7f", time.Minute); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	queued := e.job(t, alice, "22222222-2222-4222-8222-222222222222")
	ended := e.job(t, alice, "33333333-3333-4333-8333-333333333333")
	if n, err := srv.CancelOwnerJobs(ctx, alice, "warm-up"); err != nil || n != 3 { // ends all three
		for _, j := range []*agentv1.Job{running, queued, ended} {
			got, _ := st.Get(ctx, alice, j.Id)
			t.Logf("%s %s", j.Id, store.StatusName(got.Status))
		}
		t.Fatalf("warm-up cancelled %d: %v", n, err)
	}
	// Fresh ones for the real run; the ended job stays as it was.
	running = e.job(t, alice, taskA)
	if _, ok, err := st.Claim(ctx, running.Id, "6d6f3c7e-8a9b-4c0d-9e1f-2a3b4c5d6e7f", time.Minute); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	queued = e.job(t, alice, "22222222-2222-4222-8222-222222222222")
	bobs := e.job(t, bob, "44444444-4444-4444-8444-444444444444")
	before := len(stop.stopped())

	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	v := auth.NewVerifier(pub)
	done := make(chan error, 1)
	go func() {
		done <- auth.OwnersDisabled(ctx, v, slog.New(slog.DiscardHandler), func(ctx context.Context, owner string) error {
			_, err := srv.CancelOwnerJobs(ctx, owner, service.ReasonOwnerDisabled)
			return err
		})
	}()
	v.Revoke(auth.Revocation{Type: auth.RevokeUserDisabled, Subject: alice, NotBefore: time.Now(), Expire: time.Now().Add(time.Hour)})

	deadline := time.Now().Add(10 * time.Second)
	for _, j := range []*agentv1.Job{running, queued} {
		for {
			got, err := st.Get(ctx, alice, j.Id)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status == agentv1.JobStatus_JOB_STATUS_CANCELLED {
				if got.StatusReason != service.ReasonOwnerDisabled || got.EndTime == nil {
					t.Errorf("job %s: reason %q, end %v; want %q and an end time", j.Id, got.StatusReason, got.EndTime, service.ReasonOwnerDisabled)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s of the disabled owner is still %s", j.Id, store.StatusName(got.Status))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// The run is stopped just after its job's cancellation commits, so it may trail the
	// status the loop above saw.
	for !slices.Contains(stop.stopped()[before:], running.Id) {
		if time.Now().After(deadline) {
			t.Fatalf("runs stopped %v, want the running job %s among them", stop.stopped()[before:], running.Id)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got, err := st.Get(ctx, alice, ended.Id); err != nil || got.StatusReason != "warm-up" {
		t.Errorf("the job that had ended: %v, %v; want it untouched", got, err)
	}
	if got, err := st.Get(ctx, bob, bobs.Id); err != nil || got.Status != agentv1.JobStatus_JOB_STATUS_QUEUED {
		t.Errorf("another owner's job: %v, %v; want it still queued", got, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
