// Package ratelimit is TheFold's one kind of request budget: a token bucket per key (a user,
// a service acting for an owner, a client address), refilled at a steady rate up to a
// burst. The REST edge and every gRPC server spend from it, so a budget means the same on
// both doors.
package ratelimit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rate is a token bucket: PerSecond requests a second on average, bursts of Burst. A zero
// PerSecond means no limit.
type Rate struct {
	PerSecond float64
	Burst     int
}

// Off reports whether r limits nothing.
func (r Rate) Off() bool { return r.PerSecond <= 0 }

// ParseRate reads "<n>/s", "<n>/m" or "<n>/h", optionally ",burst=<b>" (burst defaults to
// twice the per-second rate, at least 1); "0" or "off" is no limit.
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" || s == "off" {
		return Rate{}, nil
	}
	spec, burstPart, hasBurst := strings.Cut(s, ",")
	num, unit, ok := strings.Cut(spec, "/")
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if !ok || err != nil || n <= 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return Rate{}, fmt.Errorf("rate %q: want <n>/s, <n>/m or <n>/h, optionally ,burst=<b>", s)
	}
	switch strings.TrimSpace(unit) {
	case "s":
	case "m":
		n /= 60
	case "h":
		n /= 3600
	default:
		return Rate{}, fmt.Errorf("rate %q: unit must be s, m or h", s)
	}
	r := Rate{PerSecond: n, Burst: max(int(math.Ceil(2*n)), 1)}
	if hasBurst {
		b, ok := strings.CutPrefix(strings.TrimSpace(burstPart), "burst=")
		v, err := strconv.Atoi(b)
		if !ok || err != nil || v < 1 {
			return Rate{}, fmt.Errorf("rate %q: burst must be a positive integer (burst=<b>)", s)
		}
		r.Burst = v
	}
	return r, nil
}

// String is r as ParseRate reads it, in the largest unit that keeps the count at least one
// ("30/m", not "0.5/s").
func (r Rate) String() string {
	if r.Off() {
		return "off"
	}
	n, unit := r.PerSecond, "s"
	if n < 1 {
		n, unit = n*60, "m"
		if n < 1 {
			n, unit = n*60, "h"
		}
	}
	return fmt.Sprintf("%s/%s,burst=%d", strconv.FormatFloat(math.Round(n*1e6)/1e6, 'g', -1, 64), unit, r.Burst)
}

// sweepEvery is how often idle buckets are dropped: a bucket untouched for as long as it
// takes to refill is full, the same as one never made, so dropping it changes nothing.
const sweepEvery = time.Minute

// Buckets holds one token bucket per key, made on first use. Safe for concurrent use.
type Buckets struct {
	rate  Rate
	fill  time.Duration // an empty bucket is full again after this
	mu    sync.Mutex
	m     map[string]*bucket
	swept time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

// NewBuckets returns buckets of rate r (a burst below 1 is taken as 1). Take on buckets
// of a rate that is Off always succeeds.
func NewBuckets(r Rate) *Buckets {
	r.Burst = max(r.Burst, 1)
	b := &Buckets{rate: r, m: map[string]*bucket{}}
	if !r.Off() {
		b.fill = time.Duration(float64(r.Burst) / r.PerSecond * float64(time.Second))
	}
	return b
}

// Rate is the rate b was made with.
func (b *Buckets) Rate() Rate { return b.rate }

// Take spends one request of key's bucket, or, when it is empty, spends nothing and says
// how long until a request would be allowed.
func (b *Buckets) Take(key string, now time.Time) (ok bool, retry time.Duration) {
	if b.rate.Off() {
		return true, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.swept) >= sweepEvery {
		for k, e := range b.m {
			if now.Sub(e.last) >= b.fill {
				delete(b.m, k)
			}
		}
		b.swept = now
	}
	burst := float64(b.rate.Burst)
	e := b.m[key]
	if e == nil {
		e = &bucket{tokens: burst, last: now}
		b.m[key] = e
	}
	if d := now.Sub(e.last); d > 0 {
		e.tokens = min(burst, e.tokens+d.Seconds()*b.rate.PerSecond)
		e.last = now
	}
	if e.tokens >= 1 {
		e.tokens--
		return true, 0
	}
	wait := time.Duration(math.Ceil((1 - e.tokens) / b.rate.PerSecond * float64(time.Second)))
	return false, max(wait, time.Millisecond)
}

// Len is how many buckets are held (idle ones are dropped as Take goes).
func (b *Buckets) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.m)
}
