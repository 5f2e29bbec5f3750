package llm

import "context"

// Delta is a piece of a reply as the model writes it: the next text, or a tool call
// (a BlockToolUse) once its input is complete. Exactly one of the two is set.
type Delta struct {
	Text    string
	ToolUse *Block
}

// Streamer is a Provider that delivers the reply while the model writes it. Stream calls
// on with each delta, in order, never concurrently and never after it returned, and
// returns the whole response, the one Complete would have returned: Text is the text
// deltas joined, ToolUses are the tool calls delivered. An error from on ends the call
// and is returned as it is (it is the caller's, not the provider's). Thinking is not
// delivered, as it is not part of Response.Text.
type Streamer interface {
	Stream(ctx context.Context, req Request, on func(Delta) error) (*Response, error)
}

// Stream calls p's Stream when p streams; a provider that cannot answers whole, and the
// reply is delivered at once: its text as one delta, then each tool call.
func Stream(ctx context.Context, p Provider, req Request, on func(Delta) error) (*Response, error) {
	if s, ok := p.(Streamer); ok {
		return s.Stream(ctx, req, on)
	}
	resp, err := p.Complete(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := Deliver(resp, on); err != nil {
		return nil, err
	}
	return resp, nil
}

// Deliver hands a whole reply to on the way a stream would have: its text as one delta
// (none when empty), then each tool call.
func Deliver(resp *Response, on func(Delta) error) error {
	if resp.Text != "" {
		if err := on(Delta{Text: resp.Text}); err != nil {
			return err
		}
	}
	for i := range resp.ToolUses {
		tu := resp.ToolUses[i]
		if err := on(Delta{ToolUse: &tu}); err != nil {
			return err
		}
	}
	return nil
}
