package events_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
)

func TestWatchesRefuseBeyondTheirMax(t *testing.T) {
	w := events.NewWatches(2, "build watches")
	l1, err := w.EnterAs("user:a")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := w.EnterAs("user:b")
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.EnterAs("user:c")
	wantExhausted(t, err, "too many build watches on this server (2); retry later")
	l1()
	l1() // leaving twice frees one slot, not two
	if l3, err := w.EnterAs("user:c"); err != nil {
		t.Fatalf("a slot left free: %v", err)
	} else {
		if _, err := w.EnterAs("user:d"); err == nil {
			t.Fatal("a second leave freed a second slot")
		}
		l3()
	}
	l2()
	if events.NewWatches(0, "x").Max() != 1 {
		t.Error("NewWatches(0) allows no watch")
	}
}

// TestWatchesPerCaller: a user holding all of their slots is refused, with RetryInfo and
// a message naming the per-caller bound, while another user is still admitted; a service
// acting for that user has its own share.
func TestWatchesPerCaller(t *testing.T) {
	w := events.NewWatches(10, "task watches", events.PerCaller(2))
	alice := auth.WithPrincipal(t.Context(), auth.Principal{UserID: "alice"})
	bob := auth.WithPrincipal(t.Context(), auth.Principal{UserID: "bob"})
	agentForAlice := auth.WithPrincipal(t.Context(), auth.Principal{UserID: "alice", Service: "agent"})
	var leaves []func()
	for range 2 {
		l, err := w.Enter(alice)
		if err != nil {
			t.Fatalf("alice within her share: %v", err)
		}
		leaves = append(leaves, l)
	}
	_, err := w.Enter(alice)
	wantExhausted(t, err, "too many task watches for one caller (2); end one or retry later")
	if w.Held("user:alice") != 2 {
		t.Errorf("alice holds %d, want 2", w.Held("user:alice"))
	}
	lb, err := w.Enter(bob)
	if err != nil {
		t.Fatalf("bob refused while alice holds her share: %v", err)
	}
	la, err := w.Enter(agentForAlice)
	if err != nil {
		t.Fatalf("the agent acting for alice refused for alice's own watches: %v", err)
	}
	leaves[0]()
	if l, err := w.Enter(alice); err != nil {
		t.Fatalf("alice refused after ending a watch: %v", err)
	} else {
		l()
	}
	leaves[1]()
	lb()
	la()
	if w.Held("user:alice") != 0 || w.Held("user:bob") != 0 {
		t.Error("slots still held after every leave")
	}
}

// TestWatchesServerWideBoundHoldsAcrossCallers: the per-caller share does not widen the
// server's bound.
func TestWatchesServerWideBoundHoldsAcrossCallers(t *testing.T) {
	w := events.NewWatches(3, "job watches", events.PerCaller(2))
	for _, k := range []string{"user:a", "user:a", "user:b"} {
		if _, err := w.EnterAs(k); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	_, err := w.EnterAs("user:c")
	wantExhausted(t, err, "too many job watches on this server (3); retry later")
	// Calls without a principal share one key.
	u := events.NewWatches(5, "revocation watches", events.PerCaller(1))
	if _, err := u.Enter(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err = u.Enter(context.Background())
	wantExhausted(t, err, "for one caller (1)")
}

func wantExhausted(t *testing.T, err error, msg string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), msg) {
		t.Fatalf("err = %v, want ResourceExhausted %q", err, msg)
	}
	if d, ok := errs.RetryAfter(err); !ok || d != events.WatchRetryAfter {
		t.Fatalf("RetryInfo = %v %v, want %v", d, ok, events.WatchRetryAfter)
	}
}

func TestStartAndStreamEnd(t *testing.T) {
	latest := func(context.Context) (int64, error) { return 42, nil }
	if got, _ := events.Start(t.Context(), 7, false, latest); got != 7 {
		t.Errorf("Start after 7 = %d", got)
	}
	if got, _ := events.Start(t.Context(), 7, true, latest); got != 42 {
		t.Errorf("Start from now = %d, want 42", got)
	}
	boom := errors.New("boom")
	if _, err := events.Start(t.Context(), 0, true, func(context.Context) (int64, error) { return 0, boom }); err != boom {
		t.Errorf("Start's latest error = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	if events.StreamEnd(ctx, boom) != boom {
		t.Error("StreamEnd of a live stream hides its error")
	}
	cancel()
	if !errors.Is(events.StreamEnd(ctx, boom), context.Canceled) {
		t.Error("StreamEnd of a gone client is not its context's error")
	}
}
