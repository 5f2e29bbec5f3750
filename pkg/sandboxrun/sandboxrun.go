// Package sandboxrun runs one command in a sandbox through SandboxService.RunCommand and
// gathers its streamed output and result, for the callers that want the whole answer rather
// than the stream.
package sandboxrun

import (
	"bytes"
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
)

// Result is a finished command: its result and the output kept.
type Result struct {
	*sandboxv1.CommandResult
	// Output is stdout and stderr interleaved as the command wrote them, up to the limit
	// Run was given.
	Output []byte
	// Stdout is stdout alone, up to the same limit.
	Stdout []byte
	// Dropped is set when output beyond the limit (or beyond the server's own cap) was
	// dropped.
	Dropped bool
}

// Passed reports whether the command exited 0 and was not killed for its timeout.
func (r *Result) Passed() bool { return r.GetExitCode() == 0 && !r.GetTimedOut() }

// Run runs req and keeps the first limit bytes of its output (and of its stdout). A stream
// that ends without a result is UNAVAILABLE: the command's fate is unknown.
func Run(ctx context.Context, c sandboxv1.SandboxServiceClient, req *sandboxv1.RunCommandRequest, limit int) (*Result, error) {
	stream, err := c.RunCommand(ctx, req)
	if err != nil {
		return nil, err
	}
	var out, stdout bytes.Buffer
	res := &Result{}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if o := msg.GetOutput(); o != nil {
			res.Dropped = keep(&out, o.GetData(), limit) || res.Dropped
			if o.GetStream() == sandboxv1.OutputStream_OUTPUT_STREAM_STDOUT {
				res.Dropped = keep(&stdout, o.GetData(), limit) || res.Dropped
			}
		}
		if r := msg.GetResult(); r != nil {
			res.CommandResult = r
		}
	}
	if res.CommandResult == nil {
		return nil, status.Error(codes.Unavailable, "the command's output ended without its result")
	}
	res.Dropped = res.Dropped || res.GetOutputTruncated()
	res.Output, res.Stdout = out.Bytes(), stdout.Bytes()
	return res, nil
}

// keep appends what of data fits under limit to b and reports whether some did not fit.
func keep(b *bytes.Buffer, data []byte, limit int) bool {
	room := limit - b.Len()
	if room <= 0 {
		return len(data) > 0
	}
	if len(data) > room {
		b.Write(data[:room])
		return true
	}
	b.Write(data)
	return false
}
