package provider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/thefold/thefold/services/ai/internal/llm"
)

// openaiClient speaks Chat Completions and Embeddings, to OpenAI or to any server that
// copies them (Ollama, vLLM, LM Studio, Moonshot, fakellm).
type openaiClient struct {
	t transport
	// compatible: an OpenAI-compatible server, which gets max_tokens (what they all
	// understand) instead of OpenAI's max_completion_tokens.
	compatible bool
	chat       openai.ChatCompletionService
	embeddings openai.EmbeddingService
}

func newOpenAI(t transport, base, key string, compatible bool) *openaiClient {
	// The services, not NewClient: NewClient reads OPENAI_* variables (base URL, key,
	// organisation, custom headers), and a provider account must be exactly what the
	// registry says.
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithHTTPClient(t.http),
		option.WithMaxRetries(0),
	}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	return &openaiClient{
		t:          t,
		compatible: compatible,
		chat:       openai.NewChatCompletionService(opts...),
		embeddings: openai.NewEmbeddingService(opts...),
	}
}

func (c *openaiClient) Name() string { return c.t.name }

func (c *openaiClient) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	params, err := c.params(req)
	if err != nil {
		return nil, err
	}
	var cc *openai.ChatCompletion
	err = c.t.attempt(ctx, nil, func(ctx context.Context) error {
		var err error
		cc, err = c.chat.New(ctx, params)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.response(cc)
}

// Stream is Complete with the reply delivered as it arrives: Chat.Completions.NewStreaming
// with stream_options.include_usage (the usage comes in a last chunk without choices).
// Text goes out with each content delta; a tool call, assembled from its deltas by index,
// once the next call starts or the choice finishes.
func (c *openaiClient) Stream(ctx context.Context, req llm.Request, on func(llm.Delta) error) (*llm.Response, error) {
	params, err := c.params(req)
	if err != nil {
		return nil, err
	}
	params.StreamOptions.IncludeUsage = param.NewOpt(true)
	var acc openaiStream
	err = c.t.stream(ctx, nil, on, func(ctx context.Context, emit func(llm.Delta) error) error {
		acc = openaiStream{emit: emit} // a retry starts over
		s := c.chat.NewStreaming(ctx, params)
		defer s.Close()
		for s.Next() {
			if err := acc.add(s.Current()); err != nil {
				return err
			}
		}
		if err := s.Err(); err != nil {
			return err
		}
		return acc.end()
	})
	if err != nil {
		return nil, err
	}
	return openaiResult(acc.model, acc.text.String(), acc.done, acc.finish, acc.usage), nil
}

// openaiStream assembles a streamed chat completion (its first choice).
type openaiStream struct {
	emit   func(llm.Delta) error
	model  string
	text   strings.Builder
	calls  []*openaiCall // by index
	done   []llm.Block   // the calls delivered, in order
	finish string
	usage  openai.CompletionUsage
}

type openaiCall struct {
	id, typ, name string
	args          strings.Builder
	sent          bool
}

func (a *openaiStream) add(chunk openai.ChatCompletionChunk) error {
	if chunk.Model != "" {
		a.model = chunk.Model
	}
	if chunk.JSON.Usage.Valid() {
		a.usage = chunk.Usage
	}
	for _, ch := range chunk.Choices {
		if ch.Index != 0 {
			continue // one choice is asked for
		}
		if t := ch.Delta.Content; t != "" {
			a.text.WriteString(t)
			if err := a.emit(llm.Delta{Text: t}); err != nil {
				return err
			}
		}
		for _, tc := range ch.Delta.ToolCalls {
			i := max(int(tc.Index), 0) // some servers send -1 for a single call
			if i >= len(a.calls)+maxToolCallGap {
				return fmt.Errorf("tool call index %d skips too far past %d", tc.Index, len(a.calls))
			}
			for len(a.calls) <= i {
				a.calls = append(a.calls, &openaiCall{})
			}
			// A call's deltas come together: one at a later index finishes the earlier.
			if err := a.flush(i); err != nil {
				return err
			}
			call := a.calls[i]
			if tc.ID != "" {
				call.id = tc.ID
			}
			if tc.Type != "" {
				call.typ = tc.Type
			}
			if call.name == "" {
				call.name = tc.Function.Name
			}
			call.args.WriteString(tc.Function.Arguments)
		}
		if ch.FinishReason != "" {
			a.finish = ch.FinishReason
			if err := a.flush(len(a.calls)); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxToolCallGap bounds how far a tool call's index may jump ahead (a garbled stream must
// not make the client allocate without bound).
const maxToolCallGap = 128

// flush delivers the calls before index n not delivered yet.
func (a *openaiStream) flush(n int) error {
	for _, call := range a.calls[:n] {
		if call.sent {
			continue
		}
		call.sent = true
		if call.typ != "" && call.typ != "function" {
			continue
		}
		b, err := openaiToolUse(call.id, call.name, call.args.String())
		if err != nil {
			return err
		}
		a.done = append(a.done, b)
		if err := a.emit(llm.Delta{ToolUse: &b}); err != nil {
			return err
		}
	}
	return nil
}

func (a *openaiStream) end() error {
	if a.finish == "" {
		return errors.New("the stream ended without a finish_reason")
	}
	return a.flush(len(a.calls))
}

func (c *openaiClient) params(req llm.Request) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: req.Model}
	// One system message: OpenAI caches the longest repeated prefix by itself, so the
	// segments' Cache marks need no translation, only a stable order.
	var system []string
	for _, s := range req.System {
		if s.Text != "" {
			system = append(system, s.Text)
		}
	}
	if len(system) > 0 {
		p.Messages = append(p.Messages, openai.SystemMessage(strings.Join(system, "\n\n")))
	}
	for i, m := range req.Messages {
		msgs, err := openaiMessages(m)
		if err != nil {
			return p, c.t.badRequest("message %d: %v", i, err)
		}
		p.Messages = append(p.Messages, msgs...)
	}
	for _, t := range req.Tools {
		schema, err := schemaMap(t.InputSchema)
		if err != nil {
			return p, c.t.badRequest("tool %s: %v", t.Name, err)
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema)}
		if t.Description != "" {
			fd.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	if len(req.Tools) > 0 {
		switch req.ToolChoice.Mode {
		case llm.ToolAny:
			p.ToolChoice.OfAuto = param.NewOpt(string(openai.ChatCompletionToolChoiceOptionAutoRequired))
		case llm.ToolNamed:
			p.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: req.ToolChoice.Name})
		case llm.ToolNone:
			p.ToolChoice.OfAuto = param.NewOpt(string(openai.ChatCompletionToolChoiceOptionAutoNone))
		default:
			p.ToolChoice.OfAuto = param.NewOpt(string(openai.ChatCompletionToolChoiceOptionAutoAuto))
		}
	}
	if req.MaxTokens > 0 {
		// Reasoning tokens count against the limit: it grows by the effort's budget, so
		// the answer keeps its room.
		limit := int64(req.MaxTokens + req.Reasoning.Budget())
		if c.compatible {
			p.MaxTokens = param.NewOpt(limit)
		} else {
			p.MaxCompletionTokens = param.NewOpt(limit)
		}
	}
	switch req.Reasoning {
	case llm.EffortLow:
		p.ReasoningEffort = shared.ReasoningEffortLow
	case llm.EffortMedium:
		p.ReasoningEffort = shared.ReasoningEffortMedium
	case llm.EffortHigh:
		p.ReasoningEffort = shared.ReasoningEffortHigh
	}
	// OpenAI's reasoning models refuse a temperature other than 1: none beside an effort.
	if req.Temperature != nil && req.Reasoning == llm.EffortNone {
		p.Temperature = param.NewOpt(*req.Temperature)
	}
	if len(req.StopSequences) > 0 {
		p.Stop.OfStringArray = req.StopSequences
	}
	if req.JSON {
		p.ResponseFormat.OfJSONObject = &shared.ResponseFormatJSONObjectParam{}
	}
	return p, nil
}

// openaiMessages translates one message. A user message's tool results become tool-role
// messages, first, because the API wants them right after the assistant's tool calls.
func openaiMessages(m llm.Message) ([]openai.ChatCompletionMessageParamUnion, error) {
	var out []openai.ChatCompletionMessageParamUnion
	var text []string
	var calls []openai.ChatCompletionMessageToolCallUnionParam
	// parts is the user's content in order when it holds an image (a plain string else).
	var parts []openai.ChatCompletionContentPartUnionParam
	images := false
	for j, b := range m.Blocks {
		switch b.Kind {
		case llm.BlockText:
			if b.Text != "" {
				text = append(text, b.Text)
				parts = append(parts, openai.TextContentPart(b.Text))
			}
		case llm.BlockImage:
			if m.Role == llm.RoleAssistant {
				return nil, errBlock(j, errors.New("an image must be in a user message"))
			}
			images = true
			parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{
				URL: "data:" + b.MediaType + ";base64," + base64.StdEncoding.EncodeToString(b.Data),
			}))
		case llm.BlockToolUse:
			if m.Role != llm.RoleAssistant {
				return nil, errBlock(j, errors.New("a tool call must be in an assistant message"))
			}
			input, err := toolInput(b.Input)
			if err != nil {
				return nil, errBlock(j, err)
			}
			calls = append(calls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID:       b.ToolUseID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.ToolName, Arguments: string(input)},
			}})
		case llm.BlockToolResult:
			if m.Role == llm.RoleAssistant {
				return nil, errBlock(j, errors.New("a tool result must be in a user message"))
			}
			content := b.Text
			if b.IsError {
				// Chat Completions has no error flag on a tool message; say it in words.
				content = "Error: " + content
			}
			out = append(out, openai.ToolMessage(content, b.ToolUseID))
		default:
			return nil, errBlock(j, errors.New("unknown block kind"))
		}
	}
	joined := strings.Join(text, "\n\n")
	if m.Role == llm.RoleAssistant {
		a := &openai.ChatCompletionAssistantMessageParam{ToolCalls: calls}
		if joined != "" || len(calls) == 0 {
			a.Content.OfString = param.NewOpt(joined)
		}
		return append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: a}), nil
	}
	switch {
	case images:
		out = append(out, openai.UserMessage(parts))
	case joined != "" || len(out) == 0:
		out = append(out, openai.UserMessage(joined))
	}
	return out, nil
}

func (c *openaiClient) response(cc *openai.ChatCompletion) (*llm.Response, error) {
	if cc == nil || len(cc.Choices) == 0 {
		return nil, c.t.invalid("answer has no choices")
	}
	ch := cc.Choices[0]
	var calls []llm.Block
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		b, err := openaiToolUse(tc.ID, tc.Function.Name, tc.Function.Arguments)
		if err != nil {
			return nil, c.t.invalid("%v", err)
		}
		calls = append(calls, b)
	}
	return openaiResult(cc.Model, ch.Message.Content, calls, ch.FinishReason, cc.Usage), nil
}

// openaiToolUse is a tool call of the reply; its arguments must be a JSON object.
func openaiToolUse(id, name, arguments string) (llm.Block, error) {
	args := json.RawMessage(strings.TrimSpace(arguments))
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if _, err := toolInput(args); err != nil {
		return llm.Block{}, fmt.Errorf("tool call %s: arguments are not a JSON object", name)
	}
	return llm.Block{Kind: llm.BlockToolUse, ToolUseID: id, ToolName: name, Input: args}, nil
}

// openaiResult is the reply of a completion, whole or streamed.
func openaiResult(model, text string, calls []llm.Block, finish string, u openai.CompletionUsage) *llm.Response {
	// Content only: the reasoning some OpenAI-compatible servers send beside it
	// (reasoning_content, reasoning) is not the answer. OpenAI counts reasoning tokens in
	// completion_tokens, so they are output tokens below.
	out := &llm.Response{Text: text, Model: model, ToolUses: calls}
	switch finish {
	case "stop":
		// OpenAI says "stop" for the end of a turn and for a stop sequence alike.
		out.StopReason = llm.StopEndTurn
	case "length":
		out.StopReason = llm.StopMaxTokens
	case "tool_calls", "function_call":
		out.StopReason = llm.StopToolUse
	}
	if len(out.ToolUses) > 0 {
		out.StopReason = llm.StopToolUse
	}
	out.Usage = llm.Usage{
		InputTokens:      u.PromptTokens,
		OutputTokens:     u.CompletionTokens,
		CacheReadTokens:  u.PromptTokensDetails.CachedTokens,
		CacheWriteTokens: u.PromptTokensDetails.CacheWriteTokens,
	}
	return out
}

func (c *openaiClient) Embed(ctx context.Context, req llm.EmbedRequest) (*llm.EmbedResponse, error) {
	if len(req.Texts) == 0 {
		return &llm.EmbedResponse{}, nil
	}
	p := openai.EmbeddingNewParams{
		Model:          req.Model,
		Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: req.Texts},
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat,
	}
	if req.Dimensions > 0 {
		p.Dimensions = param.NewOpt(int64(req.Dimensions))
	}
	var res *openai.CreateEmbeddingResponse
	err := c.t.attempt(ctx, nil, func(ctx context.Context) error {
		var err error
		res, err = c.embeddings.New(ctx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	if res == nil || len(res.Data) != len(req.Texts) {
		n := 0
		if res != nil {
			n = len(res.Data)
		}
		return nil, c.t.invalid("answer has %d embeddings for %d texts", n, len(req.Texts))
	}
	data := append([]openai.Embedding(nil), res.Data...)
	sort.SliceStable(data, func(i, j int) bool { return data[i].Index < data[j].Index })
	out := &llm.EmbedResponse{Vectors: make([][]float32, len(data)), Usage: llm.Usage{InputTokens: res.Usage.PromptTokens}}
	for i, d := range data {
		if d.Index != int64(i) {
			return nil, c.t.invalid("answer's embedding indexes are not 0..%d", len(data)-1)
		}
		if len(d.Embedding) == 0 {
			return nil, c.t.invalid("embedding %d is empty", i)
		}
		v := make([]float32, len(d.Embedding))
		for k, f := range d.Embedding {
			v[k] = float32(f)
		}
		out.Vectors[i] = v
	}
	return out, nil
}
