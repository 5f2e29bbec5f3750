package db_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSQLStatesOnlyInPkgDB keeps the SQLSTATE codes a store reacts to in one place: a store
// asks db.IsUniqueViolation (or db.IsDuplicateTable) instead of comparing codes, so the
// meaning of "taken" cannot drift between services. Tests and generated code may spell
// the codes.
func TestSQLStatesOnlyInPkgDB(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(rel, src string) {
		for _, code := range []string{"23505", "42P07"} {
			if strings.Contains(src, code) {
				t.Errorf("%s spells SQLSTATE %s: use db.IsUniqueViolation / db.IsDuplicateTable", rel, code)
			}
		}
	})
}

// TestTransactionsOnlyThroughPkgDB: stores begin transactions with db.InTx / db.ReadTx, so
// every one rolls back alike (also after its context ended).
func TestTransactionsOnlyThroughPkgDB(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(rel, src string) {
		for _, begin := range []string{"pgx.BeginFunc(", "pgx.BeginTxFunc(", ".BeginTx(ctx", "pool.Begin(ctx"} {
			if strings.Contains(src, begin) {
				t.Errorf("%s begins a transaction with %s: use db.InTx or db.ReadTx", rel, begin)
			}
		}
	})
}

// forEachSource calls fn with each Go source file of the repository outside pkg/db, pkg/gen
// and tests (test files included neither), by its path from the repository root.
func forEachSource(t *testing.T, fn func(rel, src string)) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("repository root not found at %s: %v", root, err)
	}
	skipDirs := map[string]bool{"pkg/gen": true, "pkg/db": true, "tests": true}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skipDirs[rel] || (rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		files++
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fn(rel, string(src))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked only %d Go files under %s", files, root)
	}
}
