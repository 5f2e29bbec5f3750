package fakellm

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseScript(t *testing.T) {
	t.Parallel()
	const full = `{
	  "anthropic": [
	    {"match": "plan", "text": "{\"steps\":[]}", "times": 2},
	    {"error": {"status": 429, "type": "rate_limit_error", "message": "slow", "retry_after": 1.5}, "times": 2},
	    {"text": "done", "tool_calls": [{"name": "write_file", "input": {"path": "a.go"}}], "stop_reason": "tool_use",
	     "output_tokens": 7, "latency": "200ms", "chunk_size": 3, "chunk_delay": "5ms", "break_after": 1, "repeat_last": true}
	  ],
	  "openai": [{"raw": "{not json"}],
	  "embeddings": [{"latency": "1s"}],
	  "embedding_dimensions": 384,
	  "min_cache_tokens": 1024
	}`
	want := &Script{
		Anthropic: []Response{
			{Match: "plan", Text: `{"steps":[]}`, Times: 2},
			{Error: &Error{Status: 429, Type: "rate_limit_error", Message: "slow", RetryAfter: 1.5}, Times: 2},
			{Text: "done", ToolCalls: []ToolCall{{Name: "write_file", Input: json.RawMessage(`{"path": "a.go"}`)}},
				StopReason: "tool_use", OutputTokens: 7, Latency: Duration(200 * time.Millisecond),
				ChunkSize: 3, ChunkDelay: Duration(5 * time.Millisecond), BreakAfter: 1, RepeatLast: true},
		},
		OpenAI:              []Response{{Raw: "{not json"}},
		Embeddings:          []Response{{Latency: Duration(time.Second)}},
		EmbeddingDimensions: 384,
		MinCacheTokens:      1024,
	}
	got, err := ParseScript([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("script (-want +got):\n%s", diff)
	}

	bad := []struct{ name, script, want string }{
		{"unknown field", `{"anthropic":[{"txt":"x"}]}`, `unknown field "txt"`},
		{"not JSON", `{`, "fakellm script"},
		{"empty entry", `{"openai":[{}]}`, "openai[0]: one of text, tool_calls, raw or error is required"},
		{"text and raw", `{"gemini":[{"text":"a","raw":"b"}]}`, "exclude each other"},
		{"text and error", `{"gemini":[{"text":"a","error":{"status":500}}]}`, "exclude each other"},
		{"embedding text", `{"embeddings":[{"text":"a"}]}`, "embeddings[0]: embeddings entries take no text"},
		{"stop reason", `{"anthropic":[{"text":"a","stop_reason":"done"}]}`, `stop_reason: "done" is not one of`},
		{"tool without name", `{"anthropic":[{"tool_calls":[{"input":{}}]}]}`, "tool_calls[0].name"},
		{"tool input not an object", `{"anthropic":[{"tool_calls":[{"name":"x","input":[1]}]}]}`, "tool_calls[0].input"},
		{"negative times", `{"anthropic":[{"text":"a","times":-1}]}`, "times"},
		{"negative latency", `{"anthropic":[{"text":"a","latency":"-1s"}]}`, "latency"},
		{"latency not a duration", `{"anthropic":[{"text":"a","latency":"soon"}]}`, "soon"},
		{"latency a number", `{"anthropic":[{"text":"a","latency":200}]}`, "duration must be a string"},
		{"repeat_last not last", `{"anthropic":[{"text":"a","repeat_last":true},{"text":"b"}]}`, "anthropic[0].repeat_last"},
		{"repeat_last on a matched entry", `{"anthropic":[{"text":"b"},{"match":"x","text":"a","repeat_last":true}]}`, "anthropic[1].repeat_last"},
		{"error status", `{"openai":[{"error":{"status":200}}]}`, "error.status"},
		{"negative retry_after", `{"openai":[{"error":{"status":429,"retry_after":-1}}]}`, "retry_after"},
		{"dimensions", `{"embedding_dimensions":-1}`, "embedding_dimensions"},
		{"min cache", `{"min_cache_tokens":-1}`, "min_cache_tokens"},
		{"negative chunk_size", `{"anthropic":[{"text":"a","chunk_size":-1}]}`, "anthropic[0].chunk_size"},
		{"negative chunk_delay", `{"openai":[{"text":"a","chunk_delay":"-5ms"}]}`, "openai[0].chunk_delay"},
		{"negative break_after", `{"gemini":[{"text":"a","break_after":-1}]}`, "gemini[0].break_after"},
		{"break_after without text", `{"gemini":[{"tool_calls":[{"name":"x"}],"break_after":1}]}`, "gemini[0].break_after: counts text deltas"},
		{"streamed embeddings", `{"embeddings":[{"chunk_size":4}]}`, "embeddings[0]: embeddings entries are not streamed"},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseScript([]byte(b.script))
			if err == nil || !strings.Contains(err.Error(), b.want) {
				t.Errorf("err = %v, want one mentioning %q", err, b.want)
			}
		})
	}
}

func TestParseScriptCollectsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := ParseScript([]byte(`{"anthropic":[{}],"openai":[{"text":"a","times":-1}]}`))
	if err == nil || !strings.Contains(err.Error(), "anthropic[0]") || !strings.Contains(err.Error(), "openai[0].times") {
		t.Errorf("err = %v, want both problems", err)
	}
}

func TestLoadScript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"anthropic":[{"text":"hi"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := LoadScript(good)
	if err != nil || len(s.Anthropic) != 1 || s.Anthropic[0].Text != "hi" {
		t.Errorf("LoadScript = %+v, %v", s, err)
	}
	badPath := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(badPath, []byte(`{"anthropic":[{}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadScript(badPath); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("err = %v, want one naming the file", err)
	}
	if _, err := LoadScript(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing file should fail")
	}
}

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Response{Text: "a", Latency: Duration(1500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"latency":"1.5s"`) {
		t.Errorf("marshalled %s", b)
	}
	var r Response
	if err := json.Unmarshal(b, &r); err != nil || r.Latency != Duration(1500*time.Millisecond) {
		t.Errorf("round trip = %v, %v", r.Latency, err)
	}
}

// A matcher's prefilter (a literal every match of the expression contains) never changes
// what it matches: the same answers as the literal or the whole expression run over the
// text, for expressions with and without such a literal.
func TestMatcherPrefilterKeepsMatches(t *testing.T) {
	cases := []struct {
		pattern  string
		required []string
	}{
		{`# Mode: generate`, []string{"# Mode: generate"}},
		{`File to create: "?health_test\.go"?\n`, []string{"File to create: ", "health_test.go", "\n"}},
		{`(?s)plan.*for (bench|demo)/x\.go`, []string{"plan", "for ", "/x.go"}},
		{`(?i)mode: FIX`, nil},
		{`a|b`, nil},
		{`(?s)(?:# Job: review.*\[X-1\]|\[X-1\].*# Job: review)`, []string{"# Job: review", "[X-1]"}},
		{`(?s)(?:ab.*c|c.*b)`, []string{"c"}},
		{`(File: )[a-z]+\.go`, []string{"File: ", ".go"}},
		{`x{3}y`, []string{"xxx", "y"}},
		{`[unclosed`, nil},
	}
	texts := []string{"", "# Mode: generate\nFile to create: health_test.go\n", "File to create: \"health_test.go\"\n",
		"a plan\nwith steps for demo/x.go", "MODE: fix", "b", "# Job: review\n[X-1]", "[X-1] # Job: review", "[X-1]", "abc", "cb", "ac", "File: main.go", "File: Main.go", "xxxy", "xxy", "[unclosed"}
	var entries []Response
	for _, c := range cases {
		entries = append(entries, Response{Match: c.pattern}, Response{}) // and an entry without Match
	}
	set := newMatchSet(entries)
	for i, c := range cases {
		m := newMatcher(c.pattern)
		if !slices.Equal(m.required, c.required) {
			t.Errorf("%q: required %q, want %q", c.pattern, m.required, c.required)
		}
		re, err := regexp.Compile(c.pattern)
		for _, text := range texts {
			want := strings.Contains(text, c.pattern) || (err == nil && re.MatchString(text))
			if got := m.matches(text); got != want {
				t.Errorf("%q against %q: %v, want %v", c.pattern, text, got, want)
			}
			// The whole script's entries, matched against the text in one scan.
			if got := set.matches(2*i, text, set.scan(text)); got != want {
				t.Errorf("%q against %q in a match set: %v, want %v", c.pattern, text, got, want)
			}
		}
	}
}

// substrings finds exactly the patterns strings.Contains finds: random patterns over a
// small alphabet (so they overlap, nest and share suffixes), duplicates and "" included.
func TestSubstringsFindWhatContainsFinds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(alphabet string, max int) string {
		b := make([]byte, rng.IntN(max+1))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for round := range 300 {
		alphabet := "ab"
		if round%3 == 0 {
			alphabet = "abc\n\x00\xff"
		}
		pats := make([]string, 1+rng.IntN(40))
		for i := range pats {
			pats[i] = word(alphabet, 6)
		}
		pats = append(pats, pats[0]) // a duplicate
		subs := newSubstrings(pats)
		for range 10 {
			text := word(alphabet, 60)
			found := make([]bool, len(pats))
			subs.find(text, found)
			for i, p := range pats {
				if want := strings.Contains(text, p); found[i] != want {
					t.Fatalf("round %d: %q in %q: found %v, want %v (patterns %q)", round, p, text, found[i], want, pats)
				}
			}
		}
	}
}
