// Package fakellm is an HTTP server that replays scripted answers in the wire formats of the
// Anthropic Messages, OpenAI Chat Completions and Embeddings, and Gemini generateContent and
// embedding APIs, whole or streamed as server-sent events (see Response), so the official
// SDKs run unchanged in tests and in the demo. It is not a
// language model: every answer comes from a script (or, for embeddings, from a hash of the
// text), every id says "fakellm", and a request the script does not cover is refused with an
// error instead of being answered. It also counts tokens and prompt-cache hits the way the
// providers report them, and records every request for inspection.
package fakellm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"time"
)

// Script says what the server answers, per endpoint family. Matched entries (Match set) are
// tried first, in order; then ordered entries are served one after another. A chat family
// whose ordered entries are used up answers 500 "fakellm: script exhausted for <endpoint>"
// unless its last entry has RepeatLast. Embeddings are computed from the text when the
// Embeddings list is empty; entries there inject errors, latency or raw bodies.
type Script struct {
	Anthropic  []Response `json:"anthropic,omitempty"`
	OpenAI     []Response `json:"openai,omitempty"`
	Gemini     []Response `json:"gemini,omitempty"`
	Embeddings []Response `json:"embeddings,omitempty"`
	// EmbeddingDimensions is the vector size when the request names none (default 1536).
	EmbeddingDimensions int `json:"embedding_dimensions,omitempty"`
	// MinCacheTokens is the smallest prefix (in tokens) that is cached; real providers use
	// 1024 or so. An empty prefix is never cached whatever the setting.
	MinCacheTokens int `json:"min_cache_tokens,omitempty"`
}

// Response is one scripted answer: Text and/or ToolCalls, or Raw, or Error.
//
// Thinking is what the model reasons before it answers (beside Text or ToolCalls). It is
// sent, before the answer, the way each API sends reasoning: an Anthropic "thinking" block
// (only when the request enabled thinking: the API sends none otherwise), OpenAI's
// "reasoning_content" on the message (as OpenAI-compatible servers such as vLLM and
// DeepSeek do; OpenAI itself sends only the count) unless reasoning_effort is "none", and a
// Gemini part with "thought": true when thinkingConfig.includeThoughts is set (and the
// thinking budget is not 0). Whenever the model thought (Anthropic: thinking enabled;
// OpenAI: reasoning_effort not "none"; Gemini: a budget other than 0, thoughts shown or
// not), its tokens, estimated from its length, are output tokens: in Anthropic's
// output_tokens, in OpenAI's completion_tokens and completion_tokens_details.reasoning_tokens,
// in Gemini's thoughtsTokenCount.
//
// Faults make Text arrive the way real models botch it, so a test can script the right
// answer and check that the client copes with how it is delivered. They apply to Text only
// (never to Raw, ToolCalls or Error; an entry with faults needs Text), in the order listed,
// before the answer is sent and its output tokens are estimated. Each is deterministic:
//
//   - "json_raw_control": inside every string literal of the JSON objects in Text (from a
//     "{" in the prose to its matching "}"), the escapes \t and \n become a raw tab and a raw
//     newline, and \\ before a character that is not a JSON escape becomes one backslash
//     (a regular expression's "\\d" arrives as "\d"), which encoding/json refuses. Text
//     outside string literals is left alone.
//   - "json_in_fence": Text is wrapped in prose and a fence:
//     "Here is the answer:\n\n```json\n" + Text + "\n```\n\nLet me know if you need anything else."
//   - "elide": in the first ``` fenced block (an unclosed one runs to the end; no fence: the
//     whole Text) of at least 9 lines, lines n/3 up to (not including) 2n/3 of its n lines
//     are replaced by one line "<indent>// ... existing code ...", indent being the first
//     removed line's leading whitespace; "#" instead of "//" when the fence's info string
//     is python, py, sh, yaml or toml (its first word, in any case).
//   - "search_whitespace_drift": in Aider SEARCH/REPLACE blocks (the lines "<<<<<<< SEARCH",
//     "=======", ">>>>>>> REPLACE", exactly), every SEARCH line's indentation has each tab
//     replaced by four spaces and the line gets two trailing spaces; REPLACE lines are
//     unchanged.
//   - "truncate": Text is cut at TruncateAt bytes, or at half its length when TruncateAt is
//     0, moved back to a UTF-8 character boundary; the stop reason becomes max_tokens
//     (Anthropic "max_tokens", OpenAI "length", Gemini "MAX_TOKENS") unless StopReason is
//     set. Tool calls are still sent.
//
// An unknown fault is refused when the script is validated.
//
// Streaming: a request that asks for a stream (Anthropic and OpenAI "stream": true, Gemini
// streamGenerateContent?alt=sse) gets the same answer as server-sent events in its API's
// format: Anthropic message_start (with the input usage), content_block_start, _delta
// (thinking_delta and signature_delta, text_delta, input_json_delta) and _stop per block,
// message_delta (stop reason, output_tokens) and message_stop; OpenAI chat.completion.chunk
// objects (role, reasoning_content, content and tool_calls deltas by index, the
// finish_reason, then a chunk without choices holding the usage when
// stream_options.include_usage is set) and "data: [DONE]"; Gemini one
// GenerateContentResponse per event, data lines only, the finishReason and the whole usage
// on the last. Text, thinking and each tool call's JSON input (compacted) are split into
// deltas of ChunkSize bytes (default DefaultChunkSize, 16), each cut moved back to a UTF-8
// character boundary; Gemini sends each function call whole, as the API does. Latency is
// waited before anything is sent and ChunkDelay before every delta after the first.
// BreakAfter n > 0 breaks the answer off after its n-th text delta (after the last, when
// there are fewer): Anthropic sends an overloaded_error event, OpenAI and Gemini drop the
// connection. Error is answered as without a stream, before any event, as the APIs refuse
// a request; Raw is sent verbatim as the event stream. Tokens are counted as for the whole
// answer, and the record notes Stream and FirstDeltaAt.
type Response struct {
	// Match makes the entry a matched one: it applies when the request's text (system and
	// messages; for embeddings the inputs) contains Match, or when Match is a regular
	// expression that matches the text. A matched entry with Times 0 applies every time.
	Match     string     `json:"match,omitempty"`
	Thinking  string     `json:"thinking,omitempty"`
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Raw is sent as the 200 body verbatim, to feed clients malformed or odd JSON.
	Raw string `json:"raw,omitempty"`
	// StopReason in any provider's vocabulary (end_turn, stop, STOP, max_tokens, length,
	// MAX_TOKENS, stop_sequence, tool_use, tool_calls); it is translated per endpoint. Empty:
	// tool_use when there are tool calls, end_turn otherwise.
	StopReason string `json:"stop_reason,omitempty"`
	// Faults are applied to Text in order before it is sent; see above.
	Faults []string `json:"faults,omitempty"`
	// TruncateAt is where the "truncate" fault cuts Text, in bytes (0: at half its length);
	// beyond the end it cuts nothing. It needs that fault.
	TruncateAt int `json:"truncate_at,omitempty"`
	// OutputTokens overrides the estimated output token count of the answer; Thinking's
	// tokens are added to it where they are sent.
	OutputTokens int    `json:"output_tokens,omitempty"`
	Error        *Error `json:"error,omitempty"`
	// Latency delays the answer; a request cancelled meanwhile gets none (recorded as 499).
	Latency Duration `json:"latency,omitempty"`
	// ChunkSize is the bytes per delta of a streamed answer (0: DefaultChunkSize).
	ChunkSize int `json:"chunk_size,omitempty"`
	// ChunkDelay is waited before each delta of a streamed answer after the first.
	ChunkDelay Duration `json:"chunk_delay,omitempty"`
	// BreakAfter breaks a streamed answer off after this many text deltas; it needs text.
	BreakAfter int `json:"break_after,omitempty"`
	// Times serves the entry this many times before moving on (0 means once for an ordered
	// entry, without limit for a matched one).
	Times int `json:"times,omitempty"`
	// RepeatLast, on the last ordered entry, serves it forever instead of running out.
	RepeatLast bool `json:"repeat_last,omitempty"`
}

// ToolCall is a tool the scripted model calls; Input is a JSON object ({} when empty). A
// string value of Input written "$capture:<regexp>" is taken from the request: it becomes
// the first group of the regexp's last match in the request's text (system and messages,
// tool results included), the whole match when the regexp has no group. A scripted model can
// so pass on an id an earlier tool call returned; a regexp that matches nothing fails the
// request as an exhausted script does.
type ToolCall struct {
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input,omitempty"`
}

// Error is a scripted failure, written in the endpoint's own error shape. Status 0 is
// derived from Type (rate_limit_error → 429, overloaded_error → 529, …; else 500); Type ""
// is derived from Status per endpoint. Type is written verbatim as Anthropic's error.type,
// OpenAI's type and code, and Gemini's status.
type Error struct {
	Status  int    `json:"status,omitempty"`
	Type    string `json:"type,omitempty"`
	Message string `json:"message,omitempty"`
	// RetryAfter in seconds sets the retry-after header (and retry-after-ms for OpenAI).
	RetryAfter float64 `json:"retry_after,omitempty"`
}

// Duration is a time.Duration written in JSON as a Go duration string ("200ms").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"200ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// LoadScript reads and checks a JSON script file.
func LoadScript(path string) (*Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ParseScript(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ParseScript decodes and checks a JSON script. Unknown fields are refused, so a misspelt
// key fails here instead of silently changing what is served.
func ParseScript(b []byte) (*Script, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("fakellm script: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

var knownStopReasons = map[string]stopKind{
	"": stopDefault, "end_turn": stopEnd, "stop": stopEnd, "STOP": stopEnd,
	"max_tokens": stopLength, "length": stopLength, "MAX_TOKENS": stopLength,
	"stop_sequence": stopSequence, "tool_use": stopTool, "tool_calls": stopTool,
}

// Validate reports every problem in the script, each named by its path in the script
// (anthropic[2].faults[0]: unknown fault "x").
func (s *Script) Validate() error {
	var problems []error
	if s.EmbeddingDimensions < 0 || s.EmbeddingDimensions > maxDimensions {
		problems = append(problems, fmt.Errorf("embedding_dimensions: must be between 1 and %d", maxDimensions))
	}
	if s.MinCacheTokens < 0 {
		problems = append(problems, errors.New("min_cache_tokens: must not be negative"))
	}
	for _, f := range []struct {
		name    string
		entries []Response
	}{{"anthropic", s.Anthropic}, {"openai", s.OpenAI}, {"gemini", s.Gemini}, {"embeddings", s.Embeddings}} {
		lastOrdered := -1
		for i, r := range f.entries {
			if r.Match == "" {
				lastOrdered = i
			}
		}
		for i, r := range f.entries {
			for _, p := range r.validate(f.name == "embeddings", i == lastOrdered) {
				path := fmt.Sprintf("%s[%d]", f.name, i)
				if p.field != "" {
					path += "." + p.field
				}
				problems = append(problems, fmt.Errorf("%s: %s", path, p.message))
			}
		}
	}
	return errors.Join(problems...)
}

// problem is what is wrong with a field of an entry ("" for the entry as a whole).
type problem struct{ field, message string }

func (r *Response) validate(embeddings, lastOrdered bool) []problem {
	var problems []problem
	add := func(field, format string, args ...any) {
		problems = append(problems, problem{field, fmt.Sprintf(format, args...)})
	}
	hasReply := r.Text != "" || len(r.ToolCalls) > 0
	kinds := 0
	for _, set := range []bool{hasReply, r.Raw != "", r.Error != nil} {
		if set {
			kinds++
		}
	}
	switch {
	case embeddings && hasReply:
		add("", "embeddings entries take no text or tool_calls (vectors are computed from the input)")
	case kinds > 1:
		add("", "text/tool_calls, raw and error exclude each other")
	case kinds == 0 && !embeddings:
		add("", "one of text, tool_calls, raw or error is required")
	}
	if r.Thinking != "" && !hasReply {
		add("thinking", "goes before an answer: needs text or tool_calls")
	}
	if _, ok := knownStopReasons[r.StopReason]; !ok {
		add("stop_reason", "%q is not one of end_turn, stop, max_tokens, length, stop_sequence, tool_use, tool_calls", r.StopReason)
	}
	for j, tc := range r.ToolCalls {
		if tc.Name == "" {
			add(fmt.Sprintf("tool_calls[%d].name", j), "required")
		}
		if len(tc.Input) > 0 {
			var obj map[string]any
			if err := json.Unmarshal(tc.Input, &obj); err != nil || obj == nil {
				add(fmt.Sprintf("tool_calls[%d].input", j), "must be a JSON object")
			}
		}
	}
	truncates := false
	for j, f := range r.Faults {
		if _, ok := faults[f]; !ok {
			add(fmt.Sprintf("faults[%d]", j), "unknown fault %q (known: %s)", f, strings.Join(faultNames(), ", "))
		}
		truncates = truncates || f == FaultTruncate
	}
	if len(r.Faults) > 0 && r.Text == "" {
		add("faults", "apply to text only, and this entry has none")
	}
	switch {
	case r.TruncateAt < 0:
		add("truncate_at", "must not be negative")
	case r.TruncateAt > 0 && !truncates:
		add("truncate_at", "needs the %q fault", FaultTruncate)
	}
	if r.OutputTokens < 0 {
		add("output_tokens", "must not be negative")
	}
	if r.Latency < 0 {
		add("latency", "must not be negative")
	}
	switch {
	case r.ChunkSize < 0:
		add("chunk_size", "must not be negative")
	case r.ChunkDelay < 0:
		add("chunk_delay", "must not be negative")
	case r.BreakAfter < 0:
		add("break_after", "must not be negative")
	case embeddings && (r.ChunkSize != 0 || r.ChunkDelay != 0 || r.BreakAfter != 0):
		add("", "embeddings entries are not streamed: chunk_size, chunk_delay and break_after do not apply")
	case r.BreakAfter > 0 && r.Text == "":
		add("break_after", "counts text deltas, and this entry has no text")
	}
	if r.Times < 0 {
		add("times", "must not be negative")
	}
	if r.RepeatLast && !lastOrdered {
		add("repeat_last", "only the last entry without match can repeat")
	}
	if e := r.Error; e != nil {
		if e.Status != 0 && (e.Status < 400 || e.Status > 599) {
			add("error.status", "must be between 400 and 599")
		}
		if e.RetryAfter < 0 {
			add("error.retry_after", "must not be negative")
		}
	}
	return problems
}

// matcher is a compiled Match: a literal substring, and the same string as a regular
// expression when it compiles, with substrings every match of the expression contains.
type matcher struct {
	literal string
	re      *regexp.Regexp
	// required are substrings every match of re contains: a text without one of them is
	// not matched, and the expression is not run over it. A script of many entries is
	// tried against every request, each expression over the whole prompt, and a prompt
	// holds tens of kilobytes (the plan, dependency files, outlines): running them all was
	// 25 ms of every request in the end-to-end suite's script, most of the builder
	// benchmark's wait on ai.
	required []string
}

// matchSet is a family's matchers (one per entry; the zero matcher for an entry without
// Match) with the substrings every one of them looks for, found in a prompt in one pass.
type matchSet struct {
	ms   []matcher
	subs *substrings
	// lit[i] is the id of ms[i].literal in subs, req[i] those of ms[i].required.
	lit []int
	req [][]int
}

func newMatchSet(entries []Response) *matchSet {
	set := &matchSet{ms: make([]matcher, len(entries)), lit: make([]int, len(entries)), req: make([][]int, len(entries))}
	ids := map[string]int{}
	var pats []string
	id := func(p string) int {
		if i, ok := ids[p]; ok {
			return i
		}
		ids[p] = len(pats)
		pats = append(pats, p)
		return ids[p]
	}
	for i, e := range entries {
		if e.Match == "" {
			continue
		}
		m := newMatcher(e.Match)
		set.ms[i], set.lit[i] = m, id(m.literal)
		for _, r := range m.required {
			set.req[i] = append(set.req[i], id(r))
		}
	}
	set.subs = newSubstrings(pats)
	return set
}

// scan is what matching entries against text needs: which of the set's substrings it has.
func (set *matchSet) scan(text string) []bool {
	found := make([]bool, set.subs.n)
	set.subs.find(text, found)
	return found
}

// matches is ms[i].matches(text), given found = scan(text).
func (set *matchSet) matches(i int, text string, found []bool) bool {
	m := set.ms[i]
	if found[set.lit[i]] {
		return true
	}
	if m.re == nil {
		return false
	}
	for _, r := range set.req[i] {
		if !found[r] {
			return false
		}
	}
	return m.re.MatchString(text)
}

func newMatcher(m string) matcher {
	re, err := regexp.Compile(m)
	if err != nil {
		return matcher{literal: m} // not a regular expression: only the literal applies
	}
	var required []string
	if tree, err := syntax.Parse(m, syntax.Perl); err == nil {
		required = requiredLiterals(tree.Simplify(), nil)
	}
	return matcher{literal: m, re: re, required: required}
}

func (m matcher) matches(text string) bool {
	if strings.Contains(text, m.literal) {
		return true
	}
	if m.re == nil {
		return false
	}
	for _, r := range m.required {
		if !strings.Contains(text, r) {
			return false
		}
	}
	return m.re.MatchString(text)
}

// requiredLiterals appends to out the case-sensitive literals every match of re contains:
// re itself when it is one, the runs of adjacent literals its top-level concatenation
// (through capturing groups and nested concatenations) is made of, and what every branch
// of an alternation requires.
func requiredLiterals(re *syntax.Regexp, out []string) []string {
	literal := func(r *syntax.Regexp) bool { return r.Op == syntax.OpLiteral && r.Flags&syntax.FoldCase == 0 }
	switch {
	case literal(re):
		return append(out, string(re.Rune))
	case re.Op == syntax.OpCapture:
		return requiredLiterals(re.Sub[0], out)
	case re.Op == syntax.OpConcat:
		run := ""
		for _, sub := range re.Sub {
			if literal(sub) {
				run += string(sub.Rune)
				continue
			}
			if run != "" {
				out, run = append(out, run), ""
			}
			out = requiredLiterals(sub, out)
		}
		if run != "" {
			out = append(out, run)
		}
	case re.Op == syntax.OpAlternate:
		// What every branch requires (both(a, b) is "a.*b|b.*a": a's and b's literals).
		common := requiredLiterals(re.Sub[0], nil)
		for _, sub := range re.Sub[1:] {
			branch := requiredLiterals(sub, nil)
			common = slices.DeleteFunc(common, func(l string) bool { return !slices.Contains(branch, l) })
		}
		out = append(out, common...)
	}
	return out
}
