package service

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/ai/internal/engine"
	"github.com/thefold/thefold/services/ai/internal/llm"
	"github.com/thefold/thefold/services/ai/internal/prompts"
)

// Complete is a generic chat completion, with tools or constrained to a JSON schema.
func (s *AIServer) Complete(ctx context.Context, req *aiv1.CompleteRequest) (*aiv1.CompleteResponse, error) {
	c, parse, err := chat("Complete", req, req)
	if err != nil {
		return nil, err
	}
	return engine.Run(ctx, s.eng, c, parse)
}

// chat is the model call of Complete and StreamComplete: req validated and translated, the
// engine's call (its request_id and fingerprint those of orig, the RPC's own request) and
// the parser of the reply into the response.
func chat(rpc string, orig proto.Message, req *aiv1.CompleteRequest) (*engine.Call, func(*llm.Response) (*aiv1.CompleteResponse, error), error) {
	if err := checkCommon(req.RequestId, req.Model, req.Attribution); err != nil {
		return nil, nil, err
	}
	lreq, err := completeRequest(req)
	if err != nil {
		return nil, nil, err
	}
	var schema *prompts.Schema
	if req.JsonSchema != nil {
		raw, err := protojson.Marshal(req.JsonSchema)
		if err != nil {
			return nil, nil, errs.Invalid("json_schema", "not JSON: %v", err)
		}
		if schema, err = prompts.CompileSchema(raw); err != nil {
			return nil, nil, errs.Invalid("json_schema", "%v", err)
		}
		lreq.JSON = true
		// The provider-neutral way to hold a model to a schema: state it, then validate.
		lreq.System = append(lreq.System, llm.Segment{Text: "Answer with one JSON object only, matching this JSON Schema:\n" + string(raw)})
	}
	c := &engine.Call{RPC: rpc, Phase: aiv1.CallPhase_CALL_PHASE_COMPLETION, RequestID: req.RequestId,
		Request: orig, Model: req.Model, Attribution: req.Attribution, Defaults: chatDefaults, LLM: lreq}
	if len(req.Tools) > 0 {
		c.Defaults.Tags, c.RequireTools = nil, true
	}
	p := &prompts.Prompt{RPC: rpc, System: lreq.System, Messages: lreq.Messages, Schema: schema}
	return c, func(r *llm.Response) (*aiv1.CompleteResponse, error) {
		out := &aiv1.CompleteResponse{Content: r.Text, StopReason: stopReason(r.StopReason)}
		for _, b := range r.ToolUses {
			tu, err := toolUse(b)
			if err != nil {
				return nil, err
			}
			out.ToolUses = append(out.ToolUses, tu)
		}
		if schema == nil {
			return out, nil
		}
		bad := func(err error) error {
			return repairable{&prompts.ParseError{RPC: rpc, Err: err}, p, r.StopReason == llm.StopMaxTokens}
		}
		raw, err := prompts.ExtractJSON(r.Text)
		if err != nil {
			return nil, bad(err)
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, bad(err)
		}
		if err := schema.Validate(v); err != nil {
			return nil, bad(err)
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, bad(fmt.Errorf("the answer is a JSON %T, not an object", v))
		}
		st, err := structpb.NewStruct(obj)
		if err != nil {
			return nil, bad(err)
		}
		out.Content, out.Json = string(raw), st
		return out, nil
	}, nil
}

// toolUse is a tool call of the model's reply as the API returns it.
func toolUse(b llm.Block) (*aiv1.ToolUse, error) {
	in := &structpb.Struct{}
	if len(b.Input) > 0 {
		if err := protojson.Unmarshal(b.Input, in); err != nil {
			return nil, fmt.Errorf("tool_use %s: input is not a JSON object: %w", b.ToolName, err)
		}
	}
	return &aiv1.ToolUse{Id: b.ToolUseID, Name: b.ToolName, Input: in}, nil
}

// completeRequest validates a CompleteRequest and translates it to the provider-neutral
// request.
func completeRequest(req *aiv1.CompleteRequest) (llm.Request, error) {
	var r llm.Request
	if err := checkBytes("system", req.System, maxText); err != nil {
		return r, err
	}
	if req.System != "" {
		r.System = []llm.Segment{{Text: req.System, Cache: true}}
	}
	if len(req.Messages) == 0 {
		return r, errs.Invalid("messages", "at least one message")
	}
	if len(req.Messages) > maxMessages {
		return r, errs.Invalid("messages", "at most %d messages", maxMessages)
	}
	toolIDs := map[string]bool{}
	for i, m := range req.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		msg, err := chatMessage(field, m, toolIDs)
		if err != nil {
			return r, err
		}
		r.Messages = append(r.Messages, msg)
	}
	if last := req.Messages[len(req.Messages)-1]; last.Role != aiv1.MessageRole_MESSAGE_ROLE_USER {
		return r, errs.Invalid(fmt.Sprintf("messages[%d].role", len(req.Messages)-1), "the last message must be the user's")
	}
	if req.MaxTokens < 0 || req.MaxTokens > maxOutputTokens {
		return r, errs.Invalid("max_tokens", "want 0 to %d, got %d", maxOutputTokens, req.MaxTokens)
	}
	r.MaxTokens = int(req.MaxTokens)
	if req.Temperature != nil {
		if t := *req.Temperature; t < 0 || t > 2 {
			return r, errs.Invalid("temperature", "want 0 to 2, got %g", t)
		}
		t := *req.Temperature
		r.Temperature = &t
	}
	if len(req.StopSequences) > 4 {
		return r, errs.Invalid("stop_sequences", "at most 4")
	}
	for i, s := range req.StopSequences {
		if s == "" || len(s) > 100 {
			return r, errs.Invalid(fmt.Sprintf("stop_sequences[%d]", i), "want 1 to 100 bytes")
		}
	}
	r.StopSequences = req.StopSequences
	if len(req.Tools) > 0 && req.JsonSchema != nil {
		return r, errs.Invalid("tools", "not together with json_schema")
	}
	if len(req.Tools) > maxTools {
		return r, errs.Invalid("tools", "at most %d tools", maxTools)
	}
	names := map[string]bool{}
	for i, t := range req.Tools {
		field := fmt.Sprintf("tools[%d]", i)
		if !toolNamePattern.MatchString(t.GetName()) {
			return r, errs.Invalid(field+".name", "want 1 to 64 letters, digits, '_' or '-', got %q", validate.Truncate(t.GetName(), 80))
		}
		if names[t.Name] {
			return r, errs.Invalid(field+".name", "%q is defined twice", t.Name)
		}
		names[t.Name] = true
		if t.InputSchema == nil {
			return r, errs.Invalid(field+".input_schema", "required (a JSON Schema object)")
		}
		raw, err := protojson.Marshal(t.InputSchema)
		if err != nil {
			return r, errs.Invalid(field+".input_schema", "not JSON: %v", err)
		}
		if _, err := prompts.CompileSchema(raw); err != nil {
			return r, errs.Invalid(field+".input_schema", "%v", err)
		}
		if err := checkBytes(field+".description", t.Description, maxDescription); err != nil {
			return r, err
		}
		r.Tools = append(r.Tools, llm.Tool{Name: t.Name, Description: t.Description, InputSchema: raw})
	}
	if tc := req.ToolChoice; tc != nil {
		if err := validate.Enum("tool_choice.mode", tc.Mode, true); err != nil {
			return r, err
		}
		switch tc.Mode {
		case aiv1.ToolChoice_MODE_ANY:
			r.ToolChoice = llm.ToolChoice{Mode: llm.ToolAny}
		case aiv1.ToolChoice_MODE_NONE:
			r.ToolChoice = llm.ToolChoice{Mode: llm.ToolNone}
		case aiv1.ToolChoice_MODE_TOOL:
			if !names[tc.Name] {
				return r, errs.Invalid("tool_choice.name", "%q is not one of tools", validate.Truncate(tc.Name, 80))
			}
			r.ToolChoice = llm.ToolChoice{Mode: llm.ToolNamed, Name: tc.Name}
		}
		if tc.Mode != aiv1.ToolChoice_MODE_UNSPECIFIED && len(req.Tools) == 0 {
			return r, errs.Invalid("tool_choice", "set without tools")
		}
	}
	return r, nil
}

func chatMessage(field string, m *aiv1.ChatMessage, toolIDs map[string]bool) (llm.Message, error) {
	var out llm.Message
	switch m.GetRole() {
	case aiv1.MessageRole_MESSAGE_ROLE_USER:
		out.Role = llm.RoleUser
	case aiv1.MessageRole_MESSAGE_ROLE_ASSISTANT:
		out.Role = llm.RoleAssistant
	default:
		return out, errs.Invalid(field+".role", "want MESSAGE_ROLE_USER or MESSAGE_ROLE_ASSISTANT")
	}
	if m.Content != "" && len(m.Blocks) > 0 {
		return out, errs.Invalid(field, "content and blocks are exclusive")
	}
	if m.Content == "" && len(m.Blocks) == 0 {
		return out, errs.Invalid(field+".content", "required (or blocks)")
	}
	if err := checkBytes(field+".content", m.Content, maxText); err != nil {
		return out, err
	}
	if m.Content != "" {
		out.Blocks = []llm.Block{llm.Text(m.Content)}
		return out, nil
	}
	for j, b := range m.Blocks {
		bf := fmt.Sprintf("%s.blocks[%d]", field, j)
		switch v := b.GetBlock().(type) {
		case *aiv1.ContentBlock_Text:
			if err := checkBytes(bf+".text", v.Text, maxText); err != nil {
				return out, err
			}
			out.Blocks = append(out.Blocks, llm.Text(v.Text))
		case *aiv1.ContentBlock_ToolUse:
			if out.Role != llm.RoleAssistant {
				return out, errs.Invalid(bf+".tool_use", "only in assistant messages")
			}
			if v.ToolUse.GetId() == "" || v.ToolUse.GetName() == "" {
				return out, errs.Invalid(bf+".tool_use", "id and name required")
			}
			in := []byte("{}")
			if v.ToolUse.Input != nil {
				var err error
				if in, err = protojson.Marshal(v.ToolUse.Input); err != nil {
					return out, errs.Invalid(bf+".tool_use.input", "not JSON: %v", err)
				}
			}
			toolIDs[v.ToolUse.Id] = true
			out.Blocks = append(out.Blocks, llm.Block{Kind: llm.BlockToolUse, ToolUseID: v.ToolUse.Id, ToolName: v.ToolUse.Name, Input: in})
		case *aiv1.ContentBlock_Image:
			if out.Role != llm.RoleUser {
				return out, errs.Invalid(bf+".image", "only in user messages")
			}
			img, err := checkImage(bf+".image", v.Image)
			if err != nil {
				return out, err
			}
			out.Blocks = append(out.Blocks, img)
		case *aiv1.ContentBlock_ToolResult:
			if out.Role != llm.RoleUser {
				return out, errs.Invalid(bf+".tool_result", "only in user messages")
			}
			if !toolIDs[v.ToolResult.GetToolUseId()] {
				return out, errs.Invalid(bf+".tool_result.tool_use_id", "%q answers no earlier tool_use", validate.Truncate(v.ToolResult.GetToolUseId(), 80))
			}
			if err := checkBytes(bf+".tool_result.content", v.ToolResult.GetContent(), maxText); err != nil {
				return out, err
			}
			out.Blocks = append(out.Blocks, llm.Block{Kind: llm.BlockToolResult, ToolUseID: v.ToolResult.ToolUseId,
				Text: v.ToolResult.Content, IsError: v.ToolResult.IsError})
		default:
			return out, errs.Invalid(bf, "empty block")
		}
	}
	return out, nil
}

// maxImageBytes is the largest picture a message may hold (the providers' own limit is
// about 5 MB per image).
const maxImageBytes = 5 << 20

// imageTypes are the media types every provider takes.
var imageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// checkImage validates an image block. Its bytes must be what media_type says: a provider
// refuses a mislabelled picture, and that is the caller's mistake, not the provider's.
func checkImage(field string, img *aiv1.Image) (llm.Block, error) {
	mt := img.GetMediaType()
	if !slices.Contains(imageTypes, mt) {
		return llm.Block{}, errs.Invalid(field+".media_type", "want one of %s, got %q", strings.Join(imageTypes, ", "), validate.Truncate(mt, 80))
	}
	switch n := len(img.GetData()); {
	case n == 0:
		return llm.Block{}, errs.Invalid(field+".data", "required (the encoded picture)")
	case n > maxImageBytes:
		return llm.Block{}, errs.Invalid(field+".data", "at most %d bytes (5 MiB), got %d", maxImageBytes, n)
	}
	if sniffed := http.DetectContentType(img.Data); sniffed != mt {
		return llm.Block{}, errs.Invalid(field+".data", "is not a %s picture: its bytes look like %s", mt, sniffed)
	}
	return llm.Image(mt, img.Data), nil
}

func stopReason(r llm.StopReason) aiv1.StopReason {
	switch r {
	case llm.StopEndTurn:
		return aiv1.StopReason_STOP_REASON_END_TURN
	case llm.StopMaxTokens:
		return aiv1.StopReason_STOP_REASON_MAX_TOKENS
	case llm.StopSequence:
		return aiv1.StopReason_STOP_REASON_STOP_SEQUENCE
	case llm.StopToolUse:
		return aiv1.StopReason_STOP_REASON_TOOL_USE
	}
	return aiv1.StopReason_STOP_REASON_UNSPECIFIED
}

// checkOrderable validates PlanTaskOrder's tasks: unique ids, known blocked_by links (ids
// outside the list are tasks already done and are ignored), no cycle.
func checkOrderable(tasks []*aiv1.OrderableTask) error {
	if len(tasks) == 0 {
		return errs.Invalid("tasks", "at least one task")
	}
	if len(tasks) > maxTasks {
		return errs.Invalid("tasks", "at most %d tasks", maxTasks)
	}
	ids := map[string]int{}
	for i, t := range tasks {
		field := fmt.Sprintf("tasks[%d]", i)
		if t.GetId() == "" {
			return errs.Invalid(field+".id", "required")
		}
		if len(t.Id) > maxID {
			return errs.Invalid(field+".id", "at most %d bytes", maxID)
		}
		if _, dup := ids[t.Id]; dup {
			return errs.Invalid(field+".id", "%q is listed twice", t.Id)
		}
		ids[t.Id] = i
		if _, err := validate.RequiredText(field+".title", t.Title, maxTitle); err != nil {
			return err
		}
		if err := checkBytes(field+".description", t.Description, maxDescription); err != nil {
			return err
		}
		if err := validate.Enum(field+".priority", t.Priority, true); err != nil {
			return err
		}
		if t.Complexity < 0 || t.Complexity > 10 {
			return errs.Invalid(field+".complexity", "want 0 to 10, got %d", t.Complexity)
		}
	}
	// A cycle among the listed tasks has no order.
	state := make([]int8, len(tasks))
	var visit func(i int) bool
	visit = func(i int) bool {
		state[i] = 1
		for _, b := range tasks[i].BlockedBy {
			j, ok := ids[b]
			if !ok {
				continue
			}
			if state[j] == 1 || (state[j] == 0 && !visit(j)) {
				return false
			}
		}
		state[i] = 2
		return true
	}
	for i := range tasks {
		if state[i] == 0 && !visit(i) {
			return errs.Invalid("tasks", "blocked_by links form a cycle through task %q", tasks[i].Id)
		}
	}
	return nil
}
