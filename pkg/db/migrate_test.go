package db_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/db/dbtest"
)

// versions returns the applied versions recorded in schema.table.
func versions(t *testing.T, url, schema, table string) []int64 {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT version_id FROM "+pgx.Identifier{schema, table}.Sanitize()+
		" WHERE version_id > 0 AND is_applied ORDER BY id")
	if err != nil {
		t.Fatalf("read %s.%s: %v", schema, table, err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatalf("read %s.%s: %v", schema, table, err)
	}
	return got
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	url := dbtest.NewEmptyDatabase(t)
	ctx := t.Context()
	for i := range 3 {
		if err := db.Migrate(ctx, url, "svc", widgets); err != nil {
			t.Fatalf("Migrate #%d: %v", i+1, err)
		}
	}
	if got := versions(t, url, "svc", "platform_db_version"); !equal(got, []int64{1, 2}) {
		t.Errorf("platform versions = %v, want [1 2]", got)
	}
	if got := versions(t, url, "svc", "goose_db_version"); !equal(got, []int64{1, 2}) {
		t.Errorf("service versions = %v, want [1 2]", got)
	}
	// Both the platform's and the service's tables live in the schema.
	pool, err := db.Open(ctx, url, "svc", 2)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer pool.Close()
	var n int
	err = pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'svc'
		AND tablename IN ('events', 'widgets', 'platform_db_version', 'goose_db_version')`).Scan(&n)
	if err != nil || n != 4 {
		t.Errorf("tables in svc = %d (err %v), want 4", n, err)
	}
}

func TestMigrateWithoutServiceMigrations(t *testing.T) {
	t.Parallel()
	url := dbtest.NewEmptyDatabase(t)
	if err := db.Migrate(t.Context(), url, "bare", nil); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if got := versions(t, url, "bare", "platform_db_version"); !equal(got, []int64{1, 2}) {
		t.Errorf("platform versions = %v, want [1 2]", got)
	}
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := dbtest.NewEmptyDatabase(t)
	ctx := t.Context()
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = db.Migrate(ctx, url, "race", widgets) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate #%d: %v", i, err)
		}
	}
	if got := versions(t, url, "race", "goose_db_version"); !equal(got, []int64{1, 2}) {
		t.Errorf("service versions = %v, want [1 2] exactly once each", got)
	}
}

func TestMigrateSchemasAreIndependent(t *testing.T) {
	t.Parallel()
	url := dbtest.NewEmptyDatabase(t)
	ctx := t.Context()
	if err := db.Migrate(ctx, url, "one", widgets); err != nil {
		t.Fatalf("Migrate one: %v", err)
	}
	if err := db.Migrate(ctx, url, "two", nil); err != nil {
		t.Fatalf("Migrate two: %v", err)
	}
	if got := versions(t, url, "two", "platform_db_version"); !equal(got, []int64{1, 2}) {
		t.Errorf("two platform versions = %v, want [1 2]", got)
	}
}

func TestMigrateErrors(t *testing.T) {
	t.Parallel()
	broken := fstest.MapFS{
		"00001_ok.sql":     widgets["00001_widgets.sql"],
		"00002_broken.sql": {Data: []byte("-- +goose Up\nCREATE TABLEX nope (id int);\n")},
	}
	unparsable := fstest.MapFS{
		"00001_no_annotation.sql": {Data: []byte("CREATE TABLE x (id int);\n")},
	}
	nested := fstest.MapFS{
		"migrations/00001_widgets.sql": widgets["00001_widgets.sql"],
	}
	cases := []struct {
		name, schema string
		fsys         fstest.MapFS
		want         []string
	}{
		{"bad sql", "broken", broken, []string{"00002_broken.sql", "TABLEX"}},
		{"missing annotation", "unparsable", unparsable, []string{"00001_no_annotation.sql"}},
		{"not at the root", "nested", nested, []string{"fs.Sub"}},
		{"bad schema", "Nope", widgets, []string{"invalid schema name"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			url := dbtest.NewEmptyDatabase(t)
			err := db.Migrate(t.Context(), url, c.schema, c.fsys)
			if err == nil {
				t.Fatal("Migrate succeeded, want error")
			}
			t.Logf("error: %v", err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestMigrateBadSQLKeepsEarlierMigrations(t *testing.T) {
	t.Parallel()
	url := dbtest.NewEmptyDatabase(t)
	broken := fstest.MapFS{
		"00001_ok.sql":     widgets["00001_widgets.sql"],
		"00002_broken.sql": {Data: []byte("-- +goose Up\nSELECT 1/0;\n")},
	}
	if err := db.Migrate(t.Context(), url, "partial", broken); err == nil {
		t.Fatal("Migrate succeeded, want error")
	}
	if got := versions(t, url, "partial", "goose_db_version"); !equal(got, []int64{1}) {
		t.Errorf("service versions = %v, want [1]", got)
	}
	// A fixed migration set continues from there.
	fixed := fstest.MapFS{
		"00001_ok.sql":    broken["00001_ok.sql"],
		"00002_fixed.sql": {Data: []byte("-- +goose Up\nSELECT 1;\n")},
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := db.Migrate(ctx, url, "partial", fixed); err != nil {
		t.Fatalf("Migrate fixed: %v", err)
	}
}
