// Package edge is the gateway's REST edge: grpc-gateway handlers for every public RPC of
// every service, each dialing its service, with the caller's Authorization header forwarded
// as gRPC metadata; Watch routes as NDJSON or server-sent events; plus /openapi.json,
// /healthz, /readyz, and the inbound hooks of Slack, Discord and GitHub (hooks.go).
package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/contracts"
	"github.com/thefold/thefold/pkg/gen/openapi"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/validate"
	"github.com/thefold/thefold/services/gateway/internal/console"
)

// Services lists the services the edge fronts.
func Services() []string {
	out := make([]string, 0, len(contracts.All))
	for _, c := range contracts.All {
		out = append(out, c.Service)
	}
	return out
}

// New returns the edge handler. conns has a client connection for each service in
// Services(); the caller owns them. Request metrics are registered on reg.
func New(ctx context.Context, log *slog.Logger, reg prometheus.Registerer, conns map[string]*grpc.ClientConn, lim Limits, opts ...Option) (http.Handler, error) {
	if err := lim.Validate(); err != nil {
		return nil, fmt.Errorf("edge: %w", err)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	obs, err := newObserver(reg, log)
	if err != nil {
		return nil, fmt.Errorf("edge: metrics: %w", err)
	}
	muxOpts := []runtime.ServeMuxOption{
		runtime.WithMiddlewares(nameRoute),
		runtime.WithErrorHandler(errorHandler),
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &jsonMarshaler{runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
		}}),
		runtime.WithIncomingHeaderMatcher(forwardHeader),
		runtime.WithOutgoingHeaderMatcher(returnHeader),
	}
	rt := &routes{all: runtime.NewServeMux(muxOpts...), byPrefix: map[string]*runtime.ServeMux{}}
	own := map[string]*runtime.ServeMux{}
	for _, c := range contracts.All {
		conn, ok := conns[c.Service]
		if !ok {
			return nil, fmt.Errorf("edge: no connection for service %s", c.Service)
		}
		own[c.Service] = runtime.NewServeMux(muxOpts...)
		for _, reg := range c.Handlers {
			for _, mux := range []*runtime.ServeMux{rt.all, own[c.Service]} {
				if err := reg(ctx, mux, conn); err != nil {
					return nil, fmt.Errorf("edge: register %s: %w", c.Service, err)
				}
			}
		}
	}
	for prefix, svc := range routePrefixes(openapi.Spec, contracts.All) {
		rt.byPrefix[prefix] = own[svc]
	}

	root := http.NewServeMux()
	root.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	root.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		var down []string
		for svc, conn := range conns {
			resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				down = append(down, svc)
			}
		}
		if len(down) > 0 {
			http.Error(w, "not ready: "+strings.Join(down, ", "), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	root.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openapi.Spec)
	})
	for _, hr := range hookRoutes {
		root.Handle(hr.path, &hook{route: hr.path, kind: hr.kind, headers: hr.headers,
			chat: agentv1.NewChatServiceClient(conns["agent"]), signer: o.hookSigner, log: log})
	}
	root.Handle(githubHookPath, &githubHook{events: agentv1.NewRepoEventServiceClient(conns["agent"]), signer: o.hookSigner, log: log})
	root.Handle(linearHookPath, &linearHook{linear: agentv1.NewLinearServiceClient(conns["agent"]), signer: o.hookSigner, log: log})
	con, err := console.New(conns["gateway"], func(w http.ResponseWriter, r *http.Request, err error) {
		errorHandler(r.Context(), nil, nil, w, r, err)
	})
	if err != nil {
		return nil, fmt.Errorf("edge: console: %w", err)
	}
	for pattern, h := range con.Routes() {
		root.Handle(pattern, h)
	}
	root.Handle("/", rt)
	front := &front{root: root, routes: rt}

	// Outermost first:
	//   streamDeadlines – must see the connection's own writer (see there);
	//   observe         – the span, metrics and log line cover everything below;
	//   withRequestID   – every answer below, errors included, carries the id;
	//   securityHeaders – likewise;
	//   cors            – a preflight is answered before anything asks for credentials, and
	//                     every answer below (a 429 too) is readable by an allowed page;
	//   rateLimit       – over budget is refused before any work;
	//   guard           – refuses what must not reach grpc-gateway;
	//   forwardClient   – the services see the client's address as the edge established it;
	//   serverSentEvents, then the routes.
	return streamDeadlines(obs.observe(withRequestID(securityHeaders(cors(lim.CORSOrigins,
		rateLimit(lim.RateLimits, guard(lim, forwardClient(lim.RateLimits.TrustedProxies, serverSentEvents(front))))))))), nil
}

// jsonMarshaler is grpc-gateway's JSONPb, except that a message's JSON is the answer's
// bytes as protojson makes them: JSONPb.Marshal copies them into a growing buffer first.
type jsonMarshaler struct{ runtime.JSONPb }

func (m *jsonMarshaler) Marshal(v any) ([]byte, error) {
	if p, ok := v.(proto.Message); ok {
		return m.MarshalOptions.Marshal(p)
	}
	return m.JSONPb.Marshal(v)
}

// front sends a request for a service's route (/v1/…) straight to routes, and everything
// else (the edge's own routes, the console's, and paths the root mux would redirect or
// refuse) through the root mux. For a clean /v1/ path the root mux can only pick its "/"
// route, and getting there costs it a tree walk and about five allocations per request:
// the answer is the same without it.
type front struct {
	root   *http.ServeMux
	routes *routes
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if r.Method != http.MethodConnect && r.RequestURI != "*" && r.URL.RawPath == "" && strings.HasPrefix(p, "/v1/") &&
		cleanPath(p) == p && !needsEscape(p) {
		f.routes.ServeHTTP(w, r)
		return
	}
	f.root.ServeHTTP(w, r)
}

// cleanPath is net/http's canonical form of a request path (its ServeMux redirects a
// request whose path differs from it): path.Clean, keeping a trailing slash.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		if len(p) == len(np)+1 && strings.HasPrefix(p, np) {
			np = p
		} else {
			np += "/"
		}
	}
	return np
}

// needsEscape reports whether p has a byte net/url escapes in a path (the root mux matches
// and cleans the escaped form): anything but letters, digits, "-_.~" and "$&+,/:;=@".
func needsEscape(p string) bool {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-_.~$&+,/:;=@", c) >= 0:
		default:
			return true
		}
	}
	return false
}

// routes hands a request to the grpc-gateway mux of the service that owns its path's first
// two segments (/v1/tasks/… and /v1/tasks:… are the tasks service's). grpc-gateway tries a
// request against its routes one after another, with an allocation or two for each route
// that does not match: with one mux for every service, a GetTask was tried against some
// 45 other GET routes first, which made a fifth of the edge's own allocations. A path under
// no known prefix goes to the mux with every route, so every answer (a 404, a 405) is the
// one a single mux would give.
type routes struct {
	all      *runtime.ServeMux
	byPrefix map[string]*runtime.ServeMux
}

func (rt *routes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if mux, ok := rt.byPrefix[pathPrefix(r.URL.Path)]; ok {
		mux.ServeHTTP(w, r)
		return
	}
	rt.all.ServeHTTP(w, r)
}

// pathPrefix is the first two segments of path without a custom method: "/v1/tasks" for
// /v1/tasks/x, /v1/tasks:batchCreate and /v1/tasks; "" when there are not two.
func pathPrefix(path string) string {
	if !strings.HasPrefix(path, "/") {
		return ""
	}
	first, rest, ok := strings.Cut(path[1:], "/")
	if !ok || first == "" {
		return ""
	}
	if i := strings.IndexAny(rest, "/:"); i >= 0 {
		rest = rest[:i]
	}
	if rest == "" {
		return ""
	}
	return path[:1+len(first)+1+len(rest)]
}

// routePrefixes maps the path prefixes of the REST routes to the service that serves them,
// read from the OpenAPI document (generated from the same REST mapping as the handlers; an
// operation id is "<gRPC service>_<method>"). It returns nil — every request goes to the
// mux with every route — if the document has a route it cannot place: a variable in the
// first two segments, an operation of no contract, or a prefix two services share.
func routePrefixes(spec []byte, all []contracts.Contract) map[string]string {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"` // path → method → operation
	}
	if err := json.Unmarshal(spec, &doc); err != nil || len(doc.Paths) == 0 {
		return nil
	}
	serviceOf := map[string]string{} // gRPC service's short name → TheFold service
	for _, c := range all {
		for _, sd := range c.Services {
			short := sd.ServiceName[strings.LastIndexByte(sd.ServiceName, '.')+1:]
			if prev, dup := serviceOf[short]; dup && prev != c.Service {
				return nil
			}
			serviceOf[short] = c.Service
		}
	}
	out := map[string]string{}
	for path, ops := range doc.Paths {
		prefix := pathPrefix(path)
		if prefix == "" || strings.Contains(prefix, "{") {
			return nil
		}
		for method, raw := range ops {
			var op struct {
				OperationID string `json:"operationId"`
			}
			switch method {
			case "get", "put", "post", "delete", "options", "head", "patch":
			default:
				continue // path-level parameters and extensions
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				return nil
			}
			grpcService, _, _ := strings.Cut(op.OperationID, "_")
			svc, ok := serviceOf[grpcService]
			if !ok {
				return nil
			}
			if prev, taken := out[prefix]; taken && prev != svc {
				return nil
			}
			out[prefix] = svc
		}
	}
	return out
}

// forwardHeader picks the HTTP headers grpc-gateway passes to the services as gRPC
// metadata: the request id, and Grpc-Metadata-* headers as grpc-gateway documents them.
// grpc-gateway forwards Authorization as "authorization" itself, and adds x-forwarded-for
// and x-forwarded-host. Its default also forwards the permanent HTTP headers (Accept,
// User-Agent, Cookie, a second copy of Authorization, …) as grpcgateway-*: no service reads
// them, and every interceptor that reads metadata copies all of it, on every hop.
func forwardHeader(key string) (string, bool) {
	if key == "X-Request-Id" {
		return "x-request-id", true
	}
	if strings.HasPrefix(key, runtime.MetadataHeaderPrefix) {
		return runtime.DefaultHeaderMatcher(key)
	}
	return "", false
}

// returnHeader picks the services' response metadata that becomes Grpc-Metadata-* response
// headers, as grpc-gateway documents: not content-type (application/grpc, the transport's)
// nor x-request-id (the edge's own X-Request-Id already carries it).
func returnHeader(key string) (string, bool) {
	switch key {
	case "content-type", "x-request-id":
		return "", false
	}
	return runtime.MetadataHeaderPrefix + key, true
}

// withRequestID gives every request an id (the caller's X-Request-Id when sensible: at most
// 128 bytes of printable ASCII, which gRPC metadata and log lines carry safely), echoed in
// the response and passed to the services, so one request can be followed in every log.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 128 || !validate.PrintableASCII(id, true) {
			id = uuid.NewString()
		}
		// One value, the one echoed, in the request and the response; one allocation for
		// both (each header gets its own full slice, so an Add to one never reaches the other).
		vals := []string{id, id}
		r.Header["X-Request-Id"] = vals[0:1:1]
		w.Header()["X-Request-Id"] = vals[1:2:2]
		next.ServeHTTP(w, r)
	})
}

// securityHeaderValues are the headers every API response carries, each value a full
// one-element slice: assigning them saves an allocation per header and request (Header.Set
// makes a new slice each time), an Add appends to a copy, and nothing writes into a
// header's values in place.
var securityHeaderValues = []struct {
	key string
	val []string
}{
	{"X-Content-Type-Options", []string{"nosniff"}},
	{"X-Frame-Options", []string{"DENY"}},
	{"Referrer-Policy", []string{"no-referrer"}},
	{"Cache-Control", []string{"no-store"}},
}

// securityHeaders sets the headers every API response should carry.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for _, sh := range securityHeaderValues {
			h[sh.key] = sh.val[:1:1]
		}
		next.ServeHTTP(w, r)
	})
}
