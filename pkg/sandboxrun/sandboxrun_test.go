package sandboxrun_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/sandboxrun"
)

// streams answers RunCommand with the chunks of its script, then the result unless noResult.
type streams struct {
	sandboxv1.UnimplementedSandboxServiceServer
	chunks   []*sandboxv1.OutputChunk
	result   *sandboxv1.CommandResult
	noResult bool
}

func (s *streams) RunCommand(_ *sandboxv1.RunCommandRequest, stream grpc.ServerStreamingServer[sandboxv1.RunCommandResponse]) error {
	for _, c := range s.chunks {
		if err := stream.Send(&sandboxv1.RunCommandResponse{Event: &sandboxv1.RunCommandResponse_Output{Output: c}}); err != nil {
			return err
		}
	}
	if s.noResult {
		return nil
	}
	return stream.Send(&sandboxv1.RunCommandResponse{Event: &sandboxv1.RunCommandResponse_Result{Result: s.result}})
}

// client serves s and returns a client with a caller's context.
func client(t *testing.T, s *streams) (context.Context, sandboxv1.SandboxServiceClient) {
	e := grpctest.Start(t, func(g *grpc.Server) { sandboxv1.RegisterSandboxServiceServer(g, s) })
	return e.Context(t, "user-alice"), sandboxv1.NewSandboxServiceClient(e.Conn)
}

func chunk(stream sandboxv1.OutputStream, data string) *sandboxv1.OutputChunk {
	return &sandboxv1.OutputChunk{Stream: stream, Data: []byte(data)}
}

func TestRun(t *testing.T) {
	out, errOut := sandboxv1.OutputStream_OUTPUT_STREAM_STDOUT, sandboxv1.OutputStream_OUTPUT_STREAM_STDERR
	cases := []struct {
		name            string
		s               *streams
		limit           int
		output, stdout  string
		dropped, passed bool
	}{
		{"interleaved", &streams{chunks: []*sandboxv1.OutputChunk{chunk(out, "a"), chunk(errOut, "b"), chunk(out, "c")},
			result: &sandboxv1.CommandResult{}}, 10, "abc", "ac", false, true},
		{"over the limit", &streams{chunks: []*sandboxv1.OutputChunk{chunk(out, "abcd"), chunk(out, "ef")},
			result: &sandboxv1.CommandResult{ExitCode: 1}}, 5, "abcde", "abcde", true, false},
		{"the server's cap", &streams{chunks: []*sandboxv1.OutputChunk{chunk(out, "x")},
			result: &sandboxv1.CommandResult{OutputTruncated: true, TimedOut: true}}, 5, "x", "x", true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, c := client(t, tc.s)
			res, err := sandboxrun.Run(ctx, c, &sandboxv1.RunCommandRequest{SandboxId: "sb", Command: []string{"true"}}, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Output) != tc.output || string(res.Stdout) != tc.stdout || res.Dropped != tc.dropped || res.Passed() != tc.passed {
				t.Fatalf("output %q stdout %q dropped %v passed %v", res.Output, res.Stdout, res.Dropped, res.Passed())
			}
		})
	}
	ctx, c := client(t, &streams{noResult: true})
	_, err := sandboxrun.Run(ctx, c, &sandboxv1.RunCommandRequest{}, 10)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a stream without a result: %v", err)
	}
}
