package main

import (
	"database/sql"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/config"
	"github.com/thefold/thefold/pkg/db/dbtest"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/platform"
	"github.com/thefold/thefold/pkg/server"

	"github.com/thefold/thefold/services/tasks/migrations"
)

// TestMigrateCommand runs `tasks migrate` twice on an empty database, then the migrations'
// Down and Up again, so both directions of every file are exercised.
func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewEmptyDatabase(t)
	lookup := config.Map(map[string]string{
		"THEFOLD_DATABASE_URL":         url,
		"THEFOLD_AUTH_PUBLIC_KEY_FILE": "unused-by-migrate.pem",
	}, platform.Defaults("tasks"))
	for range 2 {
		if err := platform.Run(ctx, tasksService(), lookup, []string{"migrate"}, io.Discard); err != nil {
			t.Fatalf("migrate: %v", err)
		}
	}
	tables := func(conn *sql.DB) []string {
		t.Helper()
		rows, err := conn.QueryContext(ctx, `SELECT table_name FROM information_schema.tables
			WHERE table_schema = 'tasks' AND table_name IN ('tasks', 'task_dependencies') ORDER BY table_name`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		return out
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = "tasks"
	conn := stdlib.OpenDB(*cfg)
	defer conn.Close()
	if got := tables(conn); len(got) != 2 {
		t.Fatalf("tables after migrate = %v", got)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, conn, migrations.FS,
		goose.WithTableName("tasks.goose_db_version"), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("down: %v", err)
	}
	if got := tables(conn); len(got) != 0 {
		t.Fatalf("tables after down = %v", got)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
}

// TestRegister checks that the service wires the TaskService onto the platform server.
func TestRegister(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDatabase(t, "tasks", migrations.FS)
	srv, err := server.New(server.Options{
		Name:   "tasks",
		Logger: slog.New(slog.DiscardHandler),
		Auth:   auth.NewAuthenticator(auth.NewVerifier(nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"THEFOLD_TASKS_MAX_WATCHES", "THEFOLD_TASKS_ORDER_TIMEOUT"} {
		bad := &platform.Deps{Name: "tasks", Pool: pool, Server: srv, Logger: slog.New(slog.DiscardHandler),
			Lookup: config.Map(map[string]string{name: "0"}, nil)}
		if err := tasksService().Register(t.Context(), bad); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Register with %s=0: err = %v", name, err)
		}
	}
	// Without an ai address the service still starts (PlanTaskOrder answers
	// FAILED_PRECONDITION); with one it dials lazily, so no ai service needs to be up.
	for _, lookup := range []map[string]string{nil, {"THEFOLD_AI_ADDR": "127.0.0.1:1"}} {
		other, err := server.New(server.Options{Name: "tasks", Logger: slog.New(slog.DiscardHandler), Auth: auth.NewAuthenticator(auth.NewVerifier(nil))})
		if err != nil {
			t.Fatal(err)
		}
		d := &platform.Deps{Name: "tasks", Pool: pool, Server: other, Logger: slog.New(slog.DiscardHandler), Lookup: config.Map(lookup, nil)}
		err = tasksService().Register(t.Context(), d)
		d.Close()
		if err != nil {
			t.Fatalf("Register with %v: %v", lookup, err)
		}
	}
	d := &platform.Deps{Name: "tasks", Pool: pool, Server: srv, Logger: slog.New(slog.DiscardHandler), Lookup: config.Map(nil, platform.Defaults("tasks"))}
	t.Cleanup(d.Close)
	if err := tasksService().Register(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	info, ok := srv.GRPC().GetServiceInfo()[tasksv1.TaskService_ServiceDesc.ServiceName]
	if !ok {
		t.Fatalf("TaskService not registered: %v", srv.GRPC().GetServiceInfo())
	}
	if got, want := len(info.Methods), len(tasksv1.TaskService_ServiceDesc.Methods)+len(tasksv1.TaskService_ServiceDesc.Streams); got != want {
		t.Errorf("%d methods registered, want %d", got, want)
	}
}
