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

func TestExhausted(t *testing.T) {
	u := &typev1.Usage{InputTokens: 600, OutputTokens: 400, CostMicros: 2_500_000}
	for _, tc := range []struct {
		b      *typev1.Budget
		active time.Duration
		want   string
	}{
		{nil, time.Hour, ""},
		{&typev1.Budget{MaxTokens: 1001, MaxCostMicros: 3_000_000, MaxWallTime: durationpb.New(2 * time.Hour)}, time.Hour, ""},
		{&typev1.Budget{MaxTokens: 1000}, 0, "1000 tokens of 1000"},
		{&typev1.Budget{MaxCostMicros: 2_000_000}, 0, "$2.5000 of $2.0000"},
		{&typev1.Budget{MaxWallTime: durationpb.New(time.Minute)}, 90 * time.Second, "1m30s of wall time of 1m0s"},
	} {
		if got := Exhausted(u, tc.b, tc.active); got != tc.want {
			t.Errorf("Exhausted(%v, %s) = %q, want %q", tc.b, tc.active, got, tc.want)
		}
	}
}
