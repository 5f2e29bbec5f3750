package service

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"

	"github.com/thefold/thefold/services/ai/internal/engine"
	"github.com/thefold/thefold/services/ai/internal/llm"
)

// StreamComplete is Complete with the reply streamed while the model writes it: the same
// validation, model selection and fallbacks, spend limit, ledger and request_id as
// Complete (one path, chat), the engine handing each delta to the stream as it arrives.
func (s *AIServer) StreamComplete(req *aiv1.StreamCompleteRequest, stream grpc.ServerStreamingServer[aiv1.StreamCompleteResponse]) error {
	c, parse, err := chat("StreamComplete", req, asCompleteRequest(req))
	if err != nil {
		return err
	}
	w := &replyWriter{send: stream.Send}
	c.Stream = w.delta
	out, err := engine.Run(stream.Context(), s.eng, c, parse)
	if err != nil {
		return err
	}
	return w.done(out)
}

// asCompleteRequest is req as the CompleteRequest it is: its fields are CompleteRequest's
// without json_schema, by name and type (TestStreamCompleteRequestIsACompleteRequest holds
// the contract to it), so both RPCs validate alike and name the same fields.
func asCompleteRequest(req *aiv1.StreamCompleteRequest) *aiv1.CompleteRequest {
	out := &aiv1.CompleteRequest{}
	dst := out.ProtoReflect()
	fields := dst.Descriptor().Fields()
	req.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		to := fields.ByName(fd.Name())
		if to == nil {
			panic(fmt.Sprintf("StreamCompleteRequest.%s has no CompleteRequest field", fd.Name()))
		}
		dst.Set(to, v)
		return true
	})
	return out
}

// replyWriter sends a streamed reply: the model's name on the first message, then text
// deltas and tool calls as the engine delivers them, then the whole response.
type replyWriter struct {
	send func(*aiv1.StreamCompleteResponse) error
	sent int
}

func (w *replyWriter) delta(model string, d llm.Delta) error {
	if d.ToolUse != nil {
		tu, err := toolUse(*d.ToolUse)
		if err != nil {
			return err
		}
		return w.write(model, &aiv1.StreamCompleteResponse{Event: &aiv1.StreamCompleteResponse_ToolUse{ToolUse: tu}})
	}
	return w.write(model, &aiv1.StreamCompleteResponse{Event: &aiv1.StreamCompleteResponse_TextDelta{TextDelta: d.Text}})
}

func (w *replyWriter) write(model string, m *aiv1.StreamCompleteResponse) error {
	if w.sent == 0 {
		m.Model = model
	}
	w.sent++
	return w.send(m)
}

// done ends the stream with the whole response. When nothing was streamed, the answer
// came whole — recorded under the request_id, or a reply of neither text nor tool calls —
// and goes out as a stream would have had it: its text as one message, its tool calls,
// then the response.
func (w *replyWriter) done(out *aiv1.CompleteResponse) error {
	model := out.GetUsage().GetModel()
	if w.sent == 0 {
		if out.Content != "" {
			if err := w.write(model, &aiv1.StreamCompleteResponse{Event: &aiv1.StreamCompleteResponse_TextDelta{TextDelta: out.Content}}); err != nil {
				return err
			}
		}
		for _, tu := range out.ToolUses {
			if err := w.write(model, &aiv1.StreamCompleteResponse{Event: &aiv1.StreamCompleteResponse_ToolUse{ToolUse: tu}}); err != nil {
				return err
			}
		}
	}
	return w.write(model, &aiv1.StreamCompleteResponse{Event: &aiv1.StreamCompleteResponse_Done{Done: out}})
}
