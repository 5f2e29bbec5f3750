// Command gateway is TheFold's edge: the REST/JSON API for every public RPC (grpc-gateway,
// dialing each service), the merged OpenAPI document, and the AuthService over gRPC.
package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"google.golang.org/grpc"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/config"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/platform"
	"github.com/thefold/thefold/pkg/wait"
	"github.com/thefold/thefold/services/gateway/internal/authsvc"
	"github.com/thefold/thefold/services/gateway/internal/edge"
	"github.com/thefold/thefold/services/gateway/internal/mailer"
	"github.com/thefold/thefold/services/gateway/internal/store"
	"github.com/thefold/thefold/services/gateway/migrations"
)

// Config is the gateway's own configuration.
type Config struct {
	// HTTPAddr is where the REST edge (grpc-gateway, SSE, /openapi.json) listens; required.
	HTTPAddr string `env:"THEFOLD_HTTP_ADDR"`
	// The REST edge's limits: a slow or huge request must not hold a connection or memory.
	// The write timeout must exceed the longest unary call (grpcclient.DefaultTimeout);
	// Watch streams are exempt from it and from the read timeout.
	HTTPMaxBodyBytes      int64         `env:"THEFOLD_HTTP_MAX_BODY_BYTES, default=4194304"`
	HTTPReadHeaderTimeout time.Duration `env:"THEFOLD_HTTP_READ_HEADER_TIMEOUT, default=10s"`
	HTTPReadTimeout       time.Duration `env:"THEFOLD_HTTP_READ_TIMEOUT, default=30s"`
	HTTPWriteTimeout      time.Duration `env:"THEFOLD_HTTP_WRITE_TIMEOUT, default=60s"`
	HTTPIdleTimeout       time.Duration `env:"THEFOLD_HTTP_IDLE_TIMEOUT, default=120s"`

	// Request budgets of the REST edge, per user (the verified token's subject) and per
	// client address: "<n>/s", "<n>/m" or "<n>/h", "off" for none; bursts of BURST (0: twice
	// the per-second rate).
	HTTPRatePerUser     string `env:"THEFOLD_HTTP_RATE_PER_USER, default=30/s"`
	HTTPBurstPerUser    int    `env:"THEFOLD_HTTP_BURST_PER_USER, default=0"`
	HTTPRatePerAddress  string `env:"THEFOLD_HTTP_RATE_PER_ADDRESS, default=60/s"`
	HTTPBurstPerAddress int    `env:"THEFOLD_HTTP_BURST_PER_ADDRESS, default=0"`
	// Origins whose pages may call the REST API from a browser, comma-separated
	// scheme://host[:port] (exact; browsers send them so), or "*" alone for every origin
	// (then without credentials). Empty: no CORS headers.
	HTTPCORSOrigins []string `env:"THEFOLD_HTTP_CORS_ORIGINS"`
	// Reverse proxies in front of the edge (addresses or CIDR prefixes, comma-separated):
	// behind them the per-address budget keys on the client's address from X-Forwarded-For.
	HTTPTrustedProxies []string `env:"THEFOLD_HTTP_TRUSTED_PROXIES"`

	Identity authsvc.Config
	Mail     mailer.Config
}

// Validate reports a missing HTTP address and limits that are not positive.
func (c *Config) Validate() error {
	var errList []error
	if c.HTTPAddr == "" {
		errList = append(errList, errors.New("THEFOLD_HTTP_ADDR: required"))
	}
	if c.HTTPMaxBodyBytes <= 0 {
		errList = append(errList, errors.New("THEFOLD_HTTP_MAX_BODY_BYTES: must be positive"))
	}
	for name, d := range map[string]time.Duration{
		"THEFOLD_HTTP_READ_HEADER_TIMEOUT": c.HTTPReadHeaderTimeout, "THEFOLD_HTTP_READ_TIMEOUT": c.HTTPReadTimeout,
		"THEFOLD_HTTP_WRITE_TIMEOUT": c.HTTPWriteTimeout, "THEFOLD_HTTP_IDLE_TIMEOUT": c.HTTPIdleTimeout,
	} {
		if d <= 0 {
			errList = append(errList, fmt.Errorf("%s: must be positive, got %s", name, d))
		}
	}
	if _, err := c.rateLimits(nil); err != nil {
		errList = append(errList, err)
	}
	if err := (edge.Limits{CORSOrigins: c.HTTPCORSOrigins}).Validate(); err != nil {
		errList = append(errList, fmt.Errorf("THEFOLD_HTTP_CORS_ORIGINS: %w", err))
	}
	return errors.Join(errList...)
}

// rateLimits are the edge's request budgets, identifying users with v.
func (c *Config) rateLimits(v *auth.Verifier) (edge.RateLimits, error) {
	lim := edge.RateLimits{Verifier: v}
	var errList []error
	proxies, err := edge.ParseProxies(c.HTTPTrustedProxies)
	if err != nil {
		errList = append(errList, fmt.Errorf("THEFOLD_HTTP_TRUSTED_PROXIES: %w", err))
	}
	lim.TrustedProxies = proxies
	for _, r := range []struct {
		name, spec string
		burstName  string
		burst      int
		dst        *edge.Rate
	}{
		{"THEFOLD_HTTP_RATE_PER_USER", c.HTTPRatePerUser, "THEFOLD_HTTP_BURST_PER_USER", c.HTTPBurstPerUser, &lim.PerUser},
		{"THEFOLD_HTTP_RATE_PER_ADDRESS", c.HTTPRatePerAddress, "THEFOLD_HTTP_BURST_PER_ADDRESS", c.HTTPBurstPerAddress, &lim.PerAddress},
	} {
		rate, err := edge.ParseRate(r.spec)
		if err != nil {
			errList = append(errList, fmt.Errorf("%s: %w", r.name, err))
			continue
		}
		if r.burst < 0 {
			errList = append(errList, fmt.Errorf("%s: must not be negative, got %d", r.burstName, r.burst))
		} else if r.burst > 0 && rate.PerSecond > 0 {
			rate.Burst = r.burst
		}
		*r.dst = rate
	}
	return lim, errors.Join(errList...)
}

// service is the gateway as the platform runs it.
var service = platform.Service{
	Name:          "gateway",
	Schema:        "gateway",
	Migrations:    migrations.FS,
	PublicMethods: authsvc.PublicMethods,
	Register:      register,
}

func main() {
	// The edge allocates per request (JSON, headers) and keeps little: collecting at 4x
	// the live heap instead of 2x saves ~15% of its CPU per request for a few MB, unless
	// the operator set GOGC.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	platform.Main(service)
}

// mailFlushTimeout bounds the wait for login codes still being sent at shutdown.
const mailFlushTimeout = 8 * time.Second

// registerIdentity wires the AuthService, UserService and IdentityService: the signing key
// (re-read after a rotation), the store, the outbox hub revocations stream from, the
// mailer, and the first admin.
func registerIdentity(ctx context.Context, d *platform.Deps, cfg Config) error {
	priv, err := auth.LoadPrivateKey(cfg.Identity.SigningKeyFile)
	if err != nil {
		return err
	}
	maxLife := d.Config.Auth.MaxTokenLifetime
	st := store.New(d.Pool)
	hub := d.Events(nil) // the gateway's events are its revocations; no age-based pruning here
	mail, err := mailer.New(cfg.Mail, d.Logger)
	if err != nil {
		return err
	}
	core, err := authsvc.New(authsvc.Deps{
		Config: cfg.Identity, Store: st, Signer: auth.NewSigner(priv, auth.WithMaxLifetime(maxLife)), SigningKey: priv,
		Verifier: d.Auth.Verifier(), Mailer: mail, Hub: hub, Log: d.Logger, MaxLifetime: maxLife,
	})
	if err != nil {
		return err
	}
	if err := core.EnsureAdmin(ctx); err != nil {
		return fmt.Errorf("first admin: %w", err)
	}
	// Admin tokens the launcher replaced are refused before the first request, and within
	// seconds of a replacement while the gateway runs (admintoken.go).
	if err := core.RevokeReplacedAdminTokens(ctx); err != nil {
		return err
	}
	d.Go("replaced admin tokens", core.FollowReplacedAdminTokens)
	gatewayv1.RegisterAuthServiceServer(d.Server.GRPC(), core.Auth())
	gatewayv1.RegisterUserServiceServer(d.Server.GRPC(), core.Users())
	gatewayv1.RegisterIdentityServiceServer(d.Server.GRPC(), core.Identity())
	// The gateway checks API keys itself, without a round trip to itself.
	d.Auth.SetKeyExchanger(core.Exchanger())
	d.Go("identity housekeeping", func(bg context.Context) error {
		prune := func(ctx context.Context) {
			if err := core.Prune(ctx); err != nil && ctx.Err() == nil {
				d.Logger.Warn("pruning identity data", "err", err)
			}
		}
		prune(bg)
		wait.Every(bg, 10*time.Minute, prune)
		return nil
	})
	// At shutdown (after the server has stopped taking requests) the login codes still
	// being sent go out, within a bound a container's stop grace period allows.
	d.Go("login mail", func(bg context.Context) error {
		<-bg.Done()
		fctx, cancel := context.WithTimeout(context.Background(), mailFlushTimeout)
		defer cancel()
		if n := core.FlushMail(fctx); n > 0 {
			d.Logger.Warn("login codes not sent before shutdown", "count", n)
		}
		return nil
	})
	// A rotation (thefold rotate-key) replaces the key file: sign with the new key.
	d.Go("signing key", func(bg context.Context) error {
		path := cfg.Identity.SigningKeyFile
		return auth.WatchFile(bg, path, func() error {
			priv, err := auth.LoadPrivateKey(path)
			if err != nil {
				return err
			}
			core.SetSigner(auth.NewSigner(priv, auth.WithMaxLifetime(maxLife)))
			d.Logger.Info("signing key reloaded", "kid", auth.KeyID(priv.Public().(ed25519.PublicKey)))
			return nil
		}, d.Logger)
	})
	return nil
}

func register(ctx context.Context, d *platform.Deps) error {
	var cfg Config
	if err := config.Load(ctx, &cfg, config.WithDefaults(d.Lookup, map[string]string{
		"THEFOLD_HTTP_ADDR": fmt.Sprintf(":%d", platform.GatewayHTTPPort),
	})); err != nil {
		return err
	}
	if err := registerIdentity(ctx, d, cfg); err != nil {
		return err
	}

	conns := map[string]*grpc.ClientConn{}
	for _, svc := range edge.Services() {
		// Windows of 1 MiB: a response fits without waiting for a window update (and
		// the BDP pings that size them), which matters for the sequential request path.
		c, err := d.Conn(ctx, svc, grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(1<<20))
		if err != nil {
			return err
		}
		conns[svc] = c
	}
	rates, err := cfg.rateLimits(d.Auth.Verifier())
	if err != nil {
		return err
	}
	if d.ServiceSigner == nil {
		d.Logger.WarnContext(ctx, "no service identity (THEFOLD_AUTH_SERVICE_KEY_FILE): /hooks/slack and /hooks/discord answer 503")
	}
	h, err := edge.New(ctx, d.Logger, d.Server.Registry(), conns, edge.Limits{
		MaxBodyBytes: cfg.HTTPMaxBodyBytes, RateLimits: rates, CORSOrigins: cfg.HTTPCORSOrigins,
	}, edge.WithInboundHooks(d.ServiceSigner))
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.HTTPAddr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.HTTPReadHeaderTimeout,
		ReadTimeout:       cfg.HTTPReadTimeout,
		WriteTimeout:      cfg.HTTPWriteTimeout,
		IdleTimeout:       cfg.HTTPIdleTimeout,
	}
	d.Logger.Info("REST edge serving", "http", lis.Addr().String())
	// The edge is part of the service's group: if it fails the gateway exits instead of
	// staying half up. It stops taking requests as soon as shutdown begins, while the gRPC
	// server drains; requests in flight finish within the timeout.
	d.Go("REST edge", func(bg context.Context) error {
		served := make(chan error, 1)
		go func() { served <- srv.Serve(lis) }()
		select {
		case err := <-served:
			return fmt.Errorf("serve %s: %w", lis.Addr(), err)
		case <-d.Server.Stopping():
		case <-bg.Done():
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(bg), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			d.Logger.Warn("REST edge did not drain in time", "err", err)
		}
		return nil
	})
	return nil
}
