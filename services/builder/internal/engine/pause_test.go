package engine_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/status"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"

	"github.com/thefold/thefold/services/builder/internal/engine"
	"github.com/thefold/thefold/services/builder/internal/store"
)

// A build paused while its first file's generation hangs on the model: the call is
// cancelled at once when the pause reaches the replica running it (CancelBuild's path:
// the service stops the run), or at the run's next lease renewal when it was recorded on
// another replica. The run ends without failing anything; the step stays RUNNING and no
// further step or call runs. Resumed, the build runs from that step — its generation asked
// again under the same key, the ai service having kept no answer — to the end.
func TestPauseStopsTheCallInFlightAndResumeAsksAgain(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// here: the pause reaches this process's engine (the service's Cancel).
		here bool
	}{
		{"on this replica", true},
		{"on another replica", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			started := make(chan struct{})
			cancelled := make(chan struct{})
			ai := &fakeAI{
				generate: func(req *aiv1.GenerateFileRequest) string {
					return map[string]string{"lib/greet.go": greetTwoArgs, "app/app.go": appFixed}[req.File.Path]
				},
				hold: func(ctx context.Context, n int) error {
					if n != 1 {
						return nil
					}
					close(started)
					<-ctx.Done() // a model that answers only after the pause
					close(cancelled)
					return status.FromContextError(ctx.Err()).Err()
				},
			}
			h := newHarness(t, newSandbox(shop, goCheck), ai, engine.DefaultConfig)
			id := h.create(shopPlan())
			ctx := context.Background()

			ran := make(chan error, 1)
			go func() {
				runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				ran <- h.eng.Run(runCtx, id)
			}()
			select {
			case <-started:
			case <-time.After(20 * time.Second):
				t.Fatal("the first generation was never asked")
			}
			// The step's start is written while its first call goes out (run.go, ApplyLater):
			// the pause comes once it is, as a person's would, so the step is shown as the one
			// the pause interrupted. (A pause that wins that race leaves it pending, and the
			// resume runs it all the same.)
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				_, steps := h.get(id)
				if len(steps) > 0 && steps[0].Status == builderv1.BuildStepStatus_BUILD_STEP_STATUS_RUNNING {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the first step's start was not written within 10 s: %v", steps)
				}
			}
			if _, err := h.store.Pause(ctx, "alice", id, "hold on"); err != nil {
				t.Fatal(err)
			}
			paused := time.Now()
			if c.here {
				h.eng.Cancel(id)
			}
			select {
			case <-cancelled:
			case <-time.After(2 * time.Second):
				t.Fatal("the call in flight was not cancelled within 2 s of the pause")
			}
			select {
			case err := <-ran:
				if err != nil {
					t.Errorf("the paused run ended with %v, want nil (a clean stop)", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the paused run did not end")
			}
			t.Logf("call cancelled, run ended %s after the pause", time.Since(paused).Round(time.Millisecond))

			b, steps := h.get(id)
			if b.Status != builderv1.BuildStatus_BUILD_STATUS_PAUSED || b.Error != "hold on" || b.EndTime != nil {
				t.Fatalf("after the pause: %v %q end %v", b.Status, b.Error, b.EndTime)
			}
			var got []string
			for _, st := range steps {
				got = append(got, st.Path+" "+st.Status.String())
			}
			if want := []string{"lib/greet.go BUILD_STEP_STATUS_RUNNING", "app/app.go BUILD_STEP_STATUS_PENDING"}; !slices.Equal(got, want) {
				t.Errorf("steps after the pause %q, want %q", got, want)
			}
			if gens, _ := ai.calls(); len(gens) != 1 {
				t.Errorf("%d generations before the resume, want 1", len(gens))
			}

			if _, err := h.store.Resume(ctx, "alice", id, func(context.Context, pgx.Tx, string) error { return nil }); err != nil {
				t.Fatal(err)
			}
			runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := h.eng.Run(runCtx, id); err != nil {
				t.Fatalf("run after the resume: %v", err)
			}
			b, _ = h.get(id)
			wantCompleted(t, b)
			if sb := h.sb.content("app/app.go"); sb != appFixed {
				t.Errorf("app/app.go after the build:\n%s", sb)
			}

			gens, _ := ai.calls()
			var paths []string
			for _, g := range gens {
				paths = append(paths, g.File.Path)
			}
			if want := []string{"lib/greet.go", "lib/greet.go", "app/app.go"}; !slices.Equal(paths, want) {
				t.Fatalf("generations %q, want %q (the interrupted one asked again)", paths, want)
			}
			if gens[0].RequestId != gens[1].RequestId {
				t.Errorf("the interrupted generation was asked again under %q, want its key %q", gens[1].RequestId, gens[0].RequestId)
			}

			var changes []string
			for _, e := range h.events(id) {
				if sc := e.GetStatusChange(); sc != nil {
					changes = append(changes, store.StatusName(sc.PreviousStatus)+">"+store.StatusName(sc.Status))
				}
				if e.Type == builderv1.BuildEventType_BUILD_EVENT_TYPE_STEP_FAILED || e.Type == builderv1.BuildEventType_BUILD_EVENT_TYPE_STEP_SKIPPED {
					t.Errorf("event %v: the pause failed or skipped a step", e)
				}
			}
			want := []string{"pending>running", "running>paused", "paused>pending", "pending>running", "running>completed"}
			if !slices.Equal(changes, want) {
				t.Errorf("status changes %q, want %q", changes, want)
			}
		})
	}
}
