package ratelimit_test

import (
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/ratelimit"
)

func TestParseRate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want ratelimit.Rate
		bad  bool
	}{
		{"off", ratelimit.Rate{}, false},
		{"0", ratelimit.Rate{}, false},
		{"", ratelimit.Rate{}, false},
		{"10/s", ratelimit.Rate{PerSecond: 10, Burst: 20}, false},
		{"60/m", ratelimit.Rate{PerSecond: 1, Burst: 2}, false},
		{"36/h", ratelimit.Rate{PerSecond: 0.01, Burst: 1}, false},
		{"5/s,burst=50", ratelimit.Rate{PerSecond: 5, Burst: 50}, false},
		{"5/d", ratelimit.Rate{}, true},
		{"x/s", ratelimit.Rate{}, true},
		{"-1/s", ratelimit.Rate{}, true},
		{"5/s,burst=0", ratelimit.Rate{}, true},
		{"5/s,bust=3", ratelimit.Rate{}, true},
	}
	for _, tc := range cases {
		got, err := ratelimit.ParseRate(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.bad)
		}
	}
	for in, want := range map[string]string{"off": "off", "50/s,burst=200": "50/s,burst=200", "1/m,burst=3": "1/m,burst=3",
		"30/m": "30/m,burst=1", "36/h": "36/h,burst=1", "2.5/s": "2.5/s,burst=5"} {
		r, err := ratelimit.ParseRate(in)
		if err != nil || r.String() != want {
			t.Errorf("ParseRate(%q).String() = %q (%v), want %q", in, r.String(), err, want)
			continue
		}
		if back, err := ratelimit.ParseRate(r.String()); err != nil || back != r {
			t.Errorf("%q does not read back: %+v %v", r.String(), back, err)
		}
	}
}

func TestBucketsRefuseBeyondBurstAndRefill(t *testing.T) {
	t.Parallel()
	b := ratelimit.NewBuckets(ratelimit.Rate{PerSecond: 10, Burst: 3})
	now := time.Unix(1000, 0)
	for i := range 3 {
		if ok, _ := b.Take("alice", now); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	ok, retry := b.Take("alice", now)
	if ok || retry != 100*time.Millisecond {
		t.Fatalf("beyond the burst: ok=%v retry=%v, want refused with 100ms", ok, retry)
	}
	// A refusal spends nothing: the retry it named is enough.
	if ok, retry := b.Take("alice", now.Add(50*time.Millisecond)); ok || retry != 50*time.Millisecond {
		t.Fatalf("halfway: ok=%v retry=%v, want refused with 50ms", ok, retry)
	}
	if ok, _ := b.Take("alice", now.Add(100*time.Millisecond)); !ok {
		t.Fatal("refused after the retry it named")
	}
	// Another key has its own bucket.
	if ok, _ := b.Take("bob", now); !ok {
		t.Fatal("bob refused for alice's requests")
	}
	// Refill never exceeds the burst.
	later := now.Add(time.Hour)
	for i := range 3 {
		if ok, _ := b.Take("alice", later); !ok {
			t.Fatalf("request %d after an hour refused", i+1)
		}
	}
	if ok, _ := b.Take("alice", later); ok {
		t.Fatal("an idle hour banked more than the burst")
	}
}

func TestBucketsSweepIdleAndOff(t *testing.T) {
	t.Parallel()
	b := ratelimit.NewBuckets(ratelimit.Rate{PerSecond: 1, Burst: 2})
	now := time.Unix(1000, 0)
	b.Take("a", now)
	b.Take("b", now)
	if b.Len() != 2 {
		t.Fatalf("Len = %d, want 2", b.Len())
	}
	b.Take("c", now.Add(2*time.Minute))
	if b.Len() != 1 {
		t.Fatalf("Len after idle sweep = %d, want 1 (a and b were full again)", b.Len())
	}
	off := ratelimit.NewBuckets(ratelimit.Rate{})
	for range 1000 {
		if ok, _ := off.Take("a", now); !ok {
			t.Fatal("an off rate refused")
		}
	}
}
