package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestRecordsCarryTraceAndRequestIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := New(&buf, "tasks", slog.LevelInfo)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	ctx = WithRequestID(ctx, "req-1")
	log.With("k", "v").InfoContext(ctx, "hello")
	log.DebugContext(ctx, "hidden")

	var rec map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &rec); err != nil {
		t.Fatalf("one JSON record expected, got %q: %v", buf.String(), err)
	}
	for k, want := range map[string]string{"service": "tasks", "trace_id": tid.String(), "span_id": sid.String(), "request_id": "req-1", "k": "v", "msg": "hello"} {
		if rec[k] != want {
			t.Errorf("%s = %v, want %s", k, rec[k], want)
		}
	}
}

func TestParseLevel(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]slog.Level{"debug": slog.LevelDebug, "WARN": slog.LevelWarn, "error": slog.LevelError, "bogus": slog.LevelInfo, "": slog.LevelInfo} {
		if got := ParseLevel(in); got != want {
			t.Errorf("ParseLevel(%q) = %v, want %v", in, got, want)
		}
	}
}
