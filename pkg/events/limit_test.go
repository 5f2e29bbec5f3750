package events_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/events"
)

func TestWatchesRefuseBeyondTheirMax(t *testing.T) {
	w := events.NewWatches(2, "build watches")
	l1, err := w.Enter()
	if err != nil {
		t.Fatal(err)
	}
	l2, err := w.Enter()
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Enter()
	if status.Code(err) != codes.ResourceExhausted || status.Convert(err).Message() != "too many build watches on this server (2); retry later" {
		t.Fatalf("third watch: %v", err)
	}
	l1()
	if l3, err := w.Enter(); err != nil {
		t.Fatalf("a slot left free: %v", err)
	} else {
		l3()
	}
	l2()
	if events.NewWatches(0, "x").Max() != 1 {
		t.Error("NewWatches(0) allows no watch")
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
