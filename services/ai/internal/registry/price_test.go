package registry

import (
	"math"
	"testing"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
)

func TestPrice(t *testing.T) {
	t.Parallel()
	sonnet := &aiv1.Model{InputMicrosPerMtok: 3_000_000, OutputMicrosPerMtok: 15_000_000,
		CacheReadMicrosPerMtok: 300_000, CacheWriteMicrosPerMtok: 3_750_000}
	noCache := &aiv1.Model{InputMicrosPerMtok: 2_500_000, OutputMicrosPerMtok: 10_000_000}
	cheap := &aiv1.Model{InputMicrosPerMtok: 150_000, OutputMicrosPerMtok: 600_000, CacheReadMicrosPerMtok: 75_000}
	free := &aiv1.Model{}
	cases := []struct {
		name                string
		m                   *aiv1.Model
		in, out, read, writ int64
		want                Cost
	}{
		{"nothing", sonnet, 0, 0, 0, 0, Cost{}},
		{"a million of each", sonnet, 1_000_000, 1_000_000, 0, 0,
			Cost{Input: 3_000_000, Output: 15_000_000, Total: 18_000_000}},
		{"cache parts come out of input", sonnet, 10_000, 500, 6_000, 2_000,
			// input 2000 × 3 = 6000; output 500 × 15 = 7500; read 6000 × 0.3 = 1800; write 2000 × 3.75 = 7500
			Cost{Input: 6_000, Output: 7_500, CacheRead: 1_800, CacheWrite: 7_500, Total: 22_800}},
		{"cache price 0 is the input price", noCache, 1_000, 0, 400, 100,
			Cost{Input: 1_250, CacheRead: 1_000, CacheWrite: 250, Total: 2_500}},
		{"only the unset cache price falls back", cheap, 0, 0, 10, 10,
			// read 10 × 0.075 = 0.75 → 1; write 10 × 0.15 = 1.5 → 2
			Cost{CacheRead: 1, CacheWrite: 2, Total: 3}},
		{"half rounds up", cheap, 10, 0, 0, 0, Cost{Input: 2, Total: 2}},                                 // 1.5
		{"below half rounds down", cheap, 3, 0, 0, 0, Cost{Input: 0, Total: 0}},                          // 0.45
		{"fraction above half rounds up", cheap, 3333, 1, 0, 0, Cost{Input: 500, Output: 1, Total: 501}}, // 499.95, 0.6
		{"parts round on their own, then add up", cheap, 9, 0, 6, 0,
			// input 3 × 0.15 = 0.45 → 0; read 6 × 0.075 = 0.45 → 0: 0, not round(0.9) = 1
			Cost{Input: 0, CacheRead: 0, Total: 0}},
		{"cache over input: input part is 0", sonnet, 100, 0, 80, 80,
			Cost{Input: 0, CacheRead: 24, CacheWrite: 300, Total: 324}},
		{"negative counts are 0", sonnet, -5, -5, -5, -5, Cost{}},
		{"free model", free, 1_000_000, 1_000_000, 10, 10, Cost{}},
		{"a trillion tokens does not overflow", &aiv1.Model{InputMicrosPerMtok: 1_000_000_000_000}, 1 << 40, 0, 0, 0,
			Cost{Input: 1_099_511_627_776_000_000, Total: 1_099_511_627_776_000_000}},
		{"beyond int64 saturates", &aiv1.Model{InputMicrosPerMtok: math.MaxInt64, OutputMicrosPerMtok: math.MaxInt64}, math.MaxInt64, math.MaxInt64, 0, 0,
			Cost{Input: math.MaxInt64, Output: math.MaxInt64, Total: math.MaxInt64}},
		{"nil model is free", nil, 1000, 1000, 0, 0, Cost{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Price(tc.m, tc.in, tc.out, tc.read, tc.writ); got != tc.want {
				t.Errorf("Price = %+v, want %+v", got, tc.want)
			}
		})
	}
}
