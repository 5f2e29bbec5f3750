package backend

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A bwrap sandbox starts with the standard library compiled, from the machine's warm cache
// (made once by the backend), and cannot change it: a sandbox that tries gets a read-only
// file system, and another sandbox's build takes nothing from what the first one wrote.
func TestBwrapWarmBuildCacheIsSharedReadOnly(t *testing.T) {
	t.Parallel()
	b, err := NewBwrap(WithLogger(quiet()), WithStateDir(t.TempDir()), WithWarmGoCache(DefaultWarmDir()))
	if err != nil {
		t.Skipf("bwrap cannot run here: %v", err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	dir, err := b.WarmGoCache(ctx)
	if err != nil || dir == "" {
		t.Fatalf("no warm cache: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ready")); err != nil {
		t.Fatalf("WarmGoCache returned %s, which is not a finished cache: %v", dir, err)
	}
	shared, _, err := b.warm.ready(ctx)
	if err != nil || shared != filepath.Join(dir, "cache") {
		t.Fatalf("the sandboxes mount %q (%v), WarmGoCache named %s", shared, err, dir)
	}
	t.Logf("warm cache %s ready after %v", shared, time.Since(start))
	before := treeSizes(t, shared)

	hello := map[string]string{
		"go.mod":  "module example.com/m\n\ngo 1.22\n",
		"main.go": "package main\n\nimport (\n\t\"fmt\"\n\t\"net/http\"\n)\n\nfunc main() { fmt.Println(\"hello\", http.StatusOK) }\n",
	}
	workspace := func() string {
		ws := t.TempDir()
		for name, body := range hello {
			if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return ws
	}
	run := func(ws, script string) *Result {
		t.Helper()
		res, err := b.Run(ctx, ws, Spec{Argv: []string{"/bin/sh", "-c", script}, Timeout: 5 * time.Minute}, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run(workspace(), `
		f=$(find `+bwrapSharedGoCache+` -name '*-d' -size +1k | head -1)
		[ -n "$f" ] || { echo "no shared entries"; exit 3; }
		echo poison > "$f" 2>/dev/null && echo "wrote $f"
		touch `+bwrapSharedGoCache+`/planted 2>/dev/null && echo "created a file"
		echo poison > `+bwrapGoCacheProg+` 2>/dev/null && echo "replaced the helper"
		go build -o /tmp/a . || exit 4
		for f in $(find `+bwrapState+`/gocache/layer -type f); do echo poison > "$f"; done
		exit 0`)
	if res.ExitCode != 0 || len(res.Stdout) != 0 {
		t.Fatalf("the attacking sandbox: exit %d, stdout %q, stderr %q (want exit 0, no write to the shared cache)", res.ExitCode, res.Stdout, res.Stderr)
	}
	if after := treeSizes(t, shared); after != before {
		t.Fatal("the shared cache changed")
	}
	res = run(workspace(), `go build -o /tmp/b . && /tmp/b && find `+bwrapState+`/gocache/layer -name '*-a' | wc -l && grep -rl poison `+bwrapState+`/gocache/layer | wc -l`)
	lines := strings.Fields(string(res.Stdout))
	if res.ExitCode != 0 || len(lines) != 4 || lines[0] != "hello" {
		t.Fatalf("the other sandbox: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if n, _ := strconv.Atoi(lines[2]); n == 0 || n > 8 {
		t.Errorf("the other sandbox's own layer has %d entries, want its program's few (a warm standard library)", n)
	}
	if lines[3] != "0" {
		t.Errorf("%s files of the other sandbox's layer hold the attacker's poison", lines[3])
	}
}

func treeSizes(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(p + " " + strconv.FormatInt(fi.Size(), 10) + " " + fi.ModTime().String() + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
