package server

import (
	"context"
	"log/slog"

	"github.com/google/uuid"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	tflog "github.com/thefold/thefold/pkg/logging"
)

const requestIDHeader = "x-request-id"

// requestID takes the caller's x-request-id (the gateway sets one per HTTP request) or makes
// one, stores it for the logger and returns it in the response header.
func requestID(ctx context.Context) context.Context {
	id := ""
	// The one key's values, not FromIncomingContext's copy of all the metadata.
	if v := metadata.ValueFromIncomingContext(ctx, requestIDHeader); len(v) > 0 && len(v[0]) <= 128 {
		id = v[0]
	}
	if id == "" {
		id = uuid.NewString()
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs(requestIDHeader, id))
	return tflog.WithRequestID(ctx, id)
}

func requestIDUnary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(requestID(ctx), req)
	}
}

func requestIDStream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, &wrappedStream{ServerStream: ss, ctx: requestID(ss.Context())})
	}
}

type wrappedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (w *wrappedStream) Context() context.Context { return w.ctx }

// slogAdapter lets go-grpc-middleware's logging interceptor write through our slog logger.
func slogAdapter(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}
