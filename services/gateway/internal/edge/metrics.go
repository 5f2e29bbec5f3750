package edge

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"

	tflog "github.com/thefold/thefold/pkg/logging"
)

// httpMetrics counts REST requests by route pattern (never the raw path: ids would make the
// label set unbounded), method and status, and logs one line per request.
type httpMetrics struct {
	log      *slog.Logger
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer, log *slog.Logger) (*httpMetrics, error) {
	m := &httpMetrics{
		log: log,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "http_server_requests_total",
			Help: "REST requests served by the gateway, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "http_server_request_seconds",
			Help:    "Time to serve a REST request (for streams, its whole life).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14),
		}, []string{"route", "method"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// middleware runs after grpc-gateway matched the route, so the pattern is known.
func (m *httpMetrics) middleware(next runtime.HandlerFunc) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next(rec, r, params)
		route := "unmatched"
		if pat, ok := runtime.HTTPPattern(r.Context()); ok {
			route = pat.String() // e.g. /v1/tasks/{id=*}
		}
		elapsed := time.Since(start)
		m.requests.WithLabelValues(route, r.Method, strconv.Itoa(rec.code)).Inc()
		m.latency.WithLabelValues(route, r.Method).Observe(elapsed.Seconds())
		m.log.InfoContext(tflog.WithRequestID(r.Context(), r.Header.Get("X-Request-Id")), "http request",
			"method", r.Method, "route", route, "code", rec.code, "duration_ms", float64(elapsed.Microseconds())/1000)
	}
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// Flush keeps server-streaming responses (Watch RPCs) flowing through the recorder.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
