package server

import (
	"context"
	"errors"
	"fmt"
	"math"

	"net/netip"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/clientaddr"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/ratelimit"
)

// Defaults of the connection and message limits, used where Config leaves them zero (a
// Config made in code, as tests do). They stop abuse, not work:
//   - streams: a connection multiplexes every call of a client; the gateway's REST edge
//     and the agent hold one connection to each service for all their users, with up to
//     THEFOLD_<SVC>_MAX_WATCHES (1,024) watch streams on it, so the bound sits well above;
//   - receive: the largest requests are whole files and tar archives (sandbox WriteFile
//     up to its 10 MiB file limit, CreateSandbox and builder AnalyzeDependencies archives)
//     — 16 MiB takes them where gRPC's own 4 MiB did not;
//   - send: the agent accepts answers up to 64 MiB (a build with all its steps); files
//     and archives larger than that are streamed in 1 MiB chunks (github GetArchive).
const (
	DefaultMaxConcurrentStreams = 4096
	DefaultMaxRecvMsgBytes      = 16 << 20
	DefaultMaxSendMsgBytes      = 64 << 20
	// A client may ping at most every 10 s (grpc-go's clients never ping more often), also
	// without calls in flight: TheFold's connections are long-lived and mostly idle.
	DefaultKeepaliveMinTime = 10 * time.Second
	// A connection without calls for this long is closed (its client reconnects on the
	// next call); the server pings a silent connection every KeepaliveTime and closes it
	// when no answer comes within KeepaliveTimeout, so dead peers do not hold streams.
	DefaultMaxConnectionIdle = 30 * time.Minute
	DefaultKeepaliveTime     = 2 * time.Minute
	DefaultKeepaliveTimeout  = 20 * time.Second
)

// Limits are the gRPC server's connection, message and request limits. Zero values take
// the defaults above, except the request rates, where empty is no limit.
type Limits struct {
	// MaxConcurrentStreams bounds the concurrent streams of one client connection (the
	// gateway and the agent carry all their users on one).
	MaxConcurrentStreams uint32 `env:"THEFOLD_GRPC_MAX_CONCURRENT_STREAMS, default=4096"`
	// MaxRecvMsgBytes is the largest request message the server accepts; a larger one is
	// RESOURCE_EXHAUSTED.
	MaxRecvMsgBytes int `env:"THEFOLD_GRPC_MAX_RECV_MSG_BYTES, default=16777216"`
	// MaxSendMsgBytes is the largest answer message the server sends.
	MaxSendMsgBytes int `env:"THEFOLD_GRPC_MAX_SEND_MSG_BYTES, default=67108864"`
	// KeepaliveMinTime is how often a client may ping; one pinging more often is sent
	// GOAWAY ("too_many_pings").
	KeepaliveMinTime  time.Duration `env:"THEFOLD_GRPC_KEEPALIVE_MIN_TIME, default=10s"`
	MaxConnectionIdle time.Duration `env:"THEFOLD_GRPC_MAX_CONNECTION_IDLE, default=30m"`
	KeepaliveTime     time.Duration `env:"THEFOLD_GRPC_KEEPALIVE_TIME, default=2m"`
	KeepaliveTimeout  time.Duration `env:"THEFOLD_GRPC_KEEPALIVE_TIMEOUT, default=20s"`

	// Request budgets, as the REST edge's ("<n>/s", "<n>/m", "<n>/h"; "off" or empty is
	// none), each a token bucket with the burst beside it (0: twice the rate). A call, or
	// the start of a stream, spends one token of its caller's bucket:
	//   - RatePerUser: a person (auth.CallerKey: user tokens, sessions and API keys alike);
	//   - RatePerService: a service identity acting for an owner (the agent's and builder's
	//     jobs), keyed by service and owner apart from the owner's own bucket, and larger,
	//     so a person at their limit does not starve the jobs run for them; "off" exempts
	//     service identities;
	//   - RatePerAddress: calls without a principal (the gateway's login RPCs, reflection),
	//     by client address. Health checks are never limited (probes and the launcher).
	RatePerUser     string `env:"THEFOLD_GRPC_RATE_PER_USER, default=50/s"`
	BurstPerUser    int    `env:"THEFOLD_GRPC_BURST_PER_USER, default=200"`
	RatePerService  string `env:"THEFOLD_GRPC_RATE_PER_SERVICE, default=500/s"`
	BurstPerService int    `env:"THEFOLD_GRPC_BURST_PER_SERVICE, default=2000"`
	RatePerAddress  string `env:"THEFOLD_GRPC_RATE_PER_ADDRESS, default=50/s"`
	BurstPerAddress int    `env:"THEFOLD_GRPC_BURST_PER_ADDRESS, default=200"`
	// TrustedProxies are the peers whose x-forwarded-for is believed for the address of
	// an unauthenticated call: the gateway's REST edge forwards its clients' calls with
	// the client's address there (over loopback, or to the host's own address, which is
	// trusted as well). The right-most entry that is not itself trusted is the client.
	TrustedProxies []string `env:"THEFOLD_GRPC_TRUSTED_PROXIES, default=127.0.0.0/8,::1"`
}

// rates are the parsed budgets.
type rates struct {
	user, service, address ratelimit.Rate
	trusted                []netip.Prefix
}

func (l Limits) rates() (rates, error) {
	var r rates
	var errList []error
	for _, x := range []struct {
		name, spec, burstName string
		burst                 int
		dst                   *ratelimit.Rate
	}{
		{"THEFOLD_GRPC_RATE_PER_USER", l.RatePerUser, "THEFOLD_GRPC_BURST_PER_USER", l.BurstPerUser, &r.user},
		{"THEFOLD_GRPC_RATE_PER_SERVICE", l.RatePerService, "THEFOLD_GRPC_BURST_PER_SERVICE", l.BurstPerService, &r.service},
		{"THEFOLD_GRPC_RATE_PER_ADDRESS", l.RatePerAddress, "THEFOLD_GRPC_BURST_PER_ADDRESS", l.BurstPerAddress, &r.address},
	} {
		rate, err := ratelimit.ParseRate(x.spec)
		if err != nil {
			errList = append(errList, fmt.Errorf("%s: %w", x.name, err))
			continue
		}
		if x.burst < 0 {
			errList = append(errList, fmt.Errorf("%s: must not be negative, got %d", x.burstName, x.burst))
		} else if x.burst > 0 && !rate.Off() {
			rate.Burst = x.burst
		}
		*x.dst = rate
	}
	trusted, err := clientaddr.ParsePrefixes(l.TrustedProxies)
	if err != nil {
		errList = append(errList, fmt.Errorf("THEFOLD_GRPC_TRUSTED_PROXIES: %w", err))
	}
	r.trusted = trusted
	return r, errors.Join(errList...)
}

// Validate reports limits that cannot be parsed or would refuse everything.
func (l Limits) Validate() error {
	_, err := l.rates()
	errList := []error{err}
	for _, x := range []struct {
		name string
		v    int64
	}{
		{"THEFOLD_GRPC_MAX_RECV_MSG_BYTES", int64(l.MaxRecvMsgBytes)},
		{"THEFOLD_GRPC_MAX_SEND_MSG_BYTES", int64(l.MaxSendMsgBytes)},
		{"THEFOLD_GRPC_KEEPALIVE_MIN_TIME", int64(l.KeepaliveMinTime)},
		{"THEFOLD_GRPC_MAX_CONNECTION_IDLE", int64(l.MaxConnectionIdle)},
		{"THEFOLD_GRPC_KEEPALIVE_TIME", int64(l.KeepaliveTime)},
		{"THEFOLD_GRPC_KEEPALIVE_TIMEOUT", int64(l.KeepaliveTimeout)},
	} {
		if x.v < 0 {
			errList = append(errList, fmt.Errorf("%s: must not be negative (0 is the default)", x.name))
		}
	}
	return errors.Join(errList...)
}

func orDefault[T int | uint32 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// serverOptions are the grpc.ServerOptions of l.
func (l Limits) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(orDefault(l.MaxConcurrentStreams, DefaultMaxConcurrentStreams)),
		grpc.MaxRecvMsgSize(orDefault(l.MaxRecvMsgBytes, DefaultMaxRecvMsgBytes)),
		grpc.MaxSendMsgSize(orDefault(l.MaxSendMsgBytes, DefaultMaxSendMsgBytes)),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             orDefault(l.KeepaliveMinTime, DefaultKeepaliveMinTime),
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: orDefault(l.MaxConnectionIdle, DefaultMaxConnectionIdle),
			Time:              orDefault(l.KeepaliveTime, DefaultKeepaliveTime),
			Timeout:           orDefault(l.KeepaliveTimeout, DefaultKeepaliveTimeout),
		}),
	}
}

// limiter spends calls from their caller's bucket.
type limiter struct {
	users, services, addresses *ratelimit.Buckets
	trusted                    []netip.Prefix
	now                        func() time.Time
}

func newLimiter(r rates) *limiter {
	return &limiter{
		users: ratelimit.NewBuckets(r.user), services: ratelimit.NewBuckets(r.service),
		addresses: ratelimit.NewBuckets(r.address), trusted: r.trusted, now: time.Now,
	}
}

// allow spends one token of the bucket of ctx's caller, or returns ResourceExhausted with
// a RetryInfo detail saying when the next call would be allowed.
func (l *limiter) allow(ctx context.Context, method string) error {
	if strings.HasPrefix(method, "/grpc.health.v1.Health/") {
		return nil
	}
	b, key, who := l.addresses, "", "client address"
	if p, ok := auth.FromContext(ctx); ok {
		key = auth.CallerKey(p)
		if p.Service != "" {
			b, who = l.services, "service acting for this user"
		} else {
			b, who = l.users, "user"
		}
	} else {
		key = clientAddress(ctx, l.trusted)
	}
	ok, retry := b.Take(key, l.now())
	if ok {
		return nil
	}
	secs := max(int(math.Ceil(retry.Seconds())), 1)
	return errs.ResourceExhausted(retry, "rate limit exceeded for this %s (%s); retry in %ds", who, b.Rate(), secs)
}

func (l *limiter) unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := l.allow(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
}

// stream spends one token when a stream starts; its messages are not counted (a watch's
// events are the server's, and its length is bounded by the watch slots).
func (l *limiter) stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if err := l.allow(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		return h(srv, ss)
	}
}

// clientAddress is the address of ctx's client: its peer's, or, when the peer is a trusted
// proxy, the right-most x-forwarded-for entry that is not one. Whatever a client writes
// into the header is believed only as far as trusted proxies vouch for it. A peer on this
// host (its address is the connection's own, as when the gateway's REST edge calls its own
// gRPC port by the host's name) is trusted like one in trusted: it is the edge, which
// forwards its clients' addresses, or a process that could as well call over loopback.
func clientAddress(ctx context.Context, trusted []netip.Prefix) string {
	host, local := "", ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		host = clientaddr.Host(p.Addr.String())
		if p.LocalAddr != nil {
			local = clientaddr.Host(p.LocalAddr.String())
		}
	}
	return clientaddr.FromChain(host, metadata.ValueFromIncomingContext(ctx, "x-forwarded-for"), func(a string) bool {
		return (a != "" && a == local) || clientaddr.InPrefixes(a, trusted)
	})
}
