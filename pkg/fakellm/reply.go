package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// stopKind is a stop reason independent of any provider's vocabulary.
type stopKind int

const (
	stopDefault stopKind = iota
	stopEnd
	stopLength
	stopSequence
	stopTool
)

func stopReason(e Response) stopKind {
	k := knownStopReasons[e.StopReason]
	if k != stopDefault {
		return k
	}
	if len(e.ToolCalls) > 0 {
		return stopTool
	}
	return stopEnd
}

func (k stopKind) anthropic() string {
	return [...]string{"end_turn", "end_turn", "max_tokens", "stop_sequence", "tool_use"}[k]
}

func (k stopKind) openAI() string {
	return [...]string{"stop", "stop", "length", "stop", "tool_calls"}[k]
}

// gemini: Gemini reports STOP for function calls and stop sequences alike.
func (k stopKind) gemini() string {
	return [...]string{"STOP", "STOP", "MAX_TOKENS", "STOP", "STOP"}[k]
}

// toolInput is a scripted call's input, {} when the script gave none.
func toolInput(tc ToolCall) json.RawMessage {
	if len(tc.Input) == 0 {
		return json.RawMessage("{}")
	}
	return tc.Input
}

// canonical is a unit's identity for prefix hashing: its scope and its JSON with every
// cache_control removed and keys sorted, so formatting and moved breakpoints do not count.
func canonical(scope string, raw json.RawMessage) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	b, err := json.Marshal(stripCacheControl(v))
	if err != nil {
		return nil, err
	}
	return append([]byte(scope+"\x00"), b...), nil
}

func stripCacheControl(v any) any {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "cache_control")
		for k, e := range x {
			x[k] = stripCacheControl(e)
		}
	case []any:
		for i, e := range x {
			x[i] = stripCacheControl(e)
		}
	}
	return v
}

// reply finishes a chat or embedding request once its entry is chosen: a script failure,
// the scripted latency, then the scripted error, raw body, or the answer build makes from
// the entry with its faults applied (build fills in the output tokens). The record is
// completed before the answer is written, so a client that reads the record right after its
// answer sees it.
func (s *Server) reply(w http.ResponseWriter, r *http.Request, rec *Recorded, model string, d dialect,
	e Response, failure *scriptFailure, t tokens, build func(Response, *tokens) any) {
	if s.replyFailure(w, r, rec, model, d, e, failure, t) {
		return
	}
	switch {
	case e.Raw != "":
		t.output = outputTokens(e.Raw, e.OutputTokens)
		s.finish(rec, model, http.StatusOK, t)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(e.Raw))
	default:
		answer := build(e.withFaults(), &t)
		s.finish(rec, model, http.StatusOK, t)
		writeJSON(w, http.StatusOK, answer)
	}
}

// replyFailure answers a script failure, waits the scripted latency, and answers the
// scripted error; it reports whether the request is done with (answered, or cancelled
// during the latency).
func (s *Server) replyFailure(w http.ResponseWriter, r *http.Request, rec *Recorded, model string, d dialect,
	e Response, failure *scriptFailure, t tokens) bool {
	if failure != nil {
		s.finish(rec, model, http.StatusInternalServerError, tokens{})
		writeError(w, d, apiError{status: http.StatusInternalServerError, message: failure.message, noRetry: true})
		return true
	}
	if !wait(r, e.Latency) {
		s.finish(rec, model, statusCancelled, t)
		return true
	}
	if e.Error != nil {
		ae := scripted(e.Error)
		s.finish(rec, model, ae.status, t)
		writeError(w, d, ae)
		return true
	}
	return false
}

// capturePrefix starts a tool call input's string value that is taken from the request: see
// ToolCall.
const capturePrefix = "$capture:"

// captured is e with its tool calls' "$capture:<regexp>" values replaced from text, the
// request's text; a regexp that does not match is a script failure.
func (e Response) captured(text string) (Response, *scriptFailure) {
	if !strings.Contains(toolInputs(e.ToolCalls), capturePrefix) {
		return e, nil
	}
	calls := make([]ToolCall, len(e.ToolCalls))
	for i, tc := range e.ToolCalls {
		calls[i] = tc
		if !strings.Contains(string(tc.Input), capturePrefix) {
			continue
		}
		var in map[string]any
		if err := json.Unmarshal(tc.Input, &in); err != nil {
			return e, &scriptFailure{"fakellm: tool call input: " + err.Error()}
		}
		for k, v := range in {
			pat, ok := v.(string)
			if !ok || !strings.HasPrefix(pat, capturePrefix) {
				continue
			}
			re, err := regexp.Compile(strings.TrimPrefix(pat, capturePrefix))
			if err != nil {
				return e, &scriptFailure{fmt.Sprintf("fakellm: tool call %s input %q: %v", tc.Name, k, err)}
			}
			all := re.FindAllStringSubmatch(text, -1)
			if len(all) == 0 {
				return e, &scriptFailure{fmt.Sprintf("fakellm: tool call %s input %q: %s matches nothing in the request", tc.Name, k, re)}
			}
			last := all[len(all)-1]
			in[k] = last[len(last)-1]
		}
		b, err := json.Marshal(in)
		if err != nil {
			return e, &scriptFailure{"fakellm: tool call input: " + err.Error()}
		}
		calls[i].Input = b
	}
	e.ToolCalls = calls
	return e, nil
}

func toolInputs(calls []ToolCall) string {
	var b strings.Builder
	for _, tc := range calls {
		b.Write(tc.Input)
	}
	return b.String()
}
