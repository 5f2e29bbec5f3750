package service

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/thefold/thefold/pkg/fakellm"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/ai/internal/engine"
)

// streamReply reads a StreamComplete stream to its end: its messages, and the error it
// ended with (nil when it ended after its done message).
func streamReply(ctx context.Context, c aiv1.AIServiceClient, req *aiv1.StreamCompleteRequest) ([]*aiv1.StreamCompleteResponse, error) {
	s, err := c.StreamComplete(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []*aiv1.StreamCompleteResponse
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}

// checkShape checks a finished stream's order: the model on the first message only, text
// deltas, then tool calls, then done last; what was streamed is what done holds. It
// returns the text deltas and done.
func checkShape(t *testing.T, msgs []*aiv1.StreamCompleteResponse) ([]string, *aiv1.CompleteResponse) {
	t.Helper()
	if len(msgs) == 0 {
		t.Fatal("no messages")
	}
	done := msgs[len(msgs)-1].GetDone()
	if done == nil {
		t.Fatalf("last message %v is not done", msgs[len(msgs)-1])
	}
	var text []string
	var tools []*aiv1.ToolUse
	for i, m := range msgs {
		if (i == 0) != (m.Model != "") {
			t.Errorf("message %d has model %q; want it on the first only", i, m.Model)
		}
		switch ev := m.Event.(type) {
		case *aiv1.StreamCompleteResponse_TextDelta:
			if len(tools) > 0 {
				t.Errorf("message %d: text after a tool call", i)
			}
			text = append(text, ev.TextDelta)
		case *aiv1.StreamCompleteResponse_ToolUse:
			tools = append(tools, ev.ToolUse)
		case *aiv1.StreamCompleteResponse_Done:
			if i != len(msgs)-1 {
				t.Errorf("done at %d of %d", i, len(msgs))
			}
		default:
			t.Errorf("message %d has no event", i)
		}
	}
	if msgs[0].Model != done.GetUsage().GetModel() {
		t.Errorf("first message names %q, the usage %q", msgs[0].Model, done.GetUsage().GetModel())
	}
	if got := strings.Join(text, ""); got != done.Content {
		t.Errorf("streamed text %q, done has %q", got, done.Content)
	}
	if diff := cmp.Diff(done.ToolUses, tools, protocmp.Transform()); diff != "" {
		t.Errorf("streamed tool calls differ from done's (-done +streamed):\n%s", diff)
	}
	return text, done
}

func userText(s string) *aiv1.ChatMessage {
	return &aiv1.ChatMessage{Role: aiv1.MessageRole_MESSAGE_ROLE_USER, Content: s}
}

func readFileTool(t *testing.T) *aiv1.Tool {
	schema, err := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}})
	if err != nil {
		t.Fatal(err)
	}
	return &aiv1.Tool{Name: "read_file", Description: "reads a file", InputSchema: schema}
}

// StreamComplete through each provider family's streaming SDK call: the text arrives in
// pieces, the tool call once complete, and done is what Complete returns for the same
// answer; both calls are in the ledger at the same price.
func TestStreamComplete(t *testing.T) {
	t.Parallel()
	reply := fakellm.Response{
		Text:      "Let me read go.mod to find the module name.",
		ToolCalls: []fakellm.ToolCall{{Name: "read_file", Input: json.RawMessage(`{"path":"go.mod"}`)}},
		ChunkSize: 5, Times: 2,
	}
	for _, prov := range []string{"anthropic", "openai", "gemini"} {
		t.Run(prov, func(t *testing.T) {
			t.Parallel()
			script := scriptFor(prov, reply)
			script.MinCacheTokens = 1 << 30 // the second call must not read the first's prefix
			e := newAIEnv(t, script, aiEnvOptions{provider: prov})
			sreq := &aiv1.StreamCompleteRequest{System: "Be brief.", Messages: []*aiv1.ChatMessage{userText("What is the module name?")},
				Tools: []*aiv1.Tool{readFileTool(t)}, MaxTokens: 300}
			msgs, err := streamReply(e.alice, e.ai, sreq)
			if err != nil {
				t.Fatal(err)
			}
			text, done := checkShape(t, msgs)
			if len(text) != (len(reply.Text)+4)/5 {
				t.Errorf("%d text deltas, want the scripted %d", len(text), (len(reply.Text)+4)/5)
			}
			if done.StopReason != aiv1.StopReason_STOP_REASON_TOOL_USE || len(done.ToolUses) != 1 ||
				done.ToolUses[0].Input.Fields["path"].GetStringValue() != "go.mod" || done.Usage.GetCostMicros() <= 0 {
				t.Errorf("done %v", done)
			}
			whole, err := e.ai.Complete(e.alice, &aiv1.CompleteRequest{System: sreq.System, Messages: sreq.Messages, Tools: sreq.Tools, MaxTokens: sreq.MaxTokens})
			if err != nil {
				t.Fatal(err)
			}
			ignore := protocmp.IgnoreFields(&aiv1.ToolUse{}, "id") // fakellm numbers each answer's calls
			if prov == "gemini" {
				ignore = protocmp.IgnoreFields(&aiv1.ToolUse{}) // Gemini's ids are the client's numbering
			}
			if diff := cmp.Diff(whole, done, protocmp.Transform(), ignore, protocmp.IgnoreFields(&aiv1.CompleteResponse{}, "usage")); diff != "" {
				t.Errorf("done differs from Complete's answer (-complete +done):\n%s", diff)
			}
			if diff := cmp.Diff(whole.Usage, done.Usage, protocmp.Transform(), protocmp.IgnoreFields(whole.Usage, "latency")); diff != "" {
				t.Errorf("usage differs (-complete +done):\n%s", diff)
			}
			reqs := e.fake.Requests()
			if len(reqs) != 2 || !reqs[0].Stream || reqs[1].Stream {
				t.Fatalf("fakellm requests %+v: want one streamed, one whole", reqs)
			}
			recs, err := e.reg.ListUsageRecords(e.admin, &aiv1.ListUsageRecordsRequest{PageSize: 10})
			if err != nil {
				t.Fatal(err)
			}
			rpcs := map[string]int64{}
			for _, r := range recs.Records {
				if r.Outcome != aiv1.CallOutcome_CALL_OUTCOME_OK || r.Phase != aiv1.CallPhase_CALL_PHASE_COMPLETION {
					t.Errorf("ledger record %v", r)
				}
				rpcs[r.Rpc] = r.Usage.GetCostMicros()
			}
			if len(rpcs) != 2 || rpcs["StreamComplete"] != rpcs["Complete"] || rpcs["StreamComplete"] != done.Usage.CostMicros {
				t.Errorf("ledger costs by RPC %v, done %d", rpcs, done.Usage.CostMicros)
			}
		})
	}
}

// A retried request_id streams the recorded answer — one text message, the tool calls,
// done — without calling the model again, and the ledger counts the call once; the same id
// for another request is refused.
func TestStreamCompleteRequestID(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{{
		Text: "Reading the file now.", ToolCalls: []fakellm.ToolCall{{Name: "read_file", Input: json.RawMessage(`{"path":"a.go"}`)}}, ChunkSize: 4,
	}}}, aiEnvOptions{provider: "anthropic"})
	req := &aiv1.StreamCompleteRequest{RequestId: "stream-1", Messages: []*aiv1.ChatMessage{userText("read a.go")}, Tools: []*aiv1.Tool{readFileTool(t)}}
	first, err := streamReply(e.alice, e.ai, req)
	if err != nil {
		t.Fatal(err)
	}
	text, done := checkShape(t, first)
	if len(text) < 2 {
		t.Fatalf("the first answer was not streamed in pieces: %q", text)
	}
	again, err := streamReply(e.alice, e.ai, req)
	if err != nil {
		t.Fatal(err)
	}
	text, redone := checkShape(t, again)
	if len(again) != 3 || len(text) != 1 || again[1].GetToolUse() == nil {
		t.Errorf("retry streamed %v, want one text message, the tool call and done", again)
	}
	if !proto.Equal(done, redone) {
		t.Errorf("retry's done %v, first %v", redone, done)
	}
	if n := len(e.fake.Requests()); n != 1 {
		t.Errorf("the model was called %d times", n)
	}
	usage, err := e.reg.GetUsage(e.admin, &aiv1.GetUsageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if usage.Total.GetCalls() != 1 || usage.Total.GetCostMicros() != done.Usage.CostMicros {
		t.Errorf("ledger: %d calls costing %d, want 1 costing %d", usage.Total.GetCalls(), usage.Total.GetCostMicros(), done.Usage.CostMicros)
	}
	other := proto.Clone(req).(*aiv1.StreamCompleteRequest)
	other.Messages = []*aiv1.ChatMessage{userText("read b.go")}
	_, err = streamReply(e.alice, e.ai, other)
	grpctest.WantInvalid(t, err, "request_id")
	// Complete's answer under an id is not StreamComplete's.
	_, err = e.ai.Complete(e.alice, &aiv1.CompleteRequest{RequestId: "stream-1", Messages: req.Messages, Tools: req.Tools})
	grpctest.WantInvalid(t, err, "request_id")
}

// A model that fails before the first delta falls over to the next model, which streams
// (and is named on the first message); one that breaks off after a delta ends the call:
// no retry, no other model, since the caller holds part of the reply.
func TestStreamCompleteFallback(t *testing.T) {
	t.Parallel()
	choice := &aiv1.ModelChoice{Complexity: 5, Tags: []string{"coding"}}
	t.Run("before the first delta", func(t *testing.T) {
		t.Parallel()
		e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{
			{Error: &fakellm.Error{Status: 500}, Times: 3}, // MaxAttempts is 3 in newAIEnv
			{Text: "From the fallback.", ChunkSize: 4},
		}}, aiEnvOptions{provider: "anthropic"})
		msgs, err := streamReply(e.alice, e.ai, &aiv1.StreamCompleteRequest{Model: choice, Messages: []*aiv1.ChatMessage{userText("hi")}})
		if err != nil {
			t.Fatal(err)
		}
		_, done := checkShape(t, msgs)
		reqs := e.fake.Requests()
		if len(reqs) != 4 || reqs[0].Model == reqs[3].Model || msgs[0].Model != reqs[3].Model {
			t.Fatalf("%d requests (first %s, last %s), stream names %s", len(reqs), reqs[0].Model, reqs[len(reqs)-1].Model, msgs[0].Model)
		}
		if done.Content != "From the fallback." || done.Usage.Calls != 4 {
			t.Errorf("done %v", done)
		}
	})
	t.Run("after the first delta", func(t *testing.T) {
		t.Parallel()
		e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{
			{Text: "This reply breaks off.", ChunkSize: 4, BreakAfter: 1},
			{Text: "never sent", RepeatLast: true},
		}}, aiEnvOptions{provider: "anthropic"})
		msgs, err := streamReply(e.alice, e.ai, &aiv1.StreamCompleteRequest{Model: choice, Messages: []*aiv1.ChatMessage{userText("hi")}})
		grpctest.WantCode(t, err, codes.Unavailable, "provider anthropic broke off the reply")
		if len(msgs) != 1 || msgs[0].GetTextDelta() != "This" || msgs[0].Model == "" {
			t.Errorf("streamed %v before the error, want the one delta with the model", msgs)
		}
		if n := len(e.fake.Requests()); n != 1 {
			t.Errorf("%d model calls, want 1: no retry and no fallback after a delta", n)
		}
		recs, err := e.reg.ListUsageRecords(e.admin, &aiv1.ListUsageRecordsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs.Records) != 1 || recs.Records[0].Outcome != aiv1.CallOutcome_CALL_OUTCOME_PROVIDER_ERROR || recs.Records[0].Usage.GetCalls() != 1 {
			t.Errorf("ledger %v", recs.Records)
		}
	})
}

// The daily spend limit holds for streams as for Complete: refused before any model call.
func TestStreamCompleteSpendLimit(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{{Text: "x"}}}, aiEnvOptions{provider: "anthropic",
		cfg: func(c *engine.Config) { c.DailySpendLimitMicros = 1_000_000 }})
	spend(t, e, "alice", 1_000_000, time.Now())
	_, err := streamReply(e.alice, e.ai, &aiv1.StreamCompleteRequest{Messages: []*aiv1.ChatMessage{userText("hi")}})
	grpctest.WantCode(t, err, codes.ResourceExhausted, "daily AI spend limit")
	if n := len(e.fake.Requests()); n != 0 {
		t.Errorf("%d model calls over the limit", n)
	}
}

// A tiny real PNG (1×1), and a JPEG's first bytes: what http.DetectContentType recognises.
var (
	pngBytes  = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde")
	jpegBytes = []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01")
)

func imageMessage(mediaType string, data []byte) *aiv1.ChatMessage {
	return &aiv1.ChatMessage{Role: aiv1.MessageRole_MESSAGE_ROLE_USER, Blocks: []*aiv1.ContentBlock{
		{Block: &aiv1.ContentBlock_Text{Text: "What does this show?"}},
		{Block: &aiv1.ContentBlock_Image{Image: &aiv1.Image{MediaType: mediaType, Data: data}}},
	}}
}

// An image reaches a model that takes images (the registry's supports_vision); a model
// that does not gets a line saying an image was left out, never the picture.
func TestImagesAndVision(t *testing.T) {
	t.Parallel()
	t.Run("vision model", func(t *testing.T) {
		t.Parallel()
		e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{{Text: "A red pixel."}}}, aiEnvOptions{provider: "anthropic"})
		msgs, err := streamReply(e.alice, e.ai, &aiv1.StreamCompleteRequest{Model: &aiv1.ModelChoice{Model: "claude-sonnet-4-5"},
			Messages: []*aiv1.ChatMessage{imageMessage("image/png", pngBytes)}})
		if err != nil {
			t.Fatal(err)
		}
		checkShape(t, msgs)
		body := string(e.fake.Requests()[0].Body)
		if !strings.Contains(body, `"type":"image"`) || !strings.Contains(body, `"media_type":"image/png"`) || strings.Contains(body, "left out") {
			t.Errorf("request body %s: want the image block", body)
		}
	})
	t.Run("model without vision", func(t *testing.T) {
		t.Parallel()
		e := newAIEnv(t, &fakellm.Script{OpenAI: []fakellm.Response{{Text: "I cannot see it."}}},
			aiEnvOptions{provider: "ollama", cfg: func(c *engine.Config) { c.APIKey = "" }})
		_, err := e.ai.Complete(e.alice, &aiv1.CompleteRequest{Model: &aiv1.ModelChoice{Model: "llama3.1:8b"},
			Messages: []*aiv1.ChatMessage{imageMessage("image/jpeg", jpegBytes)}})
		if err != nil {
			t.Fatal(err)
		}
		body := string(e.fake.Requests()[0].Body)
		want := "[An image (image/jpeg, 12 bytes) was left out here: model llama3.1:8b does not take images.]"
		if !strings.Contains(body, want) || strings.Contains(body, "image_url") {
			t.Errorf("request body %s: want the note %q and no image", body, want)
		}
	})
}

// StreamComplete's request is CompleteRequest's fields without json_schema, by name and
// type (not number: StreamCompleteRequest numbers them without a gap): asCompleteRequest
// relies on it.
func TestStreamCompleteRequestIsACompleteRequest(t *testing.T) {
	t.Parallel()
	sf := (&aiv1.StreamCompleteRequest{}).ProtoReflect().Descriptor().Fields()
	cf := (&aiv1.CompleteRequest{}).ProtoReflect().Descriptor().Fields()
	if sf.Len() != cf.Len()-1 || cf.ByName("json_schema") == nil {
		t.Errorf("StreamCompleteRequest has %d fields, CompleteRequest %d: want all but json_schema", sf.Len(), cf.Len())
	}
	for i := range sf.Len() {
		s := sf.Get(i)
		c := cf.ByName(s.Name())
		if c == nil || c.Kind() != s.Kind() || c.Cardinality() != s.Cardinality() ||
			c.HasPresence() != s.HasPresence() || (s.Kind() == protoreflect.MessageKind && c.Message().FullName() != s.Message().FullName()) {
			t.Errorf("StreamCompleteRequest.%s has no identical CompleteRequest field", s.Name())
		}
	}
	temp := 0.5
	in := &aiv1.StreamCompleteRequest{RequestId: "r", System: "s", Messages: []*aiv1.ChatMessage{userText("x")},
		Model: &aiv1.ModelChoice{Model: "m"}, MaxTokens: 5, Temperature: &temp, StopSequences: []string{"END"},
		Attribution: &aiv1.Attribution{JobId: "j"}, Tools: []*aiv1.Tool{{Name: "t"}}, ToolChoice: &aiv1.ToolChoice{Mode: aiv1.ToolChoice_MODE_ANY}}
	want := &aiv1.CompleteRequest{RequestId: "r", System: "s", Messages: in.Messages, Model: in.Model, MaxTokens: 5, Temperature: &temp,
		StopSequences: []string{"END"}, Attribution: in.Attribution, Tools: in.Tools, ToolChoice: in.ToolChoice}
	if diff := cmp.Diff(want, asCompleteRequest(in), protocmp.Transform()); diff != "" {
		t.Errorf("asCompleteRequest (-want +got):\n%s", diff)
	}
}

// Malformed input to StreamComplete is INVALID_ARGUMENT naming the field, before any model
// is called: the same rules as Complete's, images included.
func TestStreamCompleteBadInput(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{}, aiEnvOptions{provider: "anthropic"})
	user := []*aiv1.ChatMessage{userText("x")}
	temp := 3.0
	cases := []struct {
		name  string
		req   *aiv1.StreamCompleteRequest
		field string
	}{
		{"no messages", &aiv1.StreamCompleteRequest{}, "messages"},
		{"request_id with spaces", &aiv1.StreamCompleteRequest{RequestId: "a b", Messages: user}, "request_id"},
		{"complexity 11", &aiv1.StreamCompleteRequest{Model: &aiv1.ModelChoice{Complexity: 11}, Messages: user}, "model.complexity"},
		{"last from the assistant", &aiv1.StreamCompleteRequest{Messages: []*aiv1.ChatMessage{{Role: aiv1.MessageRole_MESSAGE_ROLE_ASSISTANT, Content: "x"}}}, "messages[0].role"},
		{"no role", &aiv1.StreamCompleteRequest{Messages: []*aiv1.ChatMessage{{Content: "x"}}}, "messages[0].role"},
		{"empty message", &aiv1.StreamCompleteRequest{Messages: []*aiv1.ChatMessage{{Role: aiv1.MessageRole_MESSAGE_ROLE_USER}}}, "messages[0].content"},
		{"empty block", &aiv1.StreamCompleteRequest{Messages: []*aiv1.ChatMessage{{Role: aiv1.MessageRole_MESSAGE_ROLE_USER, Blocks: []*aiv1.ContentBlock{{}}}}}, "messages[0].blocks[0]"},
		{"temperature 3", &aiv1.StreamCompleteRequest{Temperature: &temp, Messages: user}, "temperature"},
		{"max_tokens negative", &aiv1.StreamCompleteRequest{MaxTokens: -1, Messages: user}, "max_tokens"},
		{"five stop sequences", &aiv1.StreamCompleteRequest{StopSequences: []string{"a", "b", "c", "d", "e"}, Messages: user}, "stop_sequences"},
		{"tool name", &aiv1.StreamCompleteRequest{Tools: []*aiv1.Tool{{Name: "read file"}}, Messages: user}, "tools[0].name"},
		{"tool without schema", &aiv1.StreamCompleteRequest{Tools: []*aiv1.Tool{{Name: "read_file"}}, Messages: user}, "tools[0].input_schema"},
		{"tool_choice names no tool", &aiv1.StreamCompleteRequest{Tools: []*aiv1.Tool{readFileTool(t)},
			ToolChoice: &aiv1.ToolChoice{Mode: aiv1.ToolChoice_MODE_TOOL, Name: "write_file"}, Messages: user}, "tool_choice.name"},
		{"tool_choice without tools", &aiv1.StreamCompleteRequest{ToolChoice: &aiv1.ToolChoice{Mode: aiv1.ToolChoice_MODE_ANY}, Messages: user}, "tool_choice"},
		{"tool result for no tool use", &aiv1.StreamCompleteRequest{Messages: []*aiv1.ChatMessage{{Role: aiv1.MessageRole_MESSAGE_ROLE_USER,
			Blocks: []*aiv1.ContentBlock{{Block: &aiv1.ContentBlock_ToolResult{ToolResult: &aiv1.ToolResult{ToolUseId: "nope"}}}}}}}, "messages[0].blocks[0].tool_result.tool_use_id"},
		{"attribution phase", &aiv1.StreamCompleteRequest{Attribution: &aiv1.Attribution{Phase: 99}, Messages: user}, "attribution.phase"},
		{"image media type", &aiv1.StreamCompleteRequest{Messages: []*aiv1.ChatMessage{imageMessage("image/bmp", pngBytes)}}, "messages[0].blocks[1].image.media_type"},
		{"image without data", &aiv1.StreamCompleteRequest{Messages: []*aiv1.ChatMessage{imageMessage("image/png", nil)}}, "messages[0].blocks[1].image.data"},
		{"image mislabelled", &aiv1.StreamCompleteRequest{Messages: []*aiv1.ChatMessage{imageMessage("image/png", jpegBytes)}}, "messages[0].blocks[1].image.data"},
		{"image too large", &aiv1.StreamCompleteRequest{Messages: []*aiv1.ChatMessage{imageMessage("image/png", append(pngBytes, make([]byte, 5<<20)...))}}, "messages[0].blocks[1].image.data"},
		{"image from the assistant", &aiv1.StreamCompleteRequest{Messages: []*aiv1.ChatMessage{
			{Role: aiv1.MessageRole_MESSAGE_ROLE_ASSISTANT, Blocks: imageMessage("image/png", pngBytes).Blocks}, userText("and?")}}, "messages[0].blocks[1].image"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := streamReply(e.alice, e.ai, tc.req)
			grpctest.WantInvalid(t, err, tc.field)
			if len(msgs) != 0 {
				t.Errorf("%d messages before the error", len(msgs))
			}
		})
	}
	if n := len(e.fake.Requests()); n != 0 {
		t.Fatalf("bad input reached the model %d times", n)
	}
}
