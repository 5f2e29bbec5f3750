package stack

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/db/dbtest"
)

// TestEachServiceConnectsAsItsOwnRole: the URL a started service gets names its own,
// unprivileged role, whose password the data directory keeps, and not the administrator.
func TestEachServiceConnectsAsItsOwnRole(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	admin := dbtest.NewEmptyDatabase(t)
	u, _ := url.Parse(admin)
	database := strings.TrimPrefix(u.Path, "/")
	s := &Stack{DataDir: t.TempDir(), DatabaseURL: admin}
	for _, svc := range []string{"tasks", "memory"} {
		t.Cleanup(func() { _ = db.DropServiceRole(context.Background(), admin, database+"_"+svc) })
	}

	first, err := s.ServiceDatabaseURL(ctx, "tasks")
	if err != nil {
		t.Fatalf("ServiceDatabaseURL: %v", err)
	}
	again, err := s.ServiceDatabaseURL(ctx, "tasks")
	if err != nil || again != first {
		t.Fatalf("second start: %q, %v; want the same URL", again, err)
	}
	fi, err := os.Stat(s.DBPasswordPath("tasks"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("password file: %v, %v; want mode 0600", fi, err)
	}
	if _, err := s.ServiceDatabaseURL(ctx, "memory"); err != nil {
		t.Fatal(err)
	}

	conn, err := pgx.Connect(ctx, first)
	if err != nil {
		t.Fatalf("connect as the service: %v", err)
	}
	defer conn.Close(ctx)
	var user string
	var super bool
	if err := conn.QueryRow(ctx, "SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&user, &super); err != nil {
		t.Fatal(err)
	}
	if user != database+"_tasks" || super {
		t.Errorf("connected as %s (superuser %v), want %s_tasks, not a superuser", user, super, database)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE memory.stolen (id int)"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("tasks creating in memory's schema: %v, want permission denied", err)
	}
}
