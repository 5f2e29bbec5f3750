package platform_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/config"
	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/platform"
)

// serveEnv is the environment of a service on free ports against a fresh database.
func serveEnv(t *testing.T) map[string]string {
	t.Helper()
	keys := t.TempDir()
	if _, _, err := auth.EnsureKeyPair(keys); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"THEFOLD_DATABASE_URL":         dbtest.NewEmptyDatabase(t),
		"THEFOLD_GRPC_ADDR":            grpctest.FreeAddr(t),
		"THEFOLD_ADMIN_ADDR":           grpctest.FreeAddr(t),
		"THEFOLD_AUTH_PUBLIC_KEY_FILE": filepath.Join(keys, auth.PublicKeyFile),
	}
}

// runAsync starts platform.Run and returns the channel its result arrives on.
func runAsync(ctx context.Context, svc platform.Service, env map[string]string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- platform.Run(ctx, svc, config.Map(env, nil), nil, io.Discard) }()
	return done
}

// waitResult fails the test unless Run returns within the deadline.
func waitResult(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s")
		return nil
	}
}

// waitReadyz polls the admin port until /readyz answers want.
func waitReadyz(t *testing.T, admin string, want int, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never answered %d", want)
		}
	}
}

func TestFailingBackgroundTaskStopsTheService(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("boom")
	cases := []struct {
		name string
		task func(ctx context.Context) error
		want error
	}{
		{"fails at once", func(context.Context) error { return errBoom }, errBoom},
		{"fails later", func(ctx context.Context) error {
			select {
			case <-time.After(200 * time.Millisecond):
				return errBoom
			case <-ctx.Done():
				return nil
			}
		}, errBoom},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := serveEnv(t)
			svc := platform.Service{Name: "probe", Schema: "probe", Migrations: migrations,
				Register: func(ctx context.Context, d *platform.Deps) error {
					d.Go("worker", tc.task)
					return nil
				}}
			err := waitResult(t, runAsync(t.Context(), svc, env))
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "worker") {
				t.Fatalf("Run = %v, want %v naming the task", err, tc.want)
			}
		})
	}
}

func TestBusyPortFailsTheStart(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"THEFOLD_GRPC_ADDR", "THEFOLD_ADMIN_ADDR"} {
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			busy, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer busy.Close()
			env := serveEnv(t)
			env[key] = busy.Addr().String()
			svc := platform.Service{Name: "probe", Schema: "probe", Migrations: migrations}
			err = waitResult(t, runAsync(t.Context(), svc, env))
			if err == nil || !strings.Contains(err.Error(), busy.Addr().String()) {
				t.Fatalf("Run = %v, want an error naming %s", err, busy.Addr())
			}
		})
	}
}

// probeDesc is a hand-written gRPC service (independent of the generated contracts) whose
// one method blocks until the test releases it.
func probeDesc(block func(ctx context.Context) error) grpc.ServiceDesc {
	return grpc.ServiceDesc{
		ServiceName: "probe.Probe",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Block", Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, _ any) (any, error) { return &emptypb.Empty{}, block(ctx) }
			if ic == nil {
				return h(ctx, in)
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/probe.Probe/Block"}, h)
		}}},
	}
}

// TestBackgroundWorkOutlivesTheDrain: a call in flight when the signal comes still has the
// background work (an event hub, say) while the server drains; the work stops afterwards.
func TestBackgroundWorkOutlivesTheDrain(t *testing.T) {
	t.Parallel()
	env := serveEnv(t)
	entered, release := make(chan struct{}), make(chan struct{})
	bgCtx := make(chan context.Context, 1)
	desc := probeDesc(func(context.Context) error {
		close(entered)
		<-release
		return nil
	})
	svc := platform.Service{Name: "probe", Schema: "probe", Migrations: migrations,
		PublicMethods: []string{"/probe.Probe/Block"},
		Register: func(ctx context.Context, d *platform.Deps) error {
			d.Server.GRPC().RegisterService(&desc, struct{}{})
			d.Go("hub", func(ctx context.Context) error { bgCtx <- ctx; <-ctx.Done(); return nil })
			return nil
		}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := runAsync(ctx, svc, env)
	waitReadyz(t, env["THEFOLD_ADMIN_ADDR"], http.StatusOK, done)
	hub := <-bgCtx

	conn, err := grpc.NewClient(env["THEFOLD_GRPC_ADDR"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	called := make(chan error, 1)
	go func() {
		called <- conn.Invoke(context.Background(), "/probe.Probe/Block", &emptypb.Empty{}, &emptypb.Empty{})
	}()
	<-entered
	cancel()
	// NOT_SERVING on /readyz: shutdown has begun and the server is draining our call.
	waitReadyz(t, env["THEFOLD_ADMIN_ADDR"], http.StatusServiceUnavailable, done)
	if err := hub.Err(); err != nil {
		t.Fatalf("background work stopped before the drain: %v", err)
	}
	close(release)
	if err := <-called; err != nil {
		t.Fatalf("call in flight during the drain: %v", err)
	}
	if err := waitResult(t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if hub.Err() == nil {
		t.Fatal("background work still running after Run returned")
	}
}
