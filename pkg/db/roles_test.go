package db_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/db/dbtest"
)

// serviceRole creates schema's role in the database at adminURL and returns the URL a
// service connects with; the role is dropped when the test ends.
func serviceRole(t *testing.T, adminURL, schema string) (role, svcURL string) {
	t.Helper()
	u, _ := url.Parse(adminURL)
	role, err := db.RoleName(strings.TrimPrefix(u.Path, "/"), schema)
	if err != nil {
		t.Fatal(err)
	}
	pw := db.NewPassword()
	if err := db.EnsureServiceRole(t.Context(), adminURL, schema, role, pw); err != nil {
		t.Fatalf("EnsureServiceRole: %v", err)
	}
	// Registered after the database's cleanup, so it runs first (cleanups run last-in first-out).
	t.Cleanup(func() {
		if err := db.DropServiceRole(context.Background(), adminURL, role); err != nil {
			t.Errorf("drop role: %v", err)
		}
	})
	svcURL, err = db.ServiceURL(adminURL, role, pw)
	if err != nil {
		t.Fatal(err)
	}
	return role, svcURL
}

// TestServiceRoleCannotReachAnotherSchema is the isolation the roles exist for: each role
// migrates and uses its own schema, and every attempt on the other's is refused.
func TestServiceRoleCannotReachAnotherSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	admin := dbtest.NewEmptyDatabase(t)
	_, oneURL := serviceRole(t, admin, "one")
	_, twoURL := serviceRole(t, admin, "two")

	// Each role runs its own migrations (the platform's and the service's).
	if err := db.Migrate(ctx, oneURL, "one", widgets); err != nil {
		t.Fatalf("Migrate one as its role: %v", err)
	}
	if err := db.Migrate(ctx, twoURL, "two", widgets); err != nil {
		t.Fatalf("Migrate two as its role: %v", err)
	}
	one, err := db.Open(ctx, oneURL, "one", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if _, err := one.Exec(ctx, "INSERT INTO widgets (name) VALUES ('mine')"); err != nil {
		t.Fatalf("write own schema: %v", err)
	}
	if _, err := one.Exec(ctx, "SELECT count(*) FROM events"); err != nil {
		t.Fatalf("read own events: %v", err)
	}

	cases := []struct{ name, sql string }{
		{"read another schema's table", "SELECT count(*) FROM two.widgets"},
		{"read another schema's outbox", "SELECT count(*) FROM two.events"},
		{"write another schema's table", "INSERT INTO two.widgets (name) VALUES ('theirs')"},
		{"create in another schema", "CREATE TABLE two.intruder (id int)"},
		{"create in public", "CREATE TABLE public.intruder (id int)"},
		{"create a schema", "CREATE SCHEMA three"},
		{"create a role", "CREATE ROLE intruder"},
		{"create a database", "CREATE DATABASE intruder"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := one.Exec(ctx, tc.sql)
			if pe, ok := errors.AsType[*pgconn.PgError](err); !ok || pe.Code != "42501" {
				t.Fatalf("%s: %v, want permission denied (42501)", tc.sql, err)
			}
		})
	}
}

// TestEnsureServiceRoleTakesOverAdminSchema: a schema migrated by the administrator (as
// every service did before roles) is handed to the role, which can then migrate it further.
func TestEnsureServiceRoleTakesOverAdminSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	admin := dbtest.NewEmptyDatabase(t)
	first := fstest.MapFS{"00001_widgets.sql": widgets["00001_widgets.sql"]}
	if err := db.Migrate(ctx, admin, "legacy", first); err != nil {
		t.Fatalf("Migrate as admin: %v", err)
	}
	_, svcURL := serviceRole(t, admin, "legacy")
	if err := db.Migrate(ctx, svcURL, "legacy", widgets); err != nil {
		t.Fatalf("Migrate as the role after take-over: %v", err)
	}
	if got := versions(t, svcURL, "legacy", "goose_db_version"); !equal(got, []int64{1, 2}) {
		t.Errorf("service versions = %v, want [1 2]", got)
	}
	pool, err := db.Open(ctx, svcURL, "legacy", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "INSERT INTO widgets (name, color) VALUES ('w', 'red')"); err != nil {
		t.Fatalf("write after take-over: %v", err)
	}
}

// TestEnsureServiceRoleIsIdempotentAndRotates: running it again is harmless, and a new
// password replaces the old one.
func TestEnsureServiceRoleIsIdempotentAndRotates(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	admin := dbtest.NewEmptyDatabase(t)
	role, oldURL := serviceRole(t, admin, "svc")
	newPW := db.NewPassword()
	for range 2 {
		if err := db.EnsureServiceRole(ctx, admin, "svc", role, newPW); err != nil {
			t.Fatalf("EnsureServiceRole again: %v", err)
		}
	}
	newURL, _ := db.ServiceURL(admin, role, newPW)
	c, err := pgx.Connect(ctx, newURL)
	if err != nil {
		t.Fatalf("connect with the new password: %v", err)
	}
	c.Close(ctx)
	if c, err := pgx.Connect(ctx, oldURL); err == nil {
		c.Close(ctx)
		t.Error("the old password still works")
	}
}

func TestMigrateWithoutSchemaNamesTheRole(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	admin := dbtest.NewEmptyDatabase(t)
	role, svcURL := serviceRole(t, admin, "mine")
	err := db.Migrate(ctx, svcURL, "other", nil) // a schema the role neither owns nor may create
	if err == nil || !strings.Contains(err.Error(), role) {
		t.Fatalf("Migrate of a missing schema: %v, want an error naming %s", err, role)
	}
}

func TestRoleNameAndServiceURL(t *testing.T) {
	t.Parallel()
	if r, err := db.RoleName("thefold", "tasks"); err != nil || r != "thefold_tasks" {
		t.Errorf("RoleName(thefold, tasks) = %q, %v", r, err)
	}
	for _, bad := range [][2]string{{"Thefold", "tasks"}, {strings.Repeat("d", 60), "tasks"}, {"thefold", "Tasks"}} {
		if r, err := db.RoleName(bad[0], bad[1]); err == nil {
			t.Errorf("RoleName(%q, %q) = %q, want an error", bad[0], bad[1], r)
		}
	}
	got, err := db.ServiceURL("postgres://admin:secret@db:5432/thefold?sslmode=disable&password=secret", "thefold_tasks", "pw")
	if err != nil {
		t.Fatal(err)
	}
	if want := "postgres://thefold_tasks:pw@db:5432/thefold?sslmode=disable"; got != want {
		t.Errorf("ServiceURL = %q, want %q", got, want)
	}
	if _, err := db.ServiceURL("host=db user=admin", "r", "pw"); err == nil {
		t.Error("ServiceURL of a key=value string: want an error")
	}
}
