package provider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/thefold/thefold/services/ai/internal/llm"
)

// DefaultMaxTokens is sent to Anthropic when the request sets none (the API requires one).
const DefaultMaxTokens = 4096

// maxCacheBreakpoints is Anthropic's limit of cache_control blocks per request.
const maxCacheBreakpoints = 4

type anthropicClient struct {
	t        transport
	messages anthropic.MessageService
}

func newAnthropic(t transport, base, key string) *anthropicClient {
	// NewMessageService rather than NewClient: NewClient starts from
	// DefaultClientOptions, which reads ANTHROPIC_* variables and credential files, and a
	// provider account must be exactly what the registry says.
	return &anthropicClient{t: t, messages: anthropic.NewMessageService(
		option.WithBaseURL(base),
		option.WithAPIKey(key),
		option.WithHTTPClient(t.http),
		option.WithMaxRetries(0),
		// Also stops the SDK refusing large max_tokens without streaming: it only
		// estimates a duration when no timeout is set.
		option.WithRequestTimeout(t.timeout),
	)}
}

func (c *anthropicClient) Name() string { return c.t.name }

// Embed: Anthropic has no embeddings API.
func (c *anthropicClient) Embed(context.Context, llm.EmbedRequest) (*llm.EmbedResponse, error) {
	return nil, llm.ErrUnsupported
}

func (c *anthropicClient) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	params, err := c.params(req)
	if err != nil {
		return nil, err
	}
	var msg *anthropic.Message
	err = c.t.attempt(ctx, anthropicKind, func(ctx context.Context) error {
		var err error
		msg, err = c.messages.New(ctx, params)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.response(msg)
}

// Stream is Complete with the reply delivered as it arrives: Messages.NewStreaming, its
// events accumulated into the message Complete would have got (text and input_json
// deltas, usage from message_start and message_delta). Text goes out with each
// text_delta, a tool call at its content_block_stop.
func (c *anthropicClient) Stream(ctx context.Context, req llm.Request, on func(llm.Delta) error) (*llm.Response, error) {
	params, err := c.params(req)
	if err != nil {
		return nil, err
	}
	var msg anthropic.Message
	err = c.t.stream(ctx, anthropicKind, on, func(ctx context.Context, emit func(llm.Delta) error) error {
		msg = anthropic.Message{} // a retry starts over
		s := c.messages.NewStreaming(ctx, params)
		defer s.Close()
		stopped := false
		for s.Next() {
			ev := s.Current()
			if err := msg.Accumulate(ev); err != nil {
				return err
			}
			switch ev.Type {
			case "content_block_delta":
				if ev.Delta.Type == "text_delta" && ev.Delta.Text != "" {
					if err := emit(llm.Delta{Text: ev.Delta.Text}); err != nil {
						return err
					}
				}
			case "content_block_stop":
				if b := msg.Content[ev.Index]; b.Type == "tool_use" {
					tu, err := anthropicToolUse(b)
					if err != nil {
						return err
					}
					if err := emit(llm.Delta{ToolUse: &tu}); err != nil {
						return err
					}
				}
			case "message_stop":
				stopped = true
			}
		}
		if err := s.Err(); err != nil {
			return err
		}
		if !stopped {
			return errors.New("the stream ended before message_stop")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c.response(&msg)
}

// anthropicToolUse is a tool_use block of the reply; its input must be a JSON object
// (a streamed one is the input_json deltas joined).
func anthropicToolUse(b anthropic.ContentBlockUnion) (llm.Block, error) {
	input, err := toolInput(b.Input)
	if err != nil {
		return llm.Block{}, fmt.Errorf("tool_use %s: %v", b.Name, err)
	}
	return llm.Block{Kind: llm.BlockToolUse, ToolUseID: b.ID, ToolName: b.Name, Input: input}, nil
}

// anthropicKind: an overloaded_error is Overloaded whatever its status.
func anthropicKind(err error) (llm.ErrorKind, bool) {
	var ae *anthropic.Error
	if errors.As(err, &ae) && ae.Type() == anthropic.ErrorTypeOverloadedError {
		return llm.KindOverloaded, true
	}
	return 0, false
}

func (c *anthropicClient) params(req llm.Request) (anthropic.MessageNewParams, error) {
	p := anthropic.MessageNewParams{
		Model:         req.Model,
		MaxTokens:     int64(req.MaxTokens),
		StopSequences: req.StopSequences,
	}
	if p.MaxTokens <= 0 {
		p.MaxTokens = DefaultMaxTokens
	}
	if anthropicThinks(req) {
		// Extended thinking: budget_tokens counts against max_tokens and must stay below
		// it, so the answer keeps its room and max_tokens grows by the budget. The API
		// refuses a temperature (other than 1) beside thinking: it is left out.
		budget := int64(req.Reasoning.Budget())
		p.MaxTokens += budget
		p.Thinking = anthropic.ThinkingConfigParamOfEnabled(budget)
	} else if req.Temperature != nil {
		p.Temperature = param.NewOpt(*req.Temperature)
	}
	// Breakpoints in Anthropic's prefix order (system, then messages); only the last four
	// are kept, because the longest cached prefix is the one worth paying for.
	var sysCache []bool
	for _, s := range req.System {
		if s.Text == "" {
			continue // the API refuses empty text blocks
		}
		p.System = append(p.System, anthropic.TextBlockParam{Text: s.Text})
		sysCache = append(sysCache, s.Cache)
	}
	var marks []*anthropic.CacheControlEphemeralParam
	for i := range p.System {
		if sysCache[i] {
			marks = append(marks, &p.System[i].CacheControl)
		}
	}
	for i, m := range req.Messages {
		mp, mmarks, err := c.message(m)
		if err != nil {
			return p, c.t.badRequest("message %d: %v", i, err)
		}
		p.Messages = append(p.Messages, mp)
		marks = append(marks, mmarks...)
	}
	if len(marks) > maxCacheBreakpoints {
		marks = marks[len(marks)-maxCacheBreakpoints:]
	}
	for _, m := range marks {
		*m = anthropic.NewCacheControlEphemeralParam()
	}
	for _, t := range req.Tools {
		schema, err := anthropicSchema(t.InputSchema)
		if err != nil {
			return p, c.t.badRequest("tool %s: %v", t.Name, err)
		}
		tp := &anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: tp})
	}
	// tool_choice is only valid beside tools; "auto" is the API's default anyway.
	if len(req.Tools) > 0 {
		switch req.ToolChoice.Mode {
		case llm.ToolAny:
			p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}
		case llm.ToolNamed:
			p.ToolChoice = anthropic.ToolChoiceParamOfTool(req.ToolChoice.Name)
		case llm.ToolNone:
			p.ToolChoice = anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}}
		default:
			p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{}}
		}
	}
	return p, nil
}

// anthropicThinks reports whether req gets extended thinking: an effort was asked for, and
// no tool is forced (the API refuses thinking with tool_choice any or tool).
func anthropicThinks(req llm.Request) bool {
	if req.Reasoning.Budget() == 0 {
		return false
	}
	forced := req.ToolChoice.Mode == llm.ToolAny || req.ToolChoice.Mode == llm.ToolNamed
	return len(req.Tools) == 0 || !forced
}

// message translates one message and returns the cache_control fields of its blocks
// marked Cache.
func (c *anthropicClient) message(m llm.Message) (anthropic.MessageParam, []*anthropic.CacheControlEphemeralParam, error) {
	mp := anthropic.MessageParam{Role: anthropic.MessageParamRoleUser}
	if m.Role == llm.RoleAssistant {
		mp.Role = anthropic.MessageParamRoleAssistant
	}
	var marks []*anthropic.CacheControlEphemeralParam
	for j, b := range m.Blocks {
		var cc *anthropic.CacheControlEphemeralParam
		switch b.Kind {
		case llm.BlockText:
			if b.Text == "" {
				continue
			}
			tb := &anthropic.TextBlockParam{Text: b.Text}
			mp.Content = append(mp.Content, anthropic.ContentBlockParamUnion{OfText: tb})
			cc = &tb.CacheControl
		case llm.BlockToolUse:
			input, err := toolInput(b.Input)
			if err != nil {
				return mp, nil, errBlock(j, err)
			}
			tu := &anthropic.ToolUseBlockParam{ID: b.ToolUseID, Name: b.ToolName, Input: input}
			mp.Content = append(mp.Content, anthropic.ContentBlockParamUnion{OfToolUse: tu})
			cc = &tu.CacheControl
		case llm.BlockImage:
			if m.Role == llm.RoleAssistant {
				return mp, nil, errBlock(j, errors.New("an image must be in a user message"))
			}
			img := &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{
				MediaType: anthropic.Base64ImageSourceMediaType(b.MediaType), Data: base64.StdEncoding.EncodeToString(b.Data),
			}}}
			mp.Content = append(mp.Content, anthropic.ContentBlockParamUnion{OfImage: img})
			cc = &img.CacheControl
		case llm.BlockToolResult:
			tr := &anthropic.ToolResultBlockParam{ToolUseID: b.ToolUseID}
			if b.Text != "" {
				tr.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: b.Text}}}
			}
			if b.IsError {
				tr.IsError = param.NewOpt(true)
			}
			mp.Content = append(mp.Content, anthropic.ContentBlockParamUnion{OfToolResult: tr})
			cc = &tr.CacheControl
		default:
			return mp, nil, errBlock(j, errors.New("unknown block kind"))
		}
		if b.Cache {
			marks = append(marks, cc)
		}
	}
	return mp, marks, nil
}

// anthropicSchema splits a JSON Schema object into the SDK's input_schema: properties and
// required by name, everything else as extra fields.
func anthropicSchema(raw json.RawMessage) (anthropic.ToolInputSchemaParam, error) {
	var s anthropic.ToolInputSchemaParam
	obj, err := schemaObject(raw)
	if err != nil {
		return s, err
	}
	if v, ok := obj["properties"]; ok {
		s.Properties = v
		delete(obj, "properties")
	}
	if v, ok := obj["required"]; ok {
		if err := json.Unmarshal(v, &s.Required); err != nil {
			return s, errors.New("input schema: required is not a list of names")
		}
		delete(obj, "required")
	}
	delete(obj, "type")
	if len(obj) > 0 {
		s.ExtraFields = make(map[string]any, len(obj))
		for k, v := range obj {
			s.ExtraFields[k] = v
		}
	}
	return s, nil
}

func (c *anthropicClient) response(msg *anthropic.Message) (*llm.Response, error) {
	if msg == nil || (len(msg.Content) == 0 && msg.StopReason == "") {
		return nil, c.t.invalid("answer has neither content nor a stop reason")
	}
	out := &llm.Response{Model: msg.Model}
	var text []string
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "thinking", "redacted_thinking":
			// The model's reasoning before its answer: not part of the answer (its tokens
			// are in output_tokens already).
		case "tool_use":
			tu, err := anthropicToolUse(b)
			if err != nil {
				return nil, c.t.invalid("%v", err)
			}
			out.ToolUses = append(out.ToolUses, tu)
		}
	}
	out.Text = strings.Join(text, "")
	switch msg.StopReason {
	case anthropic.StopReasonEndTurn:
		out.StopReason = llm.StopEndTurn
	case anthropic.StopReasonMaxTokens, anthropic.StopReasonModelContextWindowExceeded:
		out.StopReason = llm.StopMaxTokens
	case anthropic.StopReasonStopSequence:
		out.StopReason = llm.StopSequence
	case anthropic.StopReasonToolUse:
		out.StopReason = llm.StopToolUse
	}
	u := msg.Usage
	// Anthropic counts cache reads and writes beside input_tokens; llm.Usage counts them
	// inside, as every other provider does.
	out.Usage = llm.Usage{
		InputTokens:      u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
	}
	return out, nil
}
