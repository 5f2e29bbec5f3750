// Package breaker keeps one circuit breaker (sony/gobreaker) per service the agent calls
// and applies it to every call on that service's connection, as gRPC client
// interceptors. A service that keeps failing — unavailable, timing out, failing
// internally — opens its breaker: further calls fail at once with an *OpenError (an
// UNAVAILABLE status) until the breaker lets a trial call through, so the task loop pauses
// the job with that reason instead of spending its attempts on a service that is down.
// Answers that say the call was wrong (INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION…)
// show the service up and count as successes, and so does the ai service's
// MODEL_OUTPUT_INVALID (a model that answered badly, not a service that is down); a call
// the caller cancelled counts as neither.
package breaker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/errs"
)

// Config is one breaker's rule: it opens after Failures failed calls in a row and stays
// open for Open before it lets one trial call through (half-open).
type Config struct {
	Failures uint32
	Open     time.Duration
}

// Defaults are the breakers of the task loop's services.
var Defaults = map[string]Config{
	"ai":      {Failures: 5, Open: 60 * time.Second},
	"builder": {Failures: 5, Open: 60 * time.Second},
	"github":  {Failures: 5, Open: 60 * time.Second},
	"sandbox": {Failures: 3, Open: 30 * time.Second},
	// Beyond the seed's four: memory (it embeds through ai), tasks and skills.
	"memory": {Failures: 5, Open: 60 * time.Second},
	"tasks":  {Failures: 5, Open: 60 * time.Second},
	"skills": {Failures: 5, Open: 60 * time.Second},
}

// ParseConfigs reads breaker rules as "service=failures/open,…" (e.g.
// "ai=5/60s,sandbox=3/30s") over base: services not named keep base's rule.
func ParseConfigs(spec string, base map[string]Config) (map[string]Config, error) {
	out := make(map[string]Config, len(base))
	for k, v := range base {
		out[k] = v
	}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		svc, rule, ok := strings.Cut(part, "=")
		failures, open, ok2 := strings.Cut(rule, "/")
		n, err := strconv.ParseUint(strings.TrimSpace(failures), 10, 32)
		d, derr := time.ParseDuration(strings.TrimSpace(open))
		if !ok || !ok2 || err != nil || derr != nil || n == 0 || d <= 0 || strings.TrimSpace(svc) == "" {
			return nil, fmt.Errorf("breaker rule %q: want service=failures/duration, e.g. ai=5/60s", part)
		}
		out[strings.TrimSpace(svc)] = Config{Failures: uint32(n), Open: d}
	}
	return out, nil
}

// OpenError is the error of a call the breaker refused: the service failed too often.
type OpenError struct {
	// Service is the breaker's service ("ai").
	Service string
	// Failures is its rule's failure count.
	Failures uint32
	// RetryAt is when the breaker lets a trial call through.
	RetryAt time.Time
}

func (e *OpenError) Error() string {
	return fmt.Sprintf("circuit breaker for %s is open after %d failed calls in a row; retry after %s",
		e.Service, e.Failures, e.RetryAt.UTC().Format(time.RFC3339))
}

// Reason is the ErrorInfo reason an OpenError's status carries.
const Reason = "CIRCUIT_OPEN"

const domain = "agent.thefold"

// GRPCStatus makes an OpenError an UNAVAILABLE status with an ErrorInfo (reason
// CIRCUIT_OPEN, the service and retry time in its metadata) and a RetryInfo, so it is
// still recognised (Open) after interceptors have wrapped it.
func (e *OpenError) GRPCStatus() *status.Status {
	st := status.New(codes.Unavailable, e.Error())
	if d, err := st.WithDetails(
		&errdetails.ErrorInfo{Reason: Reason, Domain: domain, Metadata: map[string]string{
			"service": e.Service, "failures": strconv.FormatUint(uint64(e.Failures), 10), "retry_at": e.RetryAt.UTC().Format(time.RFC3339Nano)}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(max(time.Until(e.RetryAt), 0))},
	); err == nil {
		return d
	}
	return st
}

// Open returns the OpenError err is, or carries as a status (wrapped by other
// interceptors on its way), and whether it is one.
func Open(err error) (*OpenError, bool) {
	var oe *OpenError
	if errors.As(err, &oe) {
		return oe, true
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return nil, false
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.Reason != Reason || info.Domain != domain {
			continue
		}
		at, _ := time.Parse(time.RFC3339Nano, info.Metadata["retry_at"])
		n, _ := strconv.ParseUint(info.Metadata["failures"], 10, 32)
		return &OpenError{Service: info.Metadata["service"], Failures: uint32(n), RetryAt: at}, true
	}
	return nil, false
}

// Set holds one breaker per service.
type Set struct {
	breakers map[string]*entry
}

type entry struct {
	cb  *gobreaker.CircuitBreaker[struct{}]
	cfg Config
	// opened is when the breaker last opened (Unix nanoseconds).
	opened atomic.Int64
}

// retryAt is when the open breaker lets a trial call through.
func (e *entry) retryAt() time.Time { return time.Unix(0, e.opened.Load()).Add(e.cfg.Open) }

// New makes the breakers of cfg (a service without a Config has none: its calls pass).
// onChange, when set, is told each state change ("closed", "open", "half-open").
func New(cfg map[string]Config, onChange func(service, from, to string)) *Set {
	s := &Set{breakers: map[string]*entry{}}
	for name, c := range cfg {
		e := &entry{cfg: c}
		e.cb = gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
			Name:    name,
			Timeout: c.Open,
			ReadyToTrip: func(n gobreaker.Counts) bool {
				return n.ConsecutiveFailures >= c.Failures
			},
			IsExcluded:   func(err error) bool { return errors.Is(err, errCanceled) },
			IsSuccessful: func(err error) bool { return err == nil || !failure(err) },
			OnStateChange: func(name string, from, to gobreaker.State) {
				if to == gobreaker.StateOpen {
					e.opened.Store(time.Now().UnixNano())
				}
				if onChange != nil {
					onChange(name, from.String(), to.String())
				}
			},
		})
		s.breakers[name] = e
	}
	return s
}

// State is the service's breaker state ("closed", "open", "half-open"), "" without one.
func (s *Set) State(service string) string {
	if e := s.breakers[service]; e != nil {
		return e.cb.State().String()
	}
	return ""
}

var errCanceled = errors.New("breaker: call canceled by the caller")

// failure reports whether err says the service is failing rather than the call wrong.
func failure(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable:
		// The ai service answered that the model's output could not be used: the service
		// and the provider are up, so it is no outage (the caller counts it as a failed
		// attempt of its own).
		return !errs.ModelOutputInvalid(err)
	case codes.DeadlineExceeded, codes.Internal, codes.Unknown, codes.DataLoss:
		return true
	}
	return false
}

// do runs call through service's breaker.
func (s *Set) do(ctx context.Context, service string, call func() error) error {
	e := s.breakers[service]
	if e == nil {
		return call()
	}
	var callErr error
	_, err := e.cb.Execute(func() (struct{}, error) {
		callErr = call()
		if callErr != nil && ctx.Err() != nil && status.Code(callErr) == codes.Canceled {
			return struct{}{}, errCanceled
		}
		return struct{}{}, callErr
	})
	switch {
	case errors.Is(err, gobreaker.ErrOpenState), errors.Is(err, gobreaker.ErrTooManyRequests):
		return &OpenError{Service: service, Failures: e.cfg.Failures, RetryAt: e.retryAt()}
	case err != nil:
		return callErr
	}
	return nil
}

// Unary is the client interceptor of service's connection.
func (s *Set) Unary(service string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return s.do(ctx, service, func() error { return invoker(ctx, method, req, reply, cc, opts...) })
	}
}

// Stream is the stream interceptor of service's connection. A stream counts by its
// opening: a stream the service refuses to open is a failure; how it ends later is the
// caller's to judge.
func (s *Set) Stream(service string) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		var cs grpc.ClientStream
		err := s.do(ctx, service, func() error {
			var err error
			cs, err = streamer(ctx, desc, cc, method, opts...)
			return err
		})
		return cs, err
	}
}

// DialOptions are the interceptors of service's connection, for grpcclient.
func (s *Set) DialOptions(service string) []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(s.Unary(service)), grpc.WithChainStreamInterceptor(s.Stream(service))}
}
