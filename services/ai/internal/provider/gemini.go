package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genai"

	"github.com/thefold/thefold/services/ai/internal/llm"
)

type geminiClient struct {
	t      transport
	models *genai.Models
}

func newGemini(t transport, base, key string) (*geminiClient, error) {
	// Backend, key and base URL are all set, so genai reads none of its environment
	// variables; it makes no request here. HTTPOptions.RetryOptions stays nil: genai does
	// not retry then.
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      key,
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  t.http,
		HTTPOptions: genai.HTTPOptions{BaseURL: base + "/"},
	})
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", t.name, err)
	}
	return &geminiClient{t: t, models: c.Models}, nil
}

func (c *geminiClient) Name() string { return c.t.name }

func (c *geminiClient) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	contents, cfg, err := c.params(req)
	if err != nil {
		return nil, err
	}
	var res *genai.GenerateContentResponse
	err = c.t.attempt(ctx, nil, func(ctx context.Context) error {
		var err error
		res, err = c.models.GenerateContent(ctx, req.Model, contents, cfg)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.response(req, res)
}

func (c *geminiClient) params(req llm.Request) ([]*genai.Content, *genai.GenerateContentConfig, error) {
	// AutomaticContinuation off: genai would otherwise send the request again by itself
	// when an answer ends with a continuation token, and every request is the retry
	// policy's to make (and the ledger's to count).
	cfg := &genai.GenerateContentConfig{StopSequences: req.StopSequences, AutomaticContinuation: genai.Ptr(false)}
	budget := req.Reasoning.Budget()
	if req.MaxTokens > 0 {
		// Thinking counts against maxOutputTokens: it grows by the budget, so the answer
		// keeps its room.
		cfg.MaxOutputTokens = int32(min(req.MaxTokens+budget, 1<<31-1))
	}
	if budget > 0 {
		b := int32(budget)
		cfg.ThinkingConfig = &genai.ThinkingConfig{ThinkingBudget: &b}
	}
	if req.Temperature != nil {
		t := float32(*req.Temperature)
		cfg.Temperature = &t
	}
	if req.JSON {
		cfg.ResponseMIMEType = "application/json"
	}
	var sys []*genai.Part
	for _, s := range req.System {
		if s.Text != "" {
			sys = append(sys, &genai.Part{Text: s.Text})
		}
	}
	if len(sys) > 0 {
		cfg.SystemInstruction = &genai.Content{Parts: sys}
	}
	// A functionResponse names the function, not the call: remember each call's name.
	names := map[string]string{}
	var contents []*genai.Content
	for i, m := range req.Messages {
		content := &genai.Content{Role: genai.RoleUser}
		if m.Role == llm.RoleAssistant {
			content.Role = genai.RoleModel
		}
		for j, b := range m.Blocks {
			switch b.Kind {
			case llm.BlockText:
				if b.Text != "" {
					content.Parts = append(content.Parts, &genai.Part{Text: b.Text})
				}
			case llm.BlockToolUse:
				args, err := toolInputMap(b.Input)
				if err != nil {
					return nil, nil, c.t.badRequest("message %d: %v", i, errBlock(j, err))
				}
				names[b.ToolUseID] = b.ToolName
				content.Parts = append(content.Parts, &genai.Part{FunctionCall: &genai.FunctionCall{Name: b.ToolName, Args: args}})
			case llm.BlockImage:
				if m.Role == llm.RoleAssistant {
					return nil, nil, c.t.badRequest("message %d: %v", i, errBlock(j, errors.New("an image must be in a user message")))
				}
				content.Parts = append(content.Parts, &genai.Part{InlineData: &genai.Blob{Data: b.Data, MIMEType: b.MediaType}})
			case llm.BlockToolResult:
				name, ok := names[b.ToolUseID]
				if !ok {
					return nil, nil, c.t.badRequest("message %d: %v", i, errBlock(j, fmt.Errorf("tool result for %q answers no earlier tool call", b.ToolUseID)))
				}
				// Gemini's documented convention: "output" for a result, "error" for a failure.
				key := "output"
				if b.IsError {
					key = "error"
				}
				content.Parts = append(content.Parts, &genai.Part{FunctionResponse: &genai.FunctionResponse{Name: name, Response: map[string]any{key: b.Text}}})
			default:
				return nil, nil, c.t.badRequest("message %d: %v", i, errBlock(j, errors.New("unknown block kind")))
			}
		}
		if len(content.Parts) > 0 {
			contents = append(contents, content)
		}
	}
	if len(req.Tools) > 0 {
		tool := &genai.Tool{}
		for _, t := range req.Tools {
			schema, err := schemaMap(t.InputSchema)
			if err != nil {
				return nil, nil, c.t.badRequest("tool %s: %v", t.Name, err)
			}
			tool.FunctionDeclarations = append(tool.FunctionDeclarations, &genai.FunctionDeclaration{
				Name: t.Name, Description: t.Description, ParametersJsonSchema: schema,
			})
		}
		cfg.Tools = []*genai.Tool{tool}
		fc := &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeAuto}
		switch req.ToolChoice.Mode {
		case llm.ToolAny:
			fc.Mode = genai.FunctionCallingConfigModeAny
		case llm.ToolNamed:
			fc.Mode, fc.AllowedFunctionNames = genai.FunctionCallingConfigModeAny, []string{req.ToolChoice.Name}
		case llm.ToolNone:
			fc.Mode = genai.FunctionCallingConfigModeNone
		}
		cfg.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: fc}
	}
	return contents, cfg, nil
}

func (c *geminiClient) response(req llm.Request, res *genai.GenerateContentResponse) (*llm.Response, error) {
	if res == nil {
		return nil, c.t.invalid("empty answer")
	}
	r := newGeminiReply(req)
	if err := r.add(res, nil); err != nil {
		return nil, c.t.invalid("%v", err)
	}
	return r.result(c.t)
}

// Stream is Complete with the reply delivered as it arrives: GenerateContentStream
// (streamGenerateContent?alt=sse), each chunk a GenerateContentResponse. Text goes out with
// each text part, a function call (Gemini sends each whole) as it comes.
func (c *geminiClient) Stream(ctx context.Context, req llm.Request, on func(llm.Delta) error) (*llm.Response, error) {
	contents, cfg, err := c.params(req)
	if err != nil {
		return nil, err
	}
	var r *geminiReply
	err = c.t.stream(ctx, nil, on, func(ctx context.Context, emit func(llm.Delta) error) error {
		r = newGeminiReply(req) // a retry starts over
		for chunk, err := range c.models.GenerateContentStream(ctx, req.Model, contents, cfg) {
			if err != nil {
				return err
			}
			if err := r.add(chunk, emit); err != nil {
				return err
			}
		}
		if r.finish == "" && r.feedback == "" {
			return errors.New("the stream ended without a finish reason")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r.result(c.t)
}

// geminiReply reads an answer: a whole one, or a stream's chunks in order.
type geminiReply struct {
	out        *llm.Response
	text       strings.Builder
	candidates bool
	finish     genai.FinishReason
	feedback   genai.BlockedReason
	// seen numbers the calls, which carry no id on the Gemini API: after the calls already
	// in the conversation, so ids are stable and unique within it.
	seen int
}

func newGeminiReply(req llm.Request) *geminiReply {
	r := &geminiReply{out: &llm.Response{Model: req.Model}}
	for _, m := range req.Messages {
		for _, b := range m.Blocks {
			if b.Kind == llm.BlockToolUse {
				r.seen++
			}
		}
	}
	return r
}

// add reads one answer or chunk; emit, when set, gets its text and calls.
func (r *geminiReply) add(res *genai.GenerateContentResponse, emit func(llm.Delta) error) error {
	if res == nil {
		return nil
	}
	if res.ModelVersion != "" {
		r.out.Model = res.ModelVersion
	}
	if res.PromptFeedback != nil && res.PromptFeedback.BlockReason != "" {
		r.feedback = res.PromptFeedback.BlockReason
	}
	if u := res.UsageMetadata; u != nil {
		// promptTokenCount includes the cached tokens; thinking is billed as output. A
		// stream's counts are totals so far: the last wins.
		r.out.Usage = llm.Usage{
			InputTokens:     int64(u.PromptTokenCount) + int64(u.ToolUsePromptTokenCount),
			OutputTokens:    int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount),
			CacheReadTokens: int64(u.CachedContentTokenCount),
		}
	}
	if len(res.Candidates) == 0 || res.Candidates[0] == nil {
		return nil
	}
	r.candidates = true
	cand := res.Candidates[0]
	if cand.FinishReason != "" {
		r.finish = cand.FinishReason
	}
	if cand.Content == nil {
		return nil
	}
	for _, p := range cand.Content.Parts {
		var d llm.Delta
		switch {
		case p == nil:
			continue
		case p.FunctionCall != nil:
			input := json.RawMessage("{}")
			if len(p.FunctionCall.Args) > 0 {
				b, err := json.Marshal(p.FunctionCall.Args)
				if err != nil {
					return fmt.Errorf("function call %s: %v", p.FunctionCall.Name, err)
				}
				input = b
			}
			id := p.FunctionCall.ID
			if id == "" {
				r.seen++
				id = fmt.Sprintf("call_%d", r.seen)
			}
			tu := llm.Block{Kind: llm.BlockToolUse, ToolUseID: id, ToolName: p.FunctionCall.Name, Input: input}
			r.out.ToolUses = append(r.out.ToolUses, tu)
			d.ToolUse = &tu
		case p.Thought:
			// A thinking summary is not the answer.
			continue
		case p.Text != "":
			r.text.WriteString(p.Text)
			d.Text = p.Text
		default:
			continue
		}
		if emit != nil {
			if err := emit(d); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *geminiReply) result(t transport) (*llm.Response, error) {
	if !r.candidates {
		if r.feedback != "" {
			return nil, t.badRequest("prompt blocked: %s", r.feedback)
		}
		return nil, t.invalid("answer has no candidates")
	}
	out := r.out
	out.Text = r.text.String()
	switch r.finish {
	case genai.FinishReasonStop:
		// Gemini says STOP for the end of a turn and for a stop sequence alike.
		out.StopReason = llm.StopEndTurn
	case genai.FinishReasonMaxTokens:
		out.StopReason = llm.StopMaxTokens
	}
	if len(out.ToolUses) > 0 {
		out.StopReason = llm.StopToolUse
	}
	return out, nil
}

// Embed uses batchEmbedContents (genai's EmbedContent on the Gemini API). Gemini reports
// no token count for embeddings, so Usage stays zero.
func (c *geminiClient) Embed(ctx context.Context, req llm.EmbedRequest) (*llm.EmbedResponse, error) {
	if len(req.Texts) == 0 {
		return &llm.EmbedResponse{}, nil
	}
	contents := make([]*genai.Content, len(req.Texts))
	for i, t := range req.Texts {
		contents[i] = genai.NewContentFromText(t, genai.RoleUser)
	}
	cfg := &genai.EmbedContentConfig{}
	if req.Dimensions > 0 {
		d := int32(min(req.Dimensions, 1<<31-1))
		cfg.OutputDimensionality = &d
	}
	var res *genai.EmbedContentResponse
	err := c.t.attempt(ctx, nil, func(ctx context.Context) error {
		var err error
		res, err = c.models.EmbedContent(ctx, req.Model, contents, cfg)
		return err
	})
	if err != nil {
		return nil, err
	}
	if res == nil || len(res.Embeddings) != len(req.Texts) {
		n := 0
		if res != nil {
			n = len(res.Embeddings)
		}
		return nil, c.t.invalid("answer has %d embeddings for %d texts", n, len(req.Texts))
	}
	out := &llm.EmbedResponse{Vectors: make([][]float32, len(res.Embeddings))}
	for i, e := range res.Embeddings {
		if e == nil || len(e.Values) == 0 {
			return nil, c.t.invalid("embedding %d is empty", i)
		}
		out.Vectors[i] = e.Values
	}
	return out, nil
}
