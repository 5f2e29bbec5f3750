package usage

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

func TestAdd(t *testing.T) {
	a := &typev1.Usage{Model: "small", Provider: "p", InputTokens: 10, OutputTokens: 5, CostMicros: 7, Calls: 1, Latency: durationpb.New(time.Second)}
	b := &typev1.Usage{Model: "big", Provider: "q", InputTokens: 1, OutputTokens: 50, CacheReadTokens: 3, CacheWriteTokens: 4, CostMicros: 3, Calls: 2, Latency: durationpb.New(2 * time.Second)}
	got := Add(a, b)
	want := &typev1.Usage{Model: "big", Provider: "q", InputTokens: 11, OutputTokens: 55, CacheReadTokens: 3, CacheWriteTokens: 4, CostMicros: 10, Calls: 3, Latency: durationpb.New(3 * time.Second)}
	if !proto.Equal(got, want) {
		t.Errorf("Add = %v, want %v", got, want)
	}
	// The larger producer keeps its name; nil on either side is zero.
	if got := Add(b, a); got.Model != "big" {
		t.Errorf("Add(b, a).Model = %q, want big", got.Model)
	}
	if got := Add(nil, a); !proto.Equal(got, a) {
		t.Errorf("Add(nil, a) = %v, want %v", got, a)
	}
	if got := Add(a, nil); got.Model != "small" || got.InputTokens != 10 {
		t.Errorf("Add(a, nil) = %v", got)
	}
	if Tokens(a) != 15 || Tokens(nil) != 0 {
		t.Errorf("Tokens = %d, %d; want 15, 0", Tokens(a), Tokens(nil))
	}
}
