// Package usage adds up the thefold.type.v1.Usage of model calls: a build's steps, a job's
// phases.
package usage

import (
	"fmt"
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

// Exhausted says what of budget b the spending u (and active, the wall time it ran) has
// used up — "N tokens of M", "$x of $y" or "T of wall time of W", the first cap reached —
// or "" while every cap (a zero cap is none) still has room.
func Exhausted(u *typev1.Usage, b *typev1.Budget, active time.Duration) string {
	switch {
	case b.GetMaxTokens() > 0 && Tokens(u) >= b.GetMaxTokens():
		return fmt.Sprintf("%d tokens of %d", Tokens(u), b.GetMaxTokens())
	case b.GetMaxCostMicros() > 0 && u.GetCostMicros() >= b.GetMaxCostMicros():
		return fmt.Sprintf("$%.4f of $%.4f", float64(u.GetCostMicros())/1e6, float64(b.GetMaxCostMicros())/1e6)
	case b.GetMaxWallTime().AsDuration() > 0 && active >= b.GetMaxWallTime().AsDuration():
		return fmt.Sprintf("%s of wall time of %s", active.Round(time.Second), b.GetMaxWallTime().AsDuration())
	}
	return ""
}
