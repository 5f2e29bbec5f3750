package edge

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/thefold/thefold/pkg/grpcclient"
	tflog "github.com/thefold/thefold/pkg/logging"
)

// tracerName names the edge's spans' instrumentation scope.
const tracerName = "github.com/thefold/thefold/services/gateway/internal/edge"

// observer traces every REST request (a server span, continuing the caller's W3C trace
// context, which the services' spans join), and for every request that reaches a service's
// route counts it by route pattern (never the raw path: ids would make the label set
// unbounded), method and status, times it, and logs one line.
//
// It replaces otelhttp, whose own layer was about 7% of the gateway's CPU per GetTask
// (semantic-convention attributes computed whether or not the span records, body and
// httpsnoop wrappers, a metrics pipeline with no meter provider behind it), and the separate
// status recorder of the metrics middleware: one exchange records the status for both.
type observer struct {
	log       *slog.Logger
	tracer    trace.Tracer
	spanStart []trace.SpanStartOption
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	// series holds the counter and histogram of each route, method and status seen, bound
	// to their labels: a request looks them up by one key instead of hashing its label
	// values into each vector (and formatting the status code) every time. It is bounded as
	// the vectors are: only requests that matched a route are counted.
	series sync.Map // seriesKey → *series
}

type seriesKey struct {
	route, method string
	code          int
}

type series struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// seriesFor returns the bound instruments of route, method and code.
func (o *observer) seriesFor(route, method string, code int) *series {
	k := seriesKey{route, method, code}
	if s, ok := o.series.Load(k); ok {
		return s.(*series)
	}
	s := &series{
		requests: o.requests.WithLabelValues(route, method, strconv.Itoa(code)),
		latency:  o.latency.WithLabelValues(route, method),
	}
	actual, _ := o.series.LoadOrStore(k, s)
	return actual.(*series)
}

func newObserver(reg prometheus.Registerer, log *slog.Logger) (*observer, error) {
	o := &observer{
		log: log,
		// The global provider delegates to the one telemetry.Setup installs, also when that
		// happens after this call.
		tracer:    otel.Tracer(tracerName),
		spanStart: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)},
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
	for _, c := range []prometheus.Collector{o.requests, o.latency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// exchange is one request as the edge's layers see it: observe creates it and every layer
// below writes through it, so the status is known whoever answered; nameRoute names its route.
type exchange struct {
	http.ResponseWriter
	code  int
	wrote bool
	route string // the grpc-gateway pattern it matched, "" for the edge's own routes
}

type exchangeKey struct{}

func (e *exchange) WriteHeader(code int) {
	if !e.wrote && code >= 200 {
		e.code, e.wrote = code, true
	}
	e.ResponseWriter.WriteHeader(code)
}

func (e *exchange) Write(p []byte) (int, error) {
	e.wrote = true
	return e.ResponseWriter.Write(p)
}

// Flush keeps server-streaming responses (Watch RPCs) flowing through the exchange.
func (e *exchange) Flush() {
	if f, ok := e.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (e *exchange) Unwrap() http.ResponseWriter { return e.ResponseWriter }

// observe is the outermost layer but for streamDeadlines: its span covers everything the
// edge does, and the context it passes on carries the span to the services' calls.
func (o *observer) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx := otel.GetTextMapPropagator().Extract(r.Context(), traceHeaders(r.Header))
		ctx, span := o.tracer.Start(ctx, r.Method, o.spanStart...)
		defer span.End()
		if span.IsRecording() {
			attrs := append(make([]attribute.KeyValue, 0, 4), semconv.HTTPRequestMethodKey.String(r.Method), semconv.URLPath(r.URL.Path))
			if ua := r.UserAgent(); ua != "" {
				attrs = append(attrs, semconv.UserAgentOriginal(ua))
			}
			if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
				attrs = append(attrs, semconv.NetworkPeerAddress(host))
			}
			span.SetAttributes(attrs...)
		}
		ex := &exchange{ResponseWriter: w, code: http.StatusOK}
		// The request's calls fail fast: a service that is down answers 503 at once instead
		// of after the whole deadline (internal calls keep waiting for a restarting peer).
		// Marked here, where the request gets its one new context anyway.
		next.ServeHTTP(ex, r.WithContext(grpcclient.FailFast(context.WithValue(ctx, exchangeKey{}, ex))))
		elapsed := time.Since(start)

		if span.IsRecording() {
			if ex.route != "" {
				span.SetName(r.Method + " " + ex.route)
				span.SetAttributes(semconv.HTTPRoute(ex.route), semconv.HTTPResponseStatusCode(ex.code))
			} else {
				span.SetAttributes(semconv.HTTPResponseStatusCode(ex.code))
			}
			if ex.code >= 500 {
				span.SetStatus(otelcodes.Error, http.StatusText(ex.code))
			}
		}
		if ex.route == "" {
			return // the edge's own routes and refusals: not a service's request
		}
		sr := o.seriesFor(ex.route, r.Method, ex.code)
		sr.requests.Inc()
		sr.latency.Observe(elapsed.Seconds())
		if o.log.Enabled(ctx, slog.LevelInfo) {
			o.log.LogAttrs(tflog.WithRequestID(ctx, r.Header.Get("X-Request-Id")), slog.LevelInfo, "http request",
				slog.String("method", r.Method), slog.String("route", ex.route), slog.Int("code", ex.code),
				slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000))
		}
	})
}

// nameRoute is the grpc-gateway middleware that names the exchange's route: it runs after
// the route matched, so the pattern is known (e.g. /v1/tasks/{id=*}). grpc-gateway wraps
// each route's handler in it separately, so the pattern is rendered once per route.
func nameRoute(next runtime.HandlerFunc) runtime.HandlerFunc {
	var route atomic.Pointer[string]
	return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
		if ex, ok := r.Context().Value(exchangeKey{}).(*exchange); ok {
			p := route.Load()
			if p == nil {
				s := "unmatched"
				if pat, ok := runtime.HTTPPattern(r.Context()); ok {
					s = pat.String()
				}
				p = &s
				route.Store(p)
			}
			ex.route = *p
		}
		next(w, r, params)
	}
}

// traceHeaders is the W3C propagators' view of the request's headers. HeaderCarrier
// canonicalizes the key of every Get ("traceparent" → "Traceparent"), an allocation for each
// of the three keys the propagators ask for on every request; those three are looked up
// by their canonical names here, anything else as HeaderCarrier does.
type traceHeaders http.Header

func (c traceHeaders) Get(key string) string {
	var vs []string
	switch key {
	case "traceparent":
		vs = c["Traceparent"]
	case "tracestate":
		vs = c["Tracestate"]
	case "baggage":
		vs = c["Baggage"]
	default:
		return propagation.HeaderCarrier(c).Get(key)
	}
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

func (c traceHeaders) Set(key, value string) { propagation.HeaderCarrier(c).Set(key, value) }

func (c traceHeaders) Keys() []string { return propagation.HeaderCarrier(c).Keys() }

// Values makes traceHeaders a ValuesGetter, as HeaderCarrier is (the baggage propagator
// reads every Baggage header through it).
func (c traceHeaders) Values(key string) []string {
	switch key {
	case "traceparent":
		return c["Traceparent"]
	case "tracestate":
		return c["Tracestate"]
	case "baggage":
		return c["Baggage"]
	}
	return propagation.HeaderCarrier(c).Values(key)
}
