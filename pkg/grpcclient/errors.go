package grpcclient

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/validate"
)

// downstreamUnary marks every failed call as an errs.Downstream, so the calling service's
// error mapping (errs.ToStatus) never passes another service's status through as its own.
// A request this side could not even encode (a string that is not UTF-8, which proto refuses
// to marshal) is the caller's bad input instead: InvalidArgument naming the field.
func downstreamUnary() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil {
			return nil
		}
		if bad := unencodable(req, err); bad != nil {
			return bad
		}
		return errs.NewDownstream(method, err)
	}
}

func downstreamStream() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, errs.NewDownstream(method, err)
		}
		return &downstreamClientStream{ClientStream: s, method: method}, nil
	}
}

type downstreamClientStream struct {
	grpc.ClientStream
	method string
}

func (s *downstreamClientStream) wrap(m any, err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return err // io.EOF is the end of a stream, not a failure
	}
	if bad := unencodable(m, err); bad != nil {
		return bad
	}
	return errs.NewDownstream(s.method, err)
}

func (s *downstreamClientStream) SendMsg(m any) error { return s.wrap(m, s.ClientStream.SendMsg(m)) }
func (s *downstreamClientStream) RecvMsg(m any) error { return s.wrap(nil, s.ClientStream.RecvMsg(m)) }
func (s *downstreamClientStream) CloseSend() error    { return s.wrap(nil, s.ClientStream.CloseSend()) }

// unencodable returns InvalidArgument naming the bad string of req when err is grpc-go
// failing to marshal it, else nil.
func unencodable(req any, err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Internal || !strings.HasPrefix(st.Message(), "grpc: error while marshaling") {
		return nil
	}
	m, ok := req.(proto.Message)
	if !ok {
		return nil
	}
	return validate.Strings(m)
}

type failFastKey struct{}

// FailFast marks ctx so that its calls fail soon with UNAVAILABLE when the service is down,
// instead of waiting for it within their deadline (the default for calls between services,
// which absorbs a restart). The REST edge uses it: a person or a script waiting for an
// answer is better served by a quick 503 than by a hang until the deadline.
//
// Failing fast must not mean failing stale: after an outage the connection sits in
// TRANSIENT_FAILURE until its backoff (up to two minutes) ends, and every call would fail
// although the service is back. So a FailFast call first resets the backoff and waits up to
// failFastWait for the connection to become ready, then goes ahead without waiting further.
func FailFast(ctx context.Context) context.Context {
	return context.WithValue(ctx, failFastKey{}, true)
}

// failFastWait bounds how long a FailFast call waits for a connection: long enough to
// connect to a service that is up, short enough to answer "down" within about a second.
const failFastWait = 500 * time.Millisecond

func isFailFast(ctx context.Context) bool {
	v, _ := ctx.Value(failFastKey{}).(bool)
	return v
}

// awaitReady reconnects cc at once if it is not ready and waits up to failFastWait for it.
func awaitReady(ctx context.Context, cc *grpc.ClientConn) {
	s := cc.GetState()
	switch s {
	case connectivity.Ready, connectivity.Shutdown:
		return
	case connectivity.Idle:
		cc.Connect()
	case connectivity.TransientFailure:
		cc.ResetConnectBackoff()
	}
	wctx, cancel := context.WithTimeout(ctx, failFastWait)
	defer cancel()
	for s != connectivity.Ready && s != connectivity.Shutdown && cc.WaitForStateChange(wctx, s) {
		s = cc.GetState()
	}
}

// noWaitForReady is made once: an option value made per call is an allocation per call.
var noWaitForReady = grpc.WaitForReady(false)

// failFastUnary and failFastStream turn WaitForReady off for a FailFast context. The call
// options they see include the connection's defaults first, so the option added last wins.
func failFastUnary() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if isFailFast(ctx) {
			awaitReady(ctx, cc)
			opts = append(opts, noWaitForReady)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

func failFastStream() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if isFailFast(ctx) {
			awaitReady(ctx, cc)
			opts = append(opts, noWaitForReady)
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
}
