package provider_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/thefold/thefold/pkg/fakellm"
	"github.com/thefold/thefold/services/ai/internal/llm"
)

func TestToolRoundTrip(t *testing.T) {
	t.Parallel()
	tools := []llm.Tool{{
		Name:        "read_file",
		Description: "Reads a file of the repository.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
	}}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, f, f.script(
				fakellm.Response{ToolCalls: []fakellm.ToolCall{{Name: "read_file", Input: json.RawMessage(`{"path":"main.go"}`)}}},
				fakellm.Response{Text: "main.go has a main function."},
			), nil)
			msgs := []llm.Message{llm.UserText("What is in main.go?")}
			req := llm.Request{Model: "m", Messages: msgs, Tools: tools, ToolChoice: llm.ToolChoice{Mode: llm.ToolAny}}
			first, err := s.p.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if first.StopReason != llm.StopToolUse || len(first.ToolUses) != 1 {
				t.Fatalf("first = %+v, want one tool call", first)
			}
			call := first.ToolUses[0]
			if call.Kind != llm.BlockToolUse || call.ToolName != "read_file" || call.ToolUseID == "" || string(call.Input) != `{"path":"main.go"}` {
				t.Errorf("tool call = %+v", call)
			}
			req.Messages = append(msgs,
				llm.Message{Role: llm.RoleAssistant, Blocks: []llm.Block{call}},
				llm.Message{Role: llm.RoleUser, Blocks: []llm.Block{{Kind: llm.BlockToolResult, ToolUseID: call.ToolUseID, Text: "package main\nfunc main() {}"}}},
			)
			req.ToolChoice = llm.ToolChoice{}
			second, err := s.p.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if second.Text != "main.go has a main function." || second.StopReason != llm.StopEndTurn {
				t.Errorf("second = %+v", second)
			}
			bs := bodies(t, s.srv, f.endpoint)
			type check struct {
				body int
				path []any
				want any
			}
			var checks []check
			switch f.name {
			case "anthropic":
				checks = []check{
					{0, []any{"tools", 0, "name"}, "read_file"},
					{0, []any{"tools", 0, "input_schema", "required", 0}, "path"},
					{0, []any{"tool_choice", "type"}, "any"},
					{1, []any{"tool_choice", "type"}, "auto"},
					{1, []any{"messages", 1, "content", 0, "type"}, "tool_use"},
					{1, []any{"messages", 1, "content", 0, "input", "path"}, "main.go"},
					{1, []any{"messages", 2, "content", 0, "type"}, "tool_result"},
					{1, []any{"messages", 2, "content", 0, "tool_use_id"}, call.ToolUseID},
				}
			case "openai", "openai-compatible":
				checks = []check{
					{0, []any{"tools", 0, "function", "name"}, "read_file"},
					{0, []any{"tools", 0, "function", "parameters", "required", 0}, "path"},
					{0, []any{"tool_choice"}, "required"},
					{1, []any{"tool_choice"}, "auto"},
					{1, []any{"messages", 1, "tool_calls", 0, "id"}, call.ToolUseID},
					{1, []any{"messages", 1, "tool_calls", 0, "function", "arguments"}, `{"path":"main.go"}`},
					{1, []any{"messages", 2, "role"}, "tool"},
					{1, []any{"messages", 2, "tool_call_id"}, call.ToolUseID},
				}
			case "gemini":
				checks = []check{
					{0, []any{"tools", 0, "functionDeclarations", 0, "name"}, "read_file"},
					{0, []any{"tools", 0, "functionDeclarations", 0, "parametersJsonSchema", "required", 0}, "path"},
					{0, []any{"toolConfig", "functionCallingConfig", "mode"}, "ANY"},
					{1, []any{"contents", 1, "role"}, "model"},
					{1, []any{"contents", 1, "parts", 0, "functionCall", "name"}, "read_file"},
					// The response names the function: Gemini pairs calls and results by name.
					{1, []any{"contents", 2, "parts", 0, "functionResponse", "name"}, "read_file"},
					{1, []any{"contents", 2, "parts", 0, "functionResponse", "response", "output"}, "package main\nfunc main() {}"},
				}
			}
			for _, c := range checks {
				if got := dig(bs[c.body], c.path...); got != c.want {
					t.Errorf("request %d %v = %#v, want %#v", c.body+1, c.path, got, c.want)
				}
			}
		})
	}
}

// Gemini's calls have no id; the client numbers them after the calls already in the
// conversation, so they stay unique across turns.
func TestGeminiCallIDs(t *testing.T) {
	t.Parallel()
	f := families[3]
	s := start(t, f, f.script(fakellm.Response{ToolCalls: []fakellm.ToolCall{{Name: "a"}, {Name: "b"}}, RepeatLast: true}), nil)
	req := llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("go")}, Tools: []llm.Tool{{Name: "a"}, {Name: "b"}}}
	first, err := s.p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	var results []llm.Block
	for _, c := range first.ToolUses {
		ids = append(ids, c.ToolUseID)
		results = append(results, llm.Block{Kind: llm.BlockToolResult, ToolUseID: c.ToolUseID, Text: "done"})
	}
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Blocks: first.ToolUses}, llm.Message{Role: llm.RoleUser, Blocks: results})
	second, err := s.p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range second.ToolUses {
		ids = append(ids, c.ToolUseID)
	}
	if want := []string{"call_1", "call_2", "call_3", "call_4"}; !cmp.Equal(ids, want) {
		t.Errorf("ids = %v, want %v", ids, want)
	}
	if string(first.ToolUses[0].Input) != "{}" {
		t.Errorf("input of a call without args = %s, want {}", first.ToolUses[0].Input)
	}
}
