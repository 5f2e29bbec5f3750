package backend

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGoToolchainOffline builds and vets a module with a dependency taken from the host's
// module cache, with no network: the sandbox's main use.
func TestGoToolchainOffline(t *testing.T) {
	t.Parallel()
	probe := newConfig(nil)
	const dep, ver = "github.com/google/go-cmp", "v0.7.0"
	if probe.modCache == "" {
		t.Skip("no Go module cache on this machine to build offline from")
	}
	if _, err := os.Stat(filepath.Join(probe.modCache, "cache/download", dep, "@v", ver+".zip")); err != nil {
		t.Skipf("%s@%s is not in the module cache %s, and there is no network to fetch it", dep, ver, probe.modCache)
	}
	files := map[string]string{
		"go.mod":    "module example.com/m\n\ngo 1.22\n\nrequire " + dep + " " + ver + "\n",
		"m.go":      "package m\n\nimport \"github.com/google/go-cmp/cmp\"\n\nfunc Same(a, b []int) bool { return cmp.Equal(a, b) }\n",
		"m_test.go": "package m\n\nimport \"testing\"\n\nfunc TestSame(t *testing.T) {\n\tif !Same([]int{1}, []int{1}) {\n\t\tt.Fatal(\"not same\")\n\t}\n}\n",
	}
	// Both start from the machine's warm cache of the standard library (bwrap makes it,
	// local reuses it), so only the module's own packages and go-cmp compile.
	opts := []Option{WithLogger(quiet()), WithWarmGoCache(DefaultWarmDir())}
	var backends []Backend
	if bw, err := NewBwrap(append(opts, WithStateDir(t.TempDir()))...); err == nil {
		if _, _, err := bw.warm.ready(t.Context()); err != nil {
			t.Fatal(err)
		}
		backends = append(backends, bw)
	} else {
		t.Logf("bwrap part skipped: it cannot run on this machine: %v", err)
	}
	backends = append(backends, NewLocal(append(opts, WithStateDir(t.TempDir()))...))
	for _, b := range backends {
		defer b.Close()
		ws := t.TempDir()
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		steps := []Spec{
			// go.sum from the cache alone: the checksum database is not reachable either.
			{Argv: []string{"go", "mod", "tidy"}, Env: map[string]string{"GOSUMDB": "off"}},
			{Argv: []string{"go", "build", "./..."}},
			{Argv: []string{"go", "vet", "./..."}},
		}
		for _, s := range steps {
			s.Timeout = 3 * time.Minute
			res, err := b.Run(context.Background(), ws, s, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 0 {
				t.Fatalf("%s: %s: exit %d\n%s%s", b.Name(), strings.Join(s.Argv, " "), res.ExitCode, res.Stdout, res.Stderr)
			}
		}
		// The module cache is read-only in the bwrap sandbox and untouched by either backend.
		if b.Name() == "bwrap" {
			res, err := b.Run(context.Background(), ws, Spec{Argv: []string{"sh", "-c", "touch /gomodcache/x"}}, Limits{})
			if err != nil || res.ExitCode == 0 {
				t.Fatalf("module cache writable in the sandbox: %v %+v", err, res)
			}
		}
	}
}
