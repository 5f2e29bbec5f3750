package service

import (
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"

	"github.com/thefold/thefold/services/tasks/internal/store"
)

// Two users' requests with the same request_id and the same content can only be told apart
// by the owner in the derivation; through gRPC their task ids always differ anyway.
func TestAIRequestID(t *testing.T) {
	t.Parallel()
	req := &aiv1.PlanTaskOrderRequest{
		Attribution: &aiv1.Attribution{Repo: "local/demo"},
		Tasks:       []*aiv1.OrderableTask{{Id: "t1", Title: "a"}, {Id: "t2", Title: "b", BlockedBy: []string{"t1"}}},
	}
	changed := proto.Clone(req).(*aiv1.PlanTaskOrderRequest)
	changed.Tasks[1].Complexity = 4
	r1 := &store.Request{ID: "r1"}
	id := func(owner string, r *store.Request, req *aiv1.PlanTaskOrderRequest) string {
		t.Helper()
		s, err := aiRequestID(owner, r, req)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := id("alice", r1, req)
	if !strings.HasPrefix(base, "tasks-order-") || len(base) != 52 {
		t.Fatalf("id = %q", base)
	}
	cases := []struct {
		name string
		got  string
		same bool
	}{
		{"a retry", id("alice", &store.Request{ID: "r1"}, proto.Clone(req).(*aiv1.PlanTaskOrderRequest)), true},
		{"another user", id("bob", r1, req), false},
		{"another request id", id("alice", &store.Request{ID: "r2"}, req), false},
		{"other tasks", id("alice", r1, changed), false},
	}
	for _, tc := range cases {
		if (tc.got == base) != tc.same {
			t.Errorf("%s: %q vs %q, want same = %v", tc.name, tc.got, base, tc.same)
		}
	}
	// The separator keeps owner and request id apart: "alice"+"1r1" is not "alice1"+"r1".
	if id("alice", &store.Request{ID: "1r1"}, req) == id("alice1", r1, req) {
		t.Error("owner and request id run together")
	}
	if got := id("alice", nil, req); got != "" {
		t.Errorf("without a request_id: %q, want none", got)
	}
}

func TestCapBytes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 10, "abcdefg…"},
		// "é" is two bytes; the cut never splits it.
		{"ééééé", 7, "éé…"},
		{"ééééé", 8, "éé…"},
	}
	for _, tc := range cases {
		got := capBytes(tc.in, tc.n)
		if got != tc.want || len(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("capBytes(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
