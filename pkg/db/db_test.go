package db_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/db/dbtest"
)

// widgets is a service's migrations as a test FS.
var widgets = fstest.MapFS{
	"00001_widgets.sql": {Data: []byte(`-- +goose Up
CREATE TABLE widgets (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL);
-- +goose Down
DROP TABLE widgets;
`)},
	"00002_widget_color.sql": {Data: []byte(`-- +goose Up
ALTER TABLE widgets ADD COLUMN color TEXT NOT NULL DEFAULT '';
-- +goose Down
ALTER TABLE widgets DROP COLUMN color;
`)},
}

func TestValidateSchema(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		ok   bool
	}{
		{"tasks", true},
		{"memory_v2", true},
		{"a", true},
		{strings.Repeat("a", 40), true},
		{strings.Repeat("a", 41), false},
		{"", false},
		{"Tasks", false},
		{"2tasks", false},
		{"_tasks", false},
		{"tasks-x", false},
		{`tasks"; DROP TABLE x; --`, false},
		{"pg_tasks", false},
	}
	for _, c := range cases {
		err := db.ValidateSchema(c.name)
		if (err == nil) != c.ok {
			t.Errorf("ValidateSchema(%q) = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func TestOpenSetsSearchPath(t *testing.T) {
	t.Parallel()
	_, url := dbtest.NewDatabase(t, "db_open", widgets)
	ctx := t.Context()

	pool, err := db.Open(ctx, url, "db_open", 3)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer pool.Close()
	if got := pool.Config().MaxConns; got != 3 {
		t.Errorf("MaxConns = %d, want 3", got)
	}
	var schema, path, jit string
	if err := pool.QueryRow(ctx, "SELECT current_schema(), current_setting('search_path'), current_setting('jit')").Scan(&schema, &path, &jit); err != nil {
		t.Fatalf("query: %v", err)
	}
	if schema != "db_open" || path != "db_open, public" {
		t.Errorf("current_schema, search_path = %q, %q; want db_open, \"db_open, public\"", schema, path)
	}
	// JIT compiled a memory search that then ran in 0.05 ms for 260 ms: off.
	if jit != "off" {
		t.Errorf("jit = %q, want off", jit)
	}
	// Unqualified names resolve in the schema.
	if _, err := pool.Exec(ctx, "INSERT INTO widgets (name) VALUES ('w')"); err != nil {
		t.Errorf("insert into widgets: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cases := []struct {
		name, url, schema, want string
	}{
		{"bad schema", dbtest.DefaultURL, "Bad-Schema", "invalid schema name"},
		{"bad url", "postgres://%zz", "tasks", "db: open schema tasks"},
		{"unreachable", "postgres://thefold:secret@127.0.0.1:1/thefold?sslmode=disable&connect_timeout=2", "tasks", "ping"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pool, err := db.Open(ctx, c.url, c.schema, 0)
			if err == nil {
				pool.Close()
				t.Fatal("Open succeeded, want error")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q leaks the password", err)
			}
		})
	}
}
