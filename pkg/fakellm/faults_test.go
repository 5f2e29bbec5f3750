package fakellm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// lines joins its arguments with newlines, so multi-line texts read line by line.
func lines(ls ...string) string { return strings.Join(ls, "\n") }

// TestFaults serves each fault through the Anthropic endpoint and checks the text exactly,
// the stop reason, and that output tokens are estimated from the text as sent.
func TestFaults(t *testing.T) {
	t.Parallel()
	// The lines of a block long enough to elide: 9 lines drop lines 3, 4 and 5.
	goBlock := lines(
		"```go",
		"func main() {",
		"\ta := 1",
		"\tb := 2",
		"\tc := 3",
		"\td := 4",
		"\te := 5",
		"\tf := 6",
		"\tfmt.Println(a, b, c, d, e, f)",
		"}",
		"```",
	)
	cases := []struct {
		name     string
		entry    Response
		want     string
		wantStop string
	}{{
		name: "json_raw_control: escapes in string literals become what a model writes",
		entry: Response{Faults: []string{"json_raw_control"},
			Text: `Sure: {"path": "a.go", "code": "func f() {\n\treturn \"x\"\n}", "re": "^\\d+\\.go$",` +
				` "keep": ["c\\nd", {"win": "C:\\\\tmp\\Users", "u": "\u00e9\/"}]} -- prose "stays\n" {broken`},
		want: `Sure: {"path": "a.go", "code": "func f() {` + "\n\t" + `return \"x\"` + "\n" + `}", "re": "^\d+\.go$",` +
			` "keep": ["c\\nd", {"win": "C:\\\\tmp\Users", "u": "\u00e9\/"}]} -- prose "stays\n" {broken`,
		wantStop: "end_turn",
	}, {
		name:     "json_raw_control: JSON without such escapes is unchanged",
		entry:    Response{Faults: []string{"json_raw_control"}, Text: `{"a": "b\\nc", "n": [1, 2], "q": "\"\r\u0041"}`},
		want:     `{"a": "b\\nc", "n": [1, 2], "q": "\"\r\u0041"}`,
		wantStop: "end_turn",
	}, {
		name:     "json_in_fence",
		entry:    Response{Faults: []string{"json_in_fence"}, Text: `{"steps": []}`},
		want:     "Here is the answer:\n\n```json\n{\"steps\": []}\n```\n\nLet me know if you need anything else.",
		wantStop: "end_turn",
	}, {
		name:  "elide: the middle third of the first fence, // for Go",
		entry: Response{Faults: []string{"elide"}, Text: lines("Here:", goBlock, "", "```go", "x", "```")},
		want: lines(
			"Here:",
			"```go",
			"func main() {",
			"\ta := 1",
			"\tb := 2",
			"\t// ... existing code ...",
			"\tf := 6",
			"\tfmt.Println(a, b, c, d, e, f)",
			"}",
			"```",
			"",
			"```go",
			"x",
			"```",
		),
		wantStop: "end_turn",
	}, {
		name: "elide: # for python, indent of the first removed line",
		entry: Response{Faults: []string{"elide"}, Text: lines(
			"```python",
			"def f():",
			"    a = 1",
			"    if a:",
			"        b = 2",
			"        c = 3",
			"        d = 4",
			"        e = 5",
			"    g = 7",
			"    h = 8",
			"    i = 9",
			"    return a",
			"```",
		)},
		// 11 lines: lines 3 up to 7 go.
		want: lines(
			"```python",
			"def f():",
			"    a = 1",
			"    if a:",
			"        # ... existing code ...",
			"    g = 7",
			"    h = 8",
			"    i = 9",
			"    return a",
			"```",
		),
		wantStop: "end_turn",
	}, {
		name:     "elide: no fence, the whole text; the final newline is not a line",
		entry:    Response{Faults: []string{"elide"}, Text: "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"},
		want:     "1\n2\n3\n4\n// ... existing code ...\n9\n10\n11\n12\n",
		wantStop: "end_turn",
	}, {
		name:     "elide: a block under 9 lines is kept",
		entry:    Response{Faults: []string{"elide"}, Text: "```sh\n1\n2\n3\n4\n5\n6\n7\n8\n```"},
		want:     "```sh\n1\n2\n3\n4\n5\n6\n7\n8\n```",
		wantStop: "end_turn",
	}, {
		name: "search_whitespace_drift: SEARCH lines re-indented with trailing spaces, REPLACE kept",
		entry: Response{Faults: []string{"search_whitespace_drift"}, Text: lines(
			"a.go",
			"```go",
			"<<<<<<< SEARCH",
			"func f() {",
			"\treturn 1",
			" \t\tx()",
			"",
			"=======",
			"func f() {",
			"\treturn 2",
			">>>>>>> REPLACE",
			"```",
			"\tnot in a block",
		)},
		want: lines(
			"a.go",
			"```go",
			"<<<<<<< SEARCH",
			"func f() {  ",
			"    return 1  ",
			"         x()  ",
			"  ",
			"=======",
			"func f() {",
			"\treturn 2",
			">>>>>>> REPLACE",
			"```",
			"\tnot in a block",
		),
		wantStop: "end_turn",
	}, {
		name:     "truncate: at half, moved back to a character boundary",
		entry:    Response{Faults: []string{"truncate"}, Text: "ab€€"}, // 8 bytes; byte 4 is inside the first €
		want:     "ab",
		wantStop: "max_tokens",
	}, {
		name:     "truncate: at half of an ASCII text",
		entry:    Response{Faults: []string{"truncate"}, Text: `{"steps": ["one", "two"]}`},
		want:     `{"steps": ["`, // 25 bytes: cut at 12, inside a string
		wantStop: "max_tokens",
	}, {
		name:     "truncate_at",
		entry:    Response{Faults: []string{"truncate"}, TruncateAt: 5, Text: "hello, world"},
		want:     "hello",
		wantStop: "max_tokens",
	}, {
		name:     "truncate_at beyond the end cuts nothing, still max_tokens",
		entry:    Response{Faults: []string{"truncate"}, TruncateAt: 100, Text: "short"},
		want:     "short",
		wantStop: "max_tokens",
	}, {
		name:     "truncate keeps an explicit stop reason",
		entry:    Response{Faults: []string{"truncate"}, StopReason: "stop_sequence", Text: "abcdef"},
		want:     "abc",
		wantStop: "stop_sequence",
	}, {
		name:  "composed in order: json_raw_control, then json_in_fence",
		entry: Response{Faults: []string{"json_raw_control", "json_in_fence"}, Text: `{"code": "a\n\tb"}`},
		want: "Here is the answer:\n\n```json\n" + `{"code": "a` + "\n\tb" + `"}` +
			"\n```\n\nLet me know if you need anything else.",
		wantStop: "end_turn",
	}, {
		name:     "composed in order: json_in_fence, then truncate cuts the fence",
		entry:    Response{Faults: []string{"json_in_fence", "truncate"}, TruncateAt: 30, Text: `{"a": 1}`},
		want:     "Here is the answer:\n\n```json\n{",
		wantStop: "max_tokens",
	}, {
		name:     "composed in order: truncate, then json_in_fence wraps the cut text",
		entry:    Response{Faults: []string{"truncate", "json_in_fence"}, TruncateAt: 3, Text: `{"a": 1}`},
		want:     "Here is the answer:\n\n```json\n{\"a\n```\n\nLet me know if you need anything else.",
		wantStop: "max_tokens",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, url := Start(t, &Script{Anthropic: []Response{c.entry}})
			a := post(t, url, "/v1/messages", `{"model":"m","max_tokens":100,"stop_sequences":["END"],"messages":[{"role":"user","content":"x"}]}`)
			if a.status != 200 {
				t.Fatalf("status = %d: %s", a.status, a.raw)
			}
			if diff := cmp.Diff(c.want, str(t, a.body, "content", 0, "text")); diff != "" {
				t.Errorf("text (-want +got):\n%s", diff)
			}
			if got := str(t, a.body, "stop_reason"); got != c.wantStop {
				t.Errorf("stop_reason = %q, want %q", got, c.wantStop)
			}
			wantTokens := max(estimateTokens(len(c.want)), 1)
			if got := num(t, a.body, "usage", "output_tokens"); got != wantTokens {
				t.Errorf("output_tokens = %d, want %d (estimated from the text as sent)", got, wantTokens)
			}
			if recs := srv.Requests(); len(recs) != 1 || recs[0].OutputTokens != wantTokens {
				t.Errorf("record = %+v", recs)
			}
		})
	}
}

// TestTruncateStopReason checks that a truncated answer reports running out of tokens in
// each endpoint's vocabulary, and that the script entry itself is not changed by serving.
func TestTruncateStopReason(t *testing.T) {
	t.Parallel()
	entry := []Response{{Text: "0123456789", Faults: []string{"truncate"}, RepeatLast: true}}
	cases := []struct {
		name, path, body string
		text, stop       []any // paths to the answer's text and stop reason
		want             string
	}{{
		name: "anthropic", path: "/v1/messages",
		body: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`,
		text: []any{"content", 0, "text"}, stop: []any{"stop_reason"}, want: "max_tokens",
	}, {
		name: "openai", path: "/v1/chat/completions",
		body: `{"model":"m","messages":[{"role":"user","content":"x"}]}`,
		text: []any{"choices", 0, "message", "content"}, stop: []any{"choices", 0, "finish_reason"}, want: "length",
	}, {
		name: "gemini", path: "/v1beta/models/m:generateContent",
		body: `{"contents":[{"role":"user","parts":[{"text":"x"}]}]}`,
		text: []any{"candidates", 0, "content", "parts", 0, "text"}, stop: []any{"candidates", 0, "finishReason"}, want: "MAX_TOKENS",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, url := Start(t, &Script{Anthropic: entry, OpenAI: entry, Gemini: entry})
			for range 2 { // served twice: the second answer is cut from the original text again
				a := post(t, url, c.path, c.body)
				if a.status != 200 {
					t.Fatalf("status = %d: %s", a.status, a.raw)
				}
				if got := str(t, a.body, c.text...); got != "01234" {
					t.Errorf("text = %q, want %q", got, "01234")
				}
				if got := str(t, a.body, c.stop...); got != c.want {
					t.Errorf("stop reason = %q, want %q", got, c.want)
				}
			}
		})
	}
}

// TestJSONRawControlBreaksJSON checks that the fault does what it is for: valid JSON comes
// out as JSON that encoding/json refuses.
func TestJSONRawControlBreaksJSON(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, json string }{
		{"newline", `{"content": "line one\nline two"}`},
		{"tab", `{"content": "\tindented"}`},
		{"regexp backslash", `{"pattern": "^\\d+$"}`},
		{"windows path", `{"path": "C:\\Users\\me"}`},
		{"nested in an array", `{"files": [{"path": "a.go", "content": "package a\n"}]}`},
		{"code with quotes", `{"code": "fmt.Println(\"hi\")\n"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var v any
			if err := json.Unmarshal([]byte(c.json), &v); err != nil {
				t.Fatalf("the original must be valid JSON: %v", err)
			}
			broken := jsonRawControl(c.json)
			if err := json.Unmarshal([]byte(broken), &v); err == nil {
				t.Errorf("encoding/json accepted %q", broken)
			}
		})
	}
}

// TestParseScriptFaults checks that faults are read from a script and that a bad fault is
// refused when the script is parsed, named by its path.
func TestParseScriptFaults(t *testing.T) {
	t.Parallel()
	got, err := ParseScript([]byte(`{"openai":[{"text":"{}","faults":["json_in_fence","truncate"],"truncate_at":4}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Script{OpenAI: []Response{{Text: "{}", Faults: []string{"json_in_fence", "truncate"}, TruncateAt: 4}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("script (-want +got):\n%s", diff)
	}

	bad := []struct{ name, script, want string }{
		{"unknown fault", `{"anthropic":[{"text":"a"},{"text":"b"},{"text":"c","faults":["x"]}]}`,
			`anthropic[2].faults[0]: unknown fault "x"`},
		{"unknown fault after a known one", `{"gemini":[{"text":"a","faults":["elide","Truncate"]}]}`,
			`gemini[0].faults[1]: unknown fault "Truncate"`},
		{"faults without text", `{"openai":[{"tool_calls":[{"name":"f"}],"faults":["truncate"]}]}`,
			"openai[0].faults: apply to text only"},
		{"faults on raw", `{"anthropic":[{"raw":"{}","faults":["json_raw_control"]}]}`,
			"anthropic[0].faults: apply to text only"},
		{"faults on an error", `{"anthropic":[{"error":{"status":500},"faults":["truncate"]}]}`,
			"anthropic[0].faults: apply to text only"},
		{"faults on embeddings", `{"embeddings":[{"faults":["truncate"]}]}`,
			"embeddings[0].faults: apply to text only"},
		{"truncate_at without truncate", `{"anthropic":[{"text":"a","truncate_at":3}]}`,
			`anthropic[0].truncate_at: needs the "truncate" fault`},
		{"negative truncate_at", `{"anthropic":[{"text":"a","faults":["truncate"],"truncate_at":-1}]}`,
			"anthropic[0].truncate_at: must not be negative"},
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
