// Command gateway is TheFold's edge: the REST/JSON API for every public RPC (grpc-gateway,
// dialing each service), the merged OpenAPI document, and the AuthService over gRPC.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"

	"github.com/thefold/thefold/pkg/config"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/platform"
	"github.com/thefold/thefold/services/gateway/internal/authsvc"
	"github.com/thefold/thefold/services/gateway/internal/edge"
)

// Config is the gateway's own configuration.
type Config struct {
	HTTPAddr string `env:"THEFOLD_HTTP_ADDR"`
	// The REST edge's limits: a slow or huge request must not hold a connection or memory.
	// The write timeout must exceed the longest unary call (grpcclient.DefaultTimeout);
	// Watch streams are exempt from it and from the read timeout.
	HTTPMaxBodyBytes      int64         `env:"THEFOLD_HTTP_MAX_BODY_BYTES, default=4194304"`
	HTTPReadHeaderTimeout time.Duration `env:"THEFOLD_HTTP_READ_HEADER_TIMEOUT, default=10s"`
	HTTPReadTimeout       time.Duration `env:"THEFOLD_HTTP_READ_TIMEOUT, default=30s"`
	HTTPWriteTimeout      time.Duration `env:"THEFOLD_HTTP_WRITE_TIMEOUT, default=60s"`
	HTTPIdleTimeout       time.Duration `env:"THEFOLD_HTTP_IDLE_TIMEOUT, default=120s"`
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
	return errors.Join(errList...)
}

func main() {
	platform.Main(platform.Service{
		Name:          "gateway",
		Schema:        "gateway",
		PublicMethods: authsvc.PublicMethods,
		Register:      register,
	})
}

func register(ctx context.Context, d *platform.Deps) error {
	var cfg Config
	if err := config.Load(ctx, &cfg, config.WithDefaults(d.Lookup, map[string]string{
		"THEFOLD_HTTP_ADDR": fmt.Sprintf(":%d", platform.GatewayHTTPPort),
	})); err != nil {
		return err
	}
	gatewayv1.RegisterAuthServiceServer(d.Server.GRPC(), &authsvc.Server{})
	gatewayv1.RegisterUserServiceServer(d.Server.GRPC(), &authsvc.UserServer{})

	conns := map[string]*grpc.ClientConn{}
	for _, svc := range edge.Services() {
		c, err := d.Conn(ctx, svc)
		if err != nil {
			return err
		}
		conns[svc] = c
	}
	h, err := edge.New(ctx, d.Logger, d.Server.Registry(), conns, edge.Limits{MaxBodyBytes: cfg.HTTPMaxBodyBytes})
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
