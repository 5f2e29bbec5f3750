package main

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/config"
	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/platform"
)

// TestBusyPortStopsTheGateway: when either listener cannot bind, the gateway exits with an
// error naming the address instead of staying half up (REST serving, gRPC not, or the
// reverse) until someone kills it.
func TestBusyPortStopsTheGateway(t *testing.T) {
	t.Parallel()
	keys := t.TempDir()
	if _, _, err := auth.EnsureKeyPair(keys); err != nil {
		t.Fatal(err)
	}
	url := dbtest.NewEmptyDatabase(t)
	for _, key := range []string{"THEFOLD_HTTP_ADDR", "THEFOLD_GRPC_ADDR", "THEFOLD_ADMIN_ADDR"} {
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			busy, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer busy.Close()
			env := map[string]string{
				"THEFOLD_DATABASE_URL":          url,
				"THEFOLD_GRPC_ADDR":             grpctest.FreeAddr(t),
				"THEFOLD_ADMIN_ADDR":            grpctest.FreeAddr(t),
				"THEFOLD_HTTP_ADDR":             grpctest.FreeAddr(t),
				"THEFOLD_AUTH_PUBLIC_KEY_FILE":  filepath.Join(keys, auth.PublicKeyFile),
				"THEFOLD_AUTH_SIGNING_KEY_FILE": filepath.Join(keys, auth.PrivateKeyFile),
			}
			env[key] = busy.Addr().String()
			svc := service
			done := make(chan error, 1)
			go func() {
				done <- platform.Run(t.Context(), svc, config.Map(env, platform.Defaults("gateway")), nil, io.Discard)
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), busy.Addr().String()) {
					t.Fatalf("Run = %v, want an error naming %s", err, busy.Addr())
				}
			case <-time.After(20 * time.Second):
				t.Fatal("gateway still running 20s after a listener failed")
			}
		})
	}
}

// TestRegisterServesRESTUntilStopped: the REST edge answers while the gateway runs and the
// gateway stops cleanly (nil) on cancel, the edge with it.
func TestRegisterServesRESTUntilStopped(t *testing.T) {
	t.Parallel()
	keys := t.TempDir()
	if _, _, err := auth.EnsureKeyPair(keys); err != nil {
		t.Fatal(err)
	}
	httpAddr := grpctest.FreeAddr(t)
	env := map[string]string{
		"THEFOLD_DATABASE_URL":          dbtest.NewEmptyDatabase(t),
		"THEFOLD_GRPC_ADDR":             grpctest.FreeAddr(t),
		"THEFOLD_ADMIN_ADDR":            grpctest.FreeAddr(t),
		"THEFOLD_HTTP_ADDR":             httpAddr,
		"THEFOLD_AUTH_PUBLIC_KEY_FILE":  filepath.Join(keys, auth.PublicKeyFile),
		"THEFOLD_AUTH_SIGNING_KEY_FILE": filepath.Join(keys, auth.PrivateKeyFile),
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	svc := service
	done := make(chan error, 1)
	go func() { done <- platform.Run(ctx, svc, config.Map(env, platform.Defaults("gateway")), nil, io.Discard) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", httpAddr)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-done:
			t.Fatalf("gateway stopped: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("REST edge never listened")
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("gateway did not stop")
	}
	if c, err := net.Dial("tcp", httpAddr); err == nil {
		c.Close()
		t.Fatal("REST edge still listening after the gateway stopped")
	}
}

// TestConfigNamesEveryBadSetting: a bad request budget, burst or CORS origin stops the start
// with the variable named, all of them at once.
func TestConfigNamesEveryBadSetting(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"THEFOLD_HTTP_ADDR":              ":0",
		"THEFOLD_AUTH_SIGNING_KEY_FILE":  "/keys/signing-key.pem",
		"THEFOLD_HTTP_RATE_PER_USER":     "lots",
		"THEFOLD_HTTP_BURST_PER_ADDRESS": "-1",
		"THEFOLD_HTTP_CORS_ORIGINS":      "not a url",
		"THEFOLD_LOGIN_MAX_FAILURES":     "0",
		"THEFOLD_HTTP_TRUSTED_PROXIES":   "10.0.0.0/8,proxy.local",
	}
	var cfg Config
	err := config.Load(t.Context(), &cfg, config.Map(env, nil))
	for _, name := range []string{"THEFOLD_HTTP_RATE_PER_USER", "THEFOLD_HTTP_BURST_PER_ADDRESS", "THEFOLD_HTTP_CORS_ORIGINS", "THEFOLD_LOGIN_MAX_FAILURES", "THEFOLD_HTTP_TRUSTED_PROXIES"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("config error %v does not name %s", err, name)
		}
	}
	env = map[string]string{"THEFOLD_HTTP_ADDR": ":0", "THEFOLD_AUTH_SIGNING_KEY_FILE": "/keys/signing-key.pem",
		"THEFOLD_HTTP_RATE_PER_USER": "5/s", "THEFOLD_HTTP_BURST_PER_USER": "9", "THEFOLD_HTTP_CORS_ORIGINS": "https://ui.example.com"}
	cfg = Config{}
	if err := config.Load(t.Context(), &cfg, config.Map(env, nil)); err != nil {
		t.Fatal(err)
	}
	lim, err := cfg.rateLimits(nil)
	if err != nil || lim.PerUser.PerSecond != 5 || lim.PerUser.Burst != 9 || lim.PerAddress.PerSecond != 60 {
		t.Fatalf("rate limits = %+v, %v", lim, err)
	}
}
