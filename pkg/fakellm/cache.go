package fakellm

import (
	"crypto/sha256"
	"encoding/hex"
)

// estimateTokens is fakellm's token count: a quarter of the bytes, rounded up. Real
// tokenizers differ; what matters to tests is that the count is stable and grows with text.
func estimateTokens(chars int) int { return (chars + 3) / 4 }

// outputTokens counts a reply's tokens: at least one, as providers never report zero.
func outputTokens(reply string, override int) int {
	if override > 0 {
		return override
	}
	return max(estimateTokens(len(reply)), 1)
}

// unit is one cacheable piece of a prompt in the order the provider caches it (a tool, a
// system block, a message content block, or a whole message): key identifies its content
// (without cache markers, so moving a breakpoint does not change a prefix), chars is the
// text it contributes to the token count.
type unit struct {
	key   []byte
	chars int
}

// prefixes returns, for each unit i, a hash of units[0..i] and the tokens of that prefix.
func prefixes(units []unit) (hashes []string, toks []int) {
	hashes, toks = make([]string, len(units)), make([]int, len(units))
	var prev [sha256.Size]byte
	chars := 0
	for i, u := range units {
		h := sha256.New()
		h.Write(prev[:])
		h.Write(u.key)
		copy(prev[:], h.Sum(nil))
		hashes[i] = hex.EncodeToString(prev[:])
		chars += u.chars
		toks[i] = estimateTokens(chars)
	}
	return hashes, toks
}

func totalTokens(units []unit) int {
	chars := 0
	for _, u := range units {
		chars += u.chars
	}
	return estimateTokens(chars)
}

// anthropicLookback is how many blocks before a breakpoint Anthropic checks for an earlier
// cache entry ("about 20 blocks"), which is what lets a conversation move its last
// breakpoint forward each turn and still read the previous turn's entry.
const anthropicLookback = 20

// anthropicCache does Anthropic's explicit prompt caching for one request and remembers
// what it writes; breakpoints are unit indexes carrying cache_control, ascending. The
// caller holds s.mu. The result's input counts the whole prompt.
func (s *Server) anthropicCache(model string, units []unit, breakpoints []int) tokens {
	hashes, toks := prefixes(units)
	t := tokens{input: totalTokens(units)}
	minTokens := s.minCacheTokens()
	key := func(i int) string { return familyAnthropic + "\x00" + model + "\x00" + hashes[i] }
	hit := -1
	for _, bp := range breakpoints {
		for j := bp; j >= 0 && j > bp-anthropicLookback; j-- {
			if _, ok := s.cache[key(j)]; ok {
				hit = max(hit, j)
				break
			}
		}
	}
	if hit >= 0 {
		t.cacheRead = toks[hit]
	}
	written := -1
	for _, bp := range breakpoints {
		if bp > hit && toks[bp] >= minTokens {
			s.cache[key(bp)] = struct{}{}
			written = bp
		}
	}
	if written >= 0 {
		t.cacheWrite = toks[written] - t.cacheRead
	}
	return t
}

// automaticCache does OpenAI's and Gemini's implicit caching: the longest prefix (at unit
// granularity) seen before in a request to the same model is read from the cache, and
// every prefix of this request is remembered. The caller holds s.mu.
func (s *Server) automaticCache(family, model string, units []unit) tokens {
	hashes, toks := prefixes(units)
	t := tokens{input: totalTokens(units)}
	minTokens := s.minCacheTokens()
	for i := range units {
		if toks[i] < minTokens {
			continue
		}
		k := family + "\x00" + model + "\x00" + hashes[i]
		if _, ok := s.cache[k]; ok {
			t.cacheRead = toks[i]
		}
		s.cache[k] = struct{}{}
	}
	return t
}

func (s *Server) minCacheTokens() int {
	if s.script == nil {
		return 1
	}
	return max(s.script.MinCacheTokens, 1)
}
