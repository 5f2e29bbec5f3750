package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// anthropicMaxBreakpoints is Anthropic's limit on cache_control blocks per request.
const anthropicMaxBreakpoints = 4

type anthropicRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools      []json.RawMessage `json:"tools"`
	ToolChoice struct {
		Type string `json:"type"`
	} `json:"tool_choice"`
	StopSequences []string `json:"stop_sequences"`
	Stream        bool     `json:"stream"`
	Temperature   *float64 `json:"temperature"`
	// Thinking is extended thinking: {"type": "enabled", "budget_tokens": N}, "disabled" or
	// "adaptive".
	Thinking *struct {
		Type         string `json:"type"`
		BudgetTokens *int   `json:"budget_tokens"`
	} `json:"thinking"`
}

// anthropicMinThinkingBudget is the smallest budget_tokens the API takes.
const anthropicMinThinkingBudget = 1024

// thinks reports whether the request enabled thinking.
func (r *anthropicRequest) thinks() bool {
	return r.Thinking != nil && (r.Thinking.Type == "enabled" || r.Thinking.Type == "adaptive")
}

// checkThinking refuses what the API refuses about thinking: an unknown type, a budget
// under the minimum or not below max_tokens, and beside thinking a temperature other than 1
// or a tool choice that forces a tool.
func (r *anthropicRequest) checkThinking() error {
	if r.Thinking == nil {
		return nil
	}
	const docs = " Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
	switch r.Thinking.Type {
	case "enabled":
		switch b := r.Thinking.BudgetTokens; {
		case b == nil:
			return fmt.Errorf("thinking.enabled.budget_tokens: Field required")
		case *b < anthropicMinThinkingBudget:
			return fmt.Errorf("thinking.enabled.budget_tokens: Input should be greater than or equal to %d", anthropicMinThinkingBudget)
		case *b >= r.MaxTokens:
			return fmt.Errorf("`max_tokens` must be greater than `thinking.budget_tokens`." + docs)
		}
	case "adaptive", "disabled":
	default:
		return fmt.Errorf("thinking: Input tag '%s' found using 'type' does not match any of the expected tags: 'adaptive', 'disabled', 'enabled'", r.Thinking.Type)
	}
	if !r.thinks() {
		return nil
	}
	if r.Temperature != nil && *r.Temperature != 1 {
		return fmt.Errorf("`temperature` may only be set to 1 when thinking is enabled." + docs)
	}
	if t := r.ToolChoice.Type; t == "any" || t == "tool" {
		return fmt.Errorf("Thinking may not be enabled when tool_choice forces tool use.")
	}
	return nil
}

// anthropicBlock is the part of a content block fakellm reads.
type anthropicBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	Content      json.RawMessage `json:"content"`
	CacheControl json.RawMessage `json:"cache_control"`
}

// anthropicPrompt is a parsed request: its cacheable units in Anthropic's cache order
// (tools, system, messages), the breakpoints among them, and the text scripts match.
type anthropicPrompt struct {
	units       []unit
	breakpoints []int
	text        strings.Builder
}

func (p *anthropicPrompt) add(scope string, raw json.RawMessage, chars int, cache bool) error {
	key, err := canonical(scope, raw)
	if err != nil {
		return err
	}
	if cache {
		p.breakpoints = append(p.breakpoints, len(p.units))
	}
	p.units = append(p.units, unit{key: key, chars: chars})
	return nil
}

func parseAnthropic(body []byte) (*anthropicRequest, *anthropicPrompt, error) {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, fmt.Errorf("request body: %v", err)
	}
	switch {
	case req.Model == "":
		return nil, nil, fmt.Errorf("model: Field required")
	case req.MaxTokens <= 0:
		return nil, nil, fmt.Errorf("max_tokens: must be at least 1")
	case len(req.Messages) == 0:
		return nil, nil, fmt.Errorf("messages: at least one message is required")
	}
	if err := req.checkThinking(); err != nil {
		return nil, nil, err
	}
	p := &anthropicPrompt{}
	for i, raw := range req.Tools {
		var t struct {
			Name         string          `json:"name"`
			Description  string          `json:"description"`
			InputSchema  json.RawMessage `json:"input_schema"`
			CacheControl json.RawMessage `json:"cache_control"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, nil, fmt.Errorf("tools.%d: %v", i, err)
		}
		chars := len(t.Name) + len(t.Description) + len(t.InputSchema)
		if err := p.add("tool", raw, chars, hasCacheControl(t.CacheControl)); err != nil {
			return nil, nil, fmt.Errorf("tools.%d: %v", i, err)
		}
	}
	system, err := anthropicBlocks(req.System)
	if err != nil {
		return nil, nil, fmt.Errorf("system: %v", err)
	}
	for i, b := range system {
		if err := p.addBlock("system", b); err != nil {
			return nil, nil, fmt.Errorf("system.%d: %v", i, err)
		}
	}
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return nil, nil, fmt.Errorf("messages.%d.role: must be user or assistant", i)
		}
		blocks, err := anthropicBlocks(m.Content)
		if err != nil || len(blocks) == 0 {
			return nil, nil, fmt.Errorf("messages.%d.content: a string or a non-empty list of blocks is required", i)
		}
		for j, b := range blocks {
			// The scope marks where a message starts, so two messages never hash like one
			// message with two blocks.
			scope := m.Role
			if j == 0 {
				scope = "new " + m.Role
			}
			if err := p.addBlock(scope, b); err != nil {
				return nil, nil, fmt.Errorf("messages.%d.content.%d: %v", i, j, err)
			}
		}
	}
	if n := len(p.breakpoints); n > anthropicMaxBreakpoints {
		return nil, nil, fmt.Errorf("A maximum of %d blocks with cache_control may be provided. Found %d.", anthropicMaxBreakpoints, n)
	}
	return &req, p, nil
}

func (p *anthropicPrompt) addBlock(scope string, raw json.RawMessage) error {
	var b anthropicBlock
	if err := json.Unmarshal(raw, &b); err != nil {
		return err
	}
	var text string
	switch b.Type {
	case "text":
		text = b.Text
	case "tool_use":
		text = b.Name + string(b.Input)
	case "tool_result":
		inner, err := anthropicBlocks(b.Content)
		if err != nil {
			return fmt.Errorf("content: %v", err)
		}
		var parts []string
		for _, in := range inner {
			var ib anthropicBlock
			if json.Unmarshal(in, &ib) == nil && ib.Type == "text" {
				parts = append(parts, ib.Text)
			}
		}
		text = strings.Join(parts, "\n")
	case "":
		return fmt.Errorf("type: Field required")
	default:
		// Images, documents and the like: their JSON stands in for their size.
		text = string(raw)
	}
	if p.text.Len() > 0 {
		p.text.WriteByte('\n')
	}
	p.text.WriteString(text)
	return p.add(scope, raw, len(text), hasCacheControl(b.CacheControl))
}

// anthropicBlocks reads a content (or system) value: a string is one text block.
func anthropicBlocks(raw json.RawMessage) ([]json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, nil
		}
		b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
		return []json.RawMessage{b}, nil
	}
	var blocks []json.RawMessage
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, fmt.Errorf("must be a string or a list of blocks")
	}
	return blocks, nil
}

func hasCacheControl(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

func (s *Server) anthropicMessages(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r, w)
	rec := s.begin(EndpointAnthropicMessages, body)
	if err != nil {
		s.finish(rec, "", http.StatusRequestEntityTooLarge, tokens{})
		writeError(w, dialectAnthropic, apiError{status: http.StatusRequestEntityTooLarge, message: err.Error(), noRetry: true})
		return
	}
	req, prompt, err := parseAnthropic(body)
	if err != nil {
		s.finish(rec, "", http.StatusBadRequest, tokens{})
		writeError(w, dialectAnthropic, badRequest(err.Error()))
		return
	}
	s.mu.Lock()
	entry, failure := s.pick(familyAnthropic, EndpointAnthropicMessages, prompt.text.String())
	var t tokens
	if failure == nil && entry.Error == nil {
		t = s.anthropicCache(req.Model, prompt.units, prompt.breakpoints)
	}
	s.mu.Unlock()
	if req.Stream {
		s.streamed(rec)
		s.replyStream(w, r, rec, req.Model, dialectAnthropic, entry, failure, t,
			func(e Response, t *tokens) { t.output = anthropicOutput(req, e) },
			func(es *eventStream, e Response, t tokens) { s.anthropicStream(es, req, e, t) })
		return
	}
	s.reply(w, r, rec, req.Model, dialectAnthropic, entry, failure, t, func(e Response, t *tokens) any {
		return s.anthropicAnswer(req, e, t)
	})
}

// anthropicOutput counts an answer's output tokens: the reply, and the thinking when the
// request enabled it (thinking tokens are output tokens).
func anthropicOutput(req *anthropicRequest, e Response) int {
	thought := 0
	if e.Thinking != "" && req.thinks() {
		thought = estimateTokens(len(e.Thinking))
	}
	return outputTokens(replyText(e), e.OutputTokens) + thought
}

// replyText is what an answer's output tokens are estimated from: its text and each tool
// call's name and input.
func replyText(e Response) string {
	reply := e.Text
	for _, tc := range e.ToolCalls {
		reply += tc.Name + string(toolInput(tc))
	}
	return reply
}

func (s *Server) anthropicAnswer(req *anthropicRequest, e Response, t *tokens) any {
	content := []map[string]any{}
	if e.Thinking != "" && req.thinks() {
		content = append(content, map[string]any{
			"type": "thinking", "thinking": e.Thinking, "signature": s.nextID("signature"),
		})
	}
	if e.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": e.Text})
	}
	for _, tc := range e.ToolCalls {
		content = append(content, map[string]any{
			"type": "tool_use", "id": s.nextID("toolu"), "name": tc.Name, "input": toolInput(tc),
		})
	}
	t.output = anthropicOutput(req, e)
	return map[string]any{
		"id": s.nextID("msg"), "type": "message", "role": "assistant", "model": req.Model,
		"content": content, "stop_reason": stopReason(e).anthropic(), "stop_sequence": anthropicStopSequence(req, e),
		"usage": anthropicUsage(*t, t.output),
	}
}

// anthropicStopSequence is the stop_sequence of an answer that stopped at one.
func anthropicStopSequence(req *anthropicRequest, e Response) any {
	if stopReason(e) == stopSequence && len(req.StopSequences) > 0 {
		return req.StopSequences[0]
	}
	return nil
}

// anthropicUsage is a message's usage with output output tokens.
func anthropicUsage(t tokens, output int) map[string]any {
	return map[string]any{
		// Anthropic's input_tokens leaves out what was read from or written to the cache.
		"input_tokens":                t.input - t.cacheRead - t.cacheWrite,
		"output_tokens":               output,
		"cache_creation_input_tokens": t.cacheWrite,
		"cache_read_input_tokens":     t.cacheRead,
		"cache_creation":              map[string]any{"ephemeral_5m_input_tokens": t.cacheWrite, "ephemeral_1h_input_tokens": 0},
		"service_tier":                "standard",
	}
}

// anthropicStream writes the answer as Messages streaming events: message_start with the
// input usage (and one output token, as the API reports then), a ping, each content block
// as content_block_start, its deltas and content_block_stop, then message_delta with the
// stop reason and the output tokens, and message_stop.
func (s *Server) anthropicStream(es *eventStream, req *anthropicRequest, e Response, t tokens) {
	es.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": s.nextID("msg"), "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(t, 1),
	}})
	es.event("ping", map[string]any{"type": "ping"})
	index := 0
	// block writes a content block; deltas reports false when the stream broke off.
	block := func(start map[string]any, deltas func() bool) bool {
		es.event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": start})
		if !deltas() {
			return false
		}
		es.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
		return true
	}
	delta := func(d map[string]any, text bool) {
		es.delta("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": d}, text)
	}
	if e.Thinking != "" && req.thinks() {
		block(map[string]any{"type": "thinking", "thinking": "", "signature": ""}, func() bool {
			for _, c := range chunks(e.Thinking, e.ChunkSize) {
				delta(map[string]any{"type": "thinking_delta", "thinking": c}, false)
			}
			es.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "signature_delta", "signature": s.nextID("signature")}})
			return true
		})
	}
	if e.Text != "" {
		ok := block(map[string]any{"type": "text", "text": ""}, func() bool {
			pieces := chunks(e.Text, e.ChunkSize)
			for i, c := range pieces {
				delta(map[string]any{"type": "text_delta", "text": c}, true)
				if es.breaking(i == len(pieces)-1) {
					// Overloaded mid-answer: the API's way of failing a stream it began.
					es.event("error", map[string]any{"type": "error", "error": map[string]any{
						"type": "overloaded_error", "message": "Overloaded"}})
					return false
				}
			}
			return true
		})
		if !ok {
			return
		}
	}
	for _, tc := range e.ToolCalls {
		block(map[string]any{"type": "tool_use", "id": s.nextID("toolu"), "name": tc.Name, "input": map[string]any{}}, func() bool {
			for _, c := range chunks(compactInput(tc), e.ChunkSize) {
				delta(map[string]any{"type": "input_json_delta", "partial_json": c}, false)
			}
			return true
		})
	}
	es.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stopReason(e).anthropic(), "stop_sequence": anthropicStopSequence(req, e)},
		"usage": map[string]any{"output_tokens": t.output}})
	es.event("message_stop", map[string]any{"type": "message_stop"})
}
