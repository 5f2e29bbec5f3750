package service_test

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	"github.com/thefold/thefold/services/memory/internal/service"
)

// MarkMemoriesUsed counts a use per call; a retry with the same request_id returns the
// first call's answer and counts nothing again, per caller.
func TestMarkMemoriesUsedRequestID(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	m := e.store(t, e.alice, &memoryv1.StoreMemoryRequest{Content: "The integration tests need the fake GitHub on port 9090."})
	const unknown = "5f0c0f5e-0000-4000-8000-000000000000"
	uses := func() int64 {
		t.Helper()
		got, err := e.client.GetMemory(e.alice, &memoryv1.GetMemoryRequest{Id: m.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		return got.GetMemory().GetUseCount()
	}
	mark := func(ctx any, requestID string) *memoryv1.MarkMemoriesUsedResponse {
		t.Helper()
		c := e.alice
		if ctx != nil {
			c = e.bob
		}
		resp, err := e.client.MarkMemoriesUsed(c, &memoryv1.MarkMemoriesUsedRequest{Ids: []string{m.GetId(), unknown}, RequestId: requestID})
		if err != nil {
			t.Fatalf("MarkMemoriesUsed(%q): %v", requestID, err)
		}
		return resp
	}

	first := mark(nil, "use-1")
	if !slices.Equal(first.GetMarkedIds(), []string{m.GetId()}) || !slices.Equal(first.GetUnknownIds(), []string{unknown}) {
		t.Fatalf("first call: %v", first)
	}
	for range 2 {
		again := mark(nil, "use-1")
		if !slices.Equal(again.GetMarkedIds(), first.GetMarkedIds()) || !slices.Equal(again.GetUnknownIds(), first.GetUnknownIds()) {
			t.Fatalf("retry: %v, want the first answer %v", again, first)
		}
	}
	if n := uses(); n != 1 {
		t.Fatalf("after a call and two retries: use_count %d, want 1", n)
	}
	mark(nil, "use-2")
	mark(nil, "")
	mark(nil, "")
	if n := uses(); n != 4 {
		t.Fatalf("after another request_id and two calls without: use_count %d, want 4", n)
	}
	// Bob's "use-1" is his own: it marks none of Alice's memories and counts nothing.
	if bob := mark("bob", "use-1"); len(bob.GetMarkedIds()) != 0 || len(bob.GetUnknownIds()) != 2 {
		t.Fatalf("bob's call: %v", bob)
	}
	if n := uses(); n != 4 {
		t.Fatalf("after bob's call: use_count %d, want 4", n)
	}

	for name, bad := range map[string]string{"too long": strings.Repeat("r", 200), "a space": "use 1"} {
		_, err := e.client.MarkMemoriesUsed(e.alice, &memoryv1.MarkMemoriesUsedRequest{Ids: []string{m.GetId()}, RequestId: bad})
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		wantCode(t, err, codes.InvalidArgument, "request_id")
	}
}
