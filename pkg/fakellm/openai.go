package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

type openAIRequest struct {
	Model    string            `json:"model"`
	Messages []json.RawMessage `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
	Stream   bool              `json:"stream"`
	// StreamOptions.IncludeUsage asks a stream for a last chunk with the usage.
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Temperature *float64 `json:"temperature"`
	// ReasoningEffort is a reasoning model's effort; empty: the model's default.
	ReasoningEffort string `json:"reasoning_effort"`
}

// openAIEfforts are the reasoning_effort values the API takes.
var openAIEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

// reasons reports whether the model reasons before answering: a reasoning model does unless
// told reasoning_effort "none".
func (r *openAIRequest) reasons() bool { return r.ReasoningEffort != "none" }

// checkReasoning refuses an unknown reasoning_effort, and a temperature beside one (OpenAI's
// reasoning models take none but the default).
func (r *openAIRequest) checkReasoning() error {
	if r.ReasoningEffort == "" {
		return nil
	}
	if !slices.Contains(openAIEfforts, r.ReasoningEffort) {
		return fmt.Errorf("Invalid value: '%s'. Supported values are: '%s'.", r.ReasoningEffort, strings.Join(openAIEfforts, "', '"))
	}
	if r.reasons() && r.Temperature != nil && *r.Temperature != 1 {
		return fmt.Errorf("Unsupported value: 'temperature' does not support %v with this model. Only the default (1) value is supported.", *r.Temperature)
	}
	return nil
}

type openAIMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []struct {
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

var openAIRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

// parseOpenAI reads a chat request into cacheable units (the tools, then one per message,
// as OpenAI caches whole-prompt prefixes) and the text scripts match.
func parseOpenAI(body []byte) (*openAIRequest, []unit, string, error) {
	var req openAIRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, "", fmt.Errorf("We could not parse the JSON body of your request: %v", err)
	}
	switch {
	case req.Model == "":
		return nil, nil, "", fmt.Errorf("you must provide a model parameter")
	case len(req.Messages) == 0:
		return nil, nil, "", fmt.Errorf("'messages': must contain at least one message")
	}
	if err := req.checkReasoning(); err != nil {
		return nil, nil, "", err
	}
	var units []unit
	if len(req.Tools) > 0 {
		chars := 0
		for i, raw := range req.Tools {
			var t struct {
				Function struct {
					Name        string          `json:"name"`
					Description string          `json:"description"`
					Parameters  json.RawMessage `json:"parameters"`
				} `json:"function"`
			}
			if err := json.Unmarshal(raw, &t); err != nil {
				return nil, nil, "", fmt.Errorf("'tools.%d': %v", i, err)
			}
			chars += len(t.Function.Name) + len(t.Function.Description) + len(t.Function.Parameters)
		}
		raw, _ := json.Marshal(req.Tools)
		key, err := canonical("tools", raw)
		if err != nil {
			return nil, nil, "", err
		}
		units = append(units, unit{key: key, chars: chars})
	}
	var text []string
	for i, raw := range req.Messages {
		var m openAIMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, nil, "", fmt.Errorf("'messages.%d': %v", i, err)
		}
		if !openAIRoles[m.Role] {
			return nil, nil, "", fmt.Errorf("'messages.%d.role': %q is not one of system, developer, user, assistant, tool", i, m.Role)
		}
		parts, err := openAIContent(m.Content)
		if err != nil {
			return nil, nil, "", fmt.Errorf("'messages.%d.content': %v", i, err)
		}
		for _, tc := range m.ToolCalls {
			parts = append(parts, tc.Function.Name+tc.Function.Arguments)
		}
		msgText := strings.Join(parts, "\n")
		text = append(text, msgText)
		key, err := canonical("message", raw)
		if err != nil {
			return nil, nil, "", err
		}
		units = append(units, unit{key: key, chars: len(msgText)})
	}
	return &req, units, strings.Join(text, "\n"), nil
}

// openAIContent reads a message's content: a string, null, or a list of parts of which the
// text parts count.
func openAIContent(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, fmt.Errorf("must be a string or a list of content parts")
	}
	var out []string
	for _, p := range parts {
		if p.Type == "text" {
			out = append(out, p.Text)
		}
	}
	return out, nil
}

func (s *Server) openAIChat(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r, w)
	rec := s.begin(EndpointOpenAIChat, body)
	if err != nil {
		s.finish(rec, "", http.StatusRequestEntityTooLarge, tokens{})
		writeError(w, dialectOpenAI, apiError{status: http.StatusRequestEntityTooLarge, message: err.Error(), noRetry: true})
		return
	}
	req, units, text, err := parseOpenAI(body)
	if err != nil {
		s.finish(rec, "", http.StatusBadRequest, tokens{})
		writeError(w, dialectOpenAI, badRequest(err.Error()))
		return
	}
	s.mu.Lock()
	entry, failure := s.pick(familyOpenAI, EndpointOpenAIChat, text)
	var t tokens
	if failure == nil && entry.Error == nil {
		t = s.automaticCache(familyOpenAI, req.Model, units)
	}
	s.mu.Unlock()
	if req.Stream {
		s.streamed(rec)
		s.replyStream(w, r, rec, req.Model, dialectOpenAI, entry, failure, t,
			func(e Response, t *tokens) { t.output, _ = openAIOutput(req, e) },
			func(es *eventStream, e Response, t tokens) { s.openAIStream(es, req, e, t) })
		return
	}
	s.reply(w, r, rec, req.Model, dialectOpenAI, entry, failure, t, func(e Response, t *tokens) any {
		return s.openAIAnswer(req, e, t)
	})
}

// openAIOutput counts an answer's completion tokens, which include the reasoning tokens
// (also returned).
func openAIOutput(req *openAIRequest, e Response) (output, reasoning int) {
	if e.Thinking != "" && req.reasons() {
		reasoning = estimateTokens(len(e.Thinking))
	}
	return outputTokens(replyText(e), e.OutputTokens) + reasoning, reasoning
}

func (s *Server) openAIAnswer(req *openAIRequest, e Response, t *tokens) any {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if e.Thinking != "" && req.reasons() {
		msg["reasoning_content"] = e.Thinking
	}
	if e.Text != "" {
		msg["content"] = e.Text
	}
	if len(e.ToolCalls) > 0 {
		calls := make([]map[string]any, len(e.ToolCalls))
		for i, tc := range e.ToolCalls {
			calls[i] = map[string]any{
				"id": s.nextID("call"), "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": string(toolInput(tc))},
			}
		}
		msg["tool_calls"] = calls
	}
	var reasoning int
	t.output, reasoning = openAIOutput(req, e)
	return map[string]any{
		"id": s.nextID("chatcmpl"), "object": "chat.completion", "created": s.now().Unix(),
		"model": req.Model, "system_fingerprint": "fakellm-scripted",
		"choices": []map[string]any{{
			"index": 0, "message": msg, "finish_reason": stopReason(e).openAI(), "logprobs": nil,
		}},
		"usage": openAIUsage(*t, reasoning),
	}
}

func openAIUsage(t tokens, reasoning int) map[string]any {
	return map[string]any{
		"prompt_tokens":             t.input,
		"completion_tokens":         t.output,
		"total_tokens":              t.input + t.output,
		"prompt_tokens_details":     map[string]any{"cached_tokens": t.cacheRead, "audio_tokens": 0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": reasoning, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
	}
}

// openAIStream writes the answer as chat.completion.chunk events: the role, the reasoning,
// text and tool call deltas (a call's id, type and name first, then its arguments), a
// chunk with the finish_reason, the usage chunk when stream_options.include_usage asks for
// it, and [DONE].
func (s *Server) openAIStream(es *eventStream, req *openAIRequest, e Response, t tokens) {
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	id, created := s.nextID("chatcmpl"), s.now().Unix()
	chunk := func(choices []map[string]any) map[string]any {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created,
			"model": req.Model, "system_fingerprint": "fakellm-scripted", "choices": choices}
		if includeUsage {
			c["usage"] = nil // every chunk but the last has usage null
		}
		return c
	}
	choice := func(delta map[string]any, finish any) []map[string]any {
		return []map[string]any{{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}
	}
	es.event("", chunk(choice(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)))
	if e.Thinking != "" && req.reasons() {
		for _, c := range chunks(e.Thinking, e.ChunkSize) {
			es.delta("", chunk(choice(map[string]any{"reasoning_content": c}, nil)), false)
		}
	}
	pieces := chunks(e.Text, e.ChunkSize)
	for i, c := range pieces {
		es.delta("", chunk(choice(map[string]any{"content": c}, nil)), true)
		if es.breaking(i == len(pieces)-1) {
			es.abort()
		}
	}
	for i, tc := range e.ToolCalls {
		es.delta("", chunk(choice(map[string]any{"tool_calls": []map[string]any{{
			"index": i, "id": s.nextID("call"), "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""},
		}}}, nil)), false)
		// The arguments as the whole answer has them (a string: not re-encoded).
		for _, c := range chunks(string(toolInput(tc)), e.ChunkSize) {
			es.delta("", chunk(choice(map[string]any{"tool_calls": []map[string]any{{
				"index": i, "function": map[string]any{"arguments": c},
			}}}, nil)), false)
		}
	}
	es.event("", chunk(choice(map[string]any{}, stopReason(e).openAI())))
	if includeUsage {
		_, reasoning := openAIOutput(req, e)
		last := chunk([]map[string]any{})
		last["usage"] = openAIUsage(t, reasoning)
		es.event("", last)
	}
	es.write("", []byte("[DONE]"))
}
