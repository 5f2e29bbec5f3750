package registry

import (
	"math"
	"math/bits"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
)

// Cost is a price in micro-dollars, in total and by kind of token.
type Cost struct {
	// Input is the input tokens neither read from nor written to the cache.
	Input      int64
	Output     int64
	CacheRead  int64
	CacheWrite int64
	// Total is the sum of the parts.
	Total int64
}

// Price prices tokens on m as EstimateCost and the usage ledger do: each part is its tokens
// × the model's price per million tokens / 1,000,000, rounded half up to a whole
// micro-dollar, and the total is the sum of the parts. in counts every input token, the
// cached ones included (as thefold.type.v1.Usage does), so the input part is in − cacheRead
// − cacheWrite, never negative. A cache price of 0 prices those tokens at the input price.
// Negative counts count as 0; a result beyond int64 saturates rather than wraps.
func Price(m *aiv1.Model, in, out, cacheRead, cacheWrite int64) Cost {
	in, out, cacheRead, cacheWrite = max(in, 0), max(out, 0), max(cacheRead, 0), max(cacheWrite, 0)
	inputPrice := m.GetInputMicrosPerMtok()
	readPrice, writePrice := m.GetCacheReadMicrosPerMtok(), m.GetCacheWriteMicrosPerMtok()
	if readPrice == 0 {
		readPrice = inputPrice
	}
	if writePrice == 0 {
		writePrice = inputPrice
	}
	c := Cost{
		Input:      micros(max(in-cacheRead-cacheWrite, 0), inputPrice),
		Output:     micros(out, m.GetOutputMicrosPerMtok()),
		CacheRead:  micros(cacheRead, readPrice),
		CacheWrite: micros(cacheWrite, writePrice),
	}
	c.Total = addSat(addSat(c.Input, c.Output), addSat(c.CacheRead, c.CacheWrite))
	return c
}

// micros is tokens × pricePerMtok / 1,000,000 rounded half up. The product is taken in 128
// bits: a trillion tokens at a high price overflows 64.
func micros(tokens, pricePerMtok int64) int64 {
	if tokens <= 0 || pricePerMtok <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(tokens), uint64(pricePerMtok))
	var carry uint64
	lo, carry = bits.Add64(lo, 500_000, 0)
	hi += carry
	if hi >= 1_000_000 { // the quotient would not fit in 64 bits
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, 1_000_000)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
