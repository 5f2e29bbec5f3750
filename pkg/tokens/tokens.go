// Package tokens counts tokens the way the models see them, for budgets: how much of a
// repository fits a prompt, how long a skill may be.
//
// The encoding is cl100k_base, built from the rank file embedded in
// github.com/pkoukk/tiktoken-go-loader, so nothing is downloaded at run time (the default
// tiktoken-go loader fetches the rank file over HTTPS, and the services may have no
// internet). The encoder is built on first use, once; Count is safe for concurrent use.
//
// The encoder is built here from its parts (ranks, special tokens, split pattern) rather
// than through tiktoken.SetBpeLoader + tiktoken.GetEncoding: SetBpeLoader replaces a
// package-level variable of tiktoken-go without synchronisation, which would be shared
// mutable state between every user of that library in the process.
//
// Should the encoder fail to build (a corrupt embedded asset: it should not happen), Count
// falls back to an estimate of one token per four bytes, rounded up, and Exact reports
// false, so a caller can say its figures are estimates.
package tokens

import (
	"sync"

	tiktoken "github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// encodingName is the encoding Count uses.
const encodingName = tiktoken.MODEL_CL100K_BASE

// cl100kPattern is the pre-tokenisation split pattern of cl100k_base, as tiktoken-go
// v0.1.8 (encoding.go, cl100k_base) and OpenAI's tiktoken define it. The known counts in
// the tests pin it.
const cl100kPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// cl100kSpecial are the special tokens of cl100k_base. EncodeOrdinary treats their text as
// ordinary text, which is what a budget wants: a file that contains "<|endoftext|>" is sent
// as text.
var cl100kSpecial = map[string]int{
	tiktoken.ENDOFTEXT:   100257,
	tiktoken.FIM_PREFIX:  100258,
	tiktoken.FIM_MIDDLE:  100259,
	tiktoken.FIM_SUFFIX:  100260,
	tiktoken.ENDOFPROMPT: 100276,
}

var (
	once    sync.Once
	encoder *tiktoken.Tiktoken // nil when building it failed
	initErr error
)

func load() {
	once.Do(func() {
		encoder, initErr = build()
	})
}

func build() (*tiktoken.Tiktoken, error) {
	ranks, err := tiktokenloader.NewOfflineLoader().LoadTiktokenBpe("cl100k_base.tiktoken")
	if err != nil {
		return nil, err
	}
	bpe, err := tiktoken.NewCoreBPE(ranks, cl100kSpecial, cl100kPattern)
	if err != nil {
		return nil, err
	}
	special := make(map[string]any, len(cl100kSpecial))
	for k := range cl100kSpecial {
		special[k] = true
	}
	enc := &tiktoken.Encoding{
		Name:           encodingName,
		PatStr:         cl100kPattern,
		MergeableRanks: ranks,
		SpecialTokens:  cl100kSpecial,
	}
	return tiktoken.NewTiktoken(bpe, enc, special), nil
}

// Count returns the number of tokens of s in cl100k_base (an estimate when Exact is false).
// The first call builds the encoder (a few hundred milliseconds); later calls do not.
func Count(s string) int {
	if s == "" {
		return 0
	}
	load()
	if encoder == nil {
		return Estimate(s)
	}
	return len(encoder.EncodeOrdinary(s))
}

// Estimate is the fallback count: one token per four bytes, rounded up. It is cheap and
// usually within a factor of 1.5 of the real count for source code and English.
func Estimate(s string) int {
	return (len(s) + 3) / 4
}

// Name returns the name of the encoding Count uses.
func Name() string {
	return encodingName
}

// Exact reports whether Count uses the real encoder (true) or the estimate (false). It
// builds the encoder if that has not happened yet.
func Exact() bool {
	load()
	return encoder != nil
}

// Err returns why the encoder could not be built, or nil when Exact is true.
func Err() error {
	load()
	return initErr
}
