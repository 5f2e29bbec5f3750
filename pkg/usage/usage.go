// Package usage adds up the thefold.type.v1.Usage of model calls: a build's steps, a job's
// phases.
package usage

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// Add returns a + b: every count adds up, latencies add, and the model and provider are
// the ones that produced more output (b's on a tie, or when a has none). Either may be nil.
func Add(a, b *typev1.Usage) *typev1.Usage {
	if a == nil {
		a = &typev1.Usage{}
	}
	out := &typev1.Usage{
		Model: a.Model, Provider: a.Provider,
		InputTokens: a.InputTokens + b.GetInputTokens(), OutputTokens: a.OutputTokens + b.GetOutputTokens(),
		CacheReadTokens: a.CacheReadTokens + b.GetCacheReadTokens(), CacheWriteTokens: a.CacheWriteTokens + b.GetCacheWriteTokens(),
		CostMicros: a.CostMicros + b.GetCostMicros(), Calls: a.Calls + b.GetCalls(),
	}
	if b.GetModel() != "" && (b.GetOutputTokens() >= a.OutputTokens || a.Model == "") {
		out.Model, out.Provider = b.GetModel(), b.GetProvider()
	}
	if a.Latency != nil || b.GetLatency() != nil {
		out.Latency = DurationSum(a.Latency, b.GetLatency())
	}
	return out
}

// Tokens is u's input plus output tokens.
func Tokens(u *typev1.Usage) int64 { return u.GetInputTokens() + u.GetOutputTokens() }

// DurationSum is a + b; either may be nil.
func DurationSum(a, b *durationpb.Duration) *durationpb.Duration {
	var d time.Duration
	if a != nil {
		d += a.AsDuration()
	}
	if b != nil {
		d += b.AsDuration()
	}
	return durationpb.New(d)
}
