package fakellm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ask sends an Anthropic request with the given user text and returns the answer's text
// (or "<status>" for an error answer).
func ask(t *testing.T, url, text string) string {
	t.Helper()
	a := post(t, url, "/v1/messages", mustJSON(t, map[string]any{
		"model": "m", "max_tokens": 10, "system": "you are a test", "messages": []any{map[string]any{"role": "user", "content": text}},
	}))
	if a.status != 200 {
		return http.StatusText(a.status)
	}
	return str(t, a.body, "content", 0, "text")
}

func TestScriptSelection(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		entries []Response
		asks    []string // user texts, in order
		want    []string // answers ("Internal Server Error" = 500, "Too Many Requests" = 429)
	}{{
		name:    "ordered, then exhausted",
		entries: []Response{{Text: "one"}, {Text: "two"}},
		asks:    []string{"a", "b", "c"},
		want:    []string{"one", "two", "Internal Server Error"},
	}, {
		name:    "repeat_last",
		entries: []Response{{Text: "one"}, {Text: "again", RepeatLast: true}},
		asks:    []string{"a", "b", "c", "d"},
		want:    []string{"one", "again", "again", "again"},
	}, {
		name:    "times: 429 twice then success",
		entries: []Response{{Error: &Error{Status: 429}, Times: 2}, {Text: "ok"}},
		asks:    []string{"a", "a", "a", "a"},
		want:    []string{"Too Many Requests", "Too Many Requests", "ok", "Internal Server Error"},
	}, {
		name:    "matched entries first, without limit; ordered for the rest",
		entries: []Response{{Text: "first"}, {Match: "plan", Text: "a plan"}, {Text: "second"}},
		asks:    []string{"make a plan", "hello", "plan again", "hello", "hello"},
		want:    []string{"a plan", "first", "a plan", "second", "Internal Server Error"},
	}, {
		name:    "first match wins; a used-up matched entry falls through",
		entries: []Response{{Match: "x", Text: "x once", Times: 1}, {Match: "x", Text: "x always"}},
		asks:    []string{"x", "x", "x"},
		want:    []string{"x once", "x always", "x always"},
	}, {
		name:    "regular expression match, and the system prompt is matched too",
		entries: []Response{{Match: `(?i)^YOU are`, Text: "system matched"}},
		asks:    []string{"anything"},
		want:    []string{"system matched"},
	}, {
		name:    "a match that is not a regular expression is a substring",
		entries: []Response{{Match: "f(x", Text: "literal"}, {Text: "ordered"}},
		asks:    []string{"call f(x now", "no"},
		want:    []string{"literal", "ordered"},
	}, {
		name:    "no match and no ordered entries",
		entries: []Response{{Match: "zzz", Text: "never"}},
		asks:    []string{"hello"},
		want:    []string{"Internal Server Error"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, url := Start(t, &Script{Anthropic: c.entries})
			var got []string
			for _, q := range c.asks {
				got = append(got, ask(t, url, q))
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScriptFailures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		script *Script
		path   string
		body   string
		want   string
	}{
		{"no script", nil, "/v1/messages", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`, "fakellm: no script loaded"},
		{"no script, embeddings", nil, "/v1/embeddings", `{"model":"e","input":"x"}`, "fakellm: no script loaded"},
		{"invalid script", &Script{OpenAI: []Response{{}}}, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, "fakellm: invalid script: openai[0]"},
		{"exhausted openai", &Script{}, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, "fakellm: script exhausted for openai.chat_completions"},
		{"exhausted gemini", &Script{}, "/v1beta/models/g:generateContent", `{"contents":[{"parts":[{"text":"x"}]}]}`, "fakellm: script exhausted for gemini.generate_content"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := New(c.script)
			w := httptest.NewRecorder()
			req, _ := http.NewRequest(http.MethodPost, c.path, strings.NewReader(c.body))
			srv.ServeHTTP(w, req)
			if w.Code != 500 || !strings.Contains(w.Body.String(), c.want) {
				t.Errorf("%d %s, want 500 with %q", w.Code, w.Body.String(), c.want)
			}
			if w.Header().Get("X-Should-Retry") != "false" {
				t.Error("a script failure must tell SDKs not to retry")
			}
			if !strings.Contains(w.Header().Get("X-Fakellm"), "scripted") {
				t.Error("missing X-Fakellm header")
			}
		})
	}
}

func TestSetScriptRewindsAndKeepsRecord(t *testing.T) {
	t.Parallel()
	srv, url := Start(t, &Script{Anthropic: []Response{{Text: "old"}}})
	if got := ask(t, url, "a"); got != "old" {
		t.Fatalf("got %q", got)
	}
	script := &Script{Anthropic: []Response{{Text: "new"}}}
	srv.SetScript(script)
	script.Anthropic[0].Text = "mutated after SetScript"
	if got := ask(t, url, "a"); got != "new" {
		t.Errorf("after SetScript got %q, want new (the script is copied)", got)
	}
	srv.SetScript(script)
	if got := ask(t, url, "a"); got != "mutated after SetScript" {
		t.Errorf("SetScript should start from the first entry, got %q", got)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("record has %d requests, want 3", n)
	}
}

func TestLatencyHonoursCancellation(t *testing.T) {
	t.Parallel()
	d := Duration(0)
	if err := json.Unmarshal([]byte(`"1h"`), &d); err != nil {
		t.Fatal(err)
	}
	srv, url := Start(t, &Script{Anthropic: []Response{{Text: "too late", Latency: d}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/messages",
			strings.NewReader(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	waitFor(t, "the request to arrive", func() bool { return len(srv.Requests()) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("client error = %v, want context.Canceled", err)
	}
	waitFor(t, "the record to show the cancellation", func() bool { return srv.Requests()[0].Status == statusCancelled })
}

func TestRecordOverHTTP(t *testing.T) {
	t.Parallel()
	srv, url := Start(t, &Script{Anthropic: []Response{{Text: "ok", RepeatLast: true}}}, WithMaxRecords(2))
	ask(t, url, "first")
	ask(t, url, "second")
	post(t, url, "/v1/messages", `not json`)
	a := do(t, context.Background(), http.MethodGet, url+"/fakellm/requests", "")
	var recs []Recorded
	if err := json.Unmarshal([]byte(a.raw), &recs); err != nil {
		t.Fatalf("%v: %s", err, a.raw)
	}
	if len(recs) != 2 {
		t.Fatalf("kept %d records, want the newest 2", len(recs))
	}
	if !strings.Contains(string(recs[0].Body), `"second"`) || recs[0].Status != 200 || recs[0].Model != "m" || recs[0].OutputTokens != 1 {
		t.Errorf("record 0 = %+v", recs[0])
	}
	if string(recs[1].Body) != `"not json"` || recs[1].Status != 400 {
		t.Errorf("record 1 = %+v (a body that is not JSON is kept as a string)", recs[1])
	}
	if a := do(t, context.Background(), http.MethodDelete, url+"/fakellm/requests", ""); a.status != http.StatusNoContent {
		t.Errorf("DELETE: %d", a.status)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d records after DELETE", n)
	}
	h := do(t, context.Background(), http.MethodGet, url+"/healthz", "")
	if h.status != 200 || h.body["script_loaded"] != true {
		t.Errorf("healthz: %d %s", h.status, h.raw)
	}
	if nf := do(t, context.Background(), http.MethodGet, url+"/v1/models", ""); nf.status != 404 || !strings.Contains(nf.raw, "fakellm: no such endpoint") {
		t.Errorf("unknown path: %d %s", nf.status, nf.raw)
	}
}
