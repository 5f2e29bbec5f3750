package platform_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/config"
	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/platform"
)

var migrations = fstest.MapFS{
	"00001_things.sql": {Data: []byte("-- +goose Up\nCREATE TABLE things (id int PRIMARY KEY);\n-- +goose Down\nDROP TABLE things;\n")},
}

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	url := dbtest.NewEmptyDatabase(t)
	svc := platform.Service{Name: "probe", Schema: "probe", Migrations: migrations}
	err := platform.Run(t.Context(), svc, config.Map(map[string]string{"THEFOLD_DATABASE_URL": url}, nil), []string{"migrate"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM probe.things").Scan(&n); err != nil {
		t.Fatalf("migrated table missing: %v", err)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	t.Parallel()
	svc := platform.Service{Name: "probe", Schema: "probe"}
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"unknown command", nil, []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"serve without key", map[string]string{"THEFOLD_GRPC_ADDR": ":0", "THEFOLD_ADMIN_ADDR": ":0"}, nil, "THEFOLD_AUTH_PUBLIC_KEY_FILE"},
		{"serve without addresses", map[string]string{"THEFOLD_AUTH_PUBLIC_KEY_FILE": "/x"}, nil, "THEFOLD_GRPC_ADDR"},
		{"bad duration", map[string]string{"THEFOLD_SHUTDOWN_TIMEOUT": "soon"}, nil, "THEFOLD_SHUTDOWN_TIMEOUT"},
		{"healthcheck with a bad admin address", map[string]string{"THEFOLD_ADMIN_ADDR": "nonsense"}, []string{"healthcheck"}, "admin address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := platform.Run(t.Context(), svc, config.Map(tc.env, nil), tc.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %s", err, tc.want)
			}
		})
	}
}

func TestServeUntilCanceled(t *testing.T) {
	t.Parallel()
	url := dbtest.NewEmptyDatabase(t)
	keys := t.TempDir()
	if _, _, err := auth.EnsureKeyPair(keys); err != nil {
		t.Fatal(err)
	}
	admin := grpctest.FreeAddr(t)
	env := map[string]string{
		"THEFOLD_DATABASE_URL":         url,
		"THEFOLD_GRPC_ADDR":            grpctest.FreeAddr(t),
		"THEFOLD_ADMIN_ADDR":           admin,
		"THEFOLD_AUTH_PUBLIC_KEY_FILE": filepath.Join(keys, auth.PublicKeyFile),
	}
	registered := make(chan struct{})
	svc := platform.Service{Name: "probe", Schema: "probe", Migrations: migrations,
		Register: func(ctx context.Context, d *platform.Deps) error {
			if d.Pool == nil || d.Server == nil {
				return fmt.Errorf("deps incomplete")
			}
			close(registered)
			return nil
		}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- platform.Run(ctx, svc, config.Map(env, nil), nil, io.Discard) }()

	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("service never became ready")
		}
	}
	<-registered
	if err := platform.Run(t.Context(), svc, config.Map(env, nil), []string{"healthcheck"}, io.Discard); err != nil {
		t.Errorf("healthcheck of a ready service: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	if err := platform.Run(t.Context(), svc, config.Map(env, nil), []string{"healthcheck"}, io.Discard); err == nil {
		t.Error("healthcheck of a stopped service succeeded")
	}
}
