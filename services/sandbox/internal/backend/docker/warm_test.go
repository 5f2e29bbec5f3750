package docker

import (
	"strconv"
	"strings"
	"testing"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
)

// Every sandbox starts with the standard library compiled (the image's shared build cache)
// but writes only its own layer: a sandbox that tries to change the shared cache cannot,
// and what it puts in its own layer never reaches another sandbox's build.
func TestWarmBuildCacheIsSharedReadOnly(t *testing.T) {
	t.Parallel()
	hello := map[string]string{
		"go.mod":  "module example.com/m\n\ngo 1.22\n",
		"main.go": "package main\n\nimport (\n\t\"fmt\"\n\t\"net/http\"\n)\n\nfunc main() { fmt.Println(\"hello\", http.StatusOK) }\n",
	}
	d, a := sandbox(t, hello)
	_, b := sandbox(t, hello)

	// The attacker: every way into the shared layer fails, the cache program's own
	// directory included.
	res := run(t, d, a, backend.Spec{Argv: sh(`
		f=$(find ` + SharedGoCache + ` -name '*-d' -size +1k | head -1)
		[ -n "$f" ] || { echo "no shared entries"; exit 3; }
		echo poison > "$f" 2>/dev/null && echo "wrote $f"
		touch ` + SharedGoCache + `/planted 2>/dev/null && echo "created a file"
		rm -rf ` + SharedGoCache + `/00 2>/dev/null && [ ! -d ` + SharedGoCache + `/00 ] && echo "removed a directory"
		# Its own builds go to its own layer; then it plants garbage there.
		go build -o /tmp/a . || exit 4
		for f in $(find /tmp/gocache/layer -type f); do echo poison > "$f"; done
		exit 0`)}, backend.Limits{})
	if res.ExitCode != 0 || len(res.Stdout) != 0 {
		t.Fatalf("the attacking sandbox: exit %d, stdout %q, stderr %q (want exit 0, no write to the shared cache)", res.ExitCode, res.Stdout, res.Stderr)
	}

	// The other sandbox builds warm and right: its layer holds only its own program's
	// entries (the standard library came from the shared layer) and none of the attacker's.
	res = run(t, d, b, backend.Spec{Argv: sh(`go build -o /tmp/b . && /tmp/b && find /tmp/gocache/layer -name '*-a' | wc -l && grep -rl poison /tmp/gocache/layer | wc -l`)}, backend.Limits{})
	lines := strings.Fields(string(res.Stdout))
	if res.ExitCode != 0 || len(lines) != 4 || lines[0] != "hello" || lines[1] != "200" {
		t.Fatalf("the other sandbox: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if n, _ := strconv.Atoi(lines[2]); n == 0 || n > 8 {
		t.Errorf("the other sandbox's own layer has %d entries after its build, want its program's few (a warm standard library)", n)
	}
	if lines[3] != "0" {
		t.Errorf("%s files of the other sandbox's layer hold the attacker's poison", lines[3])
	}
}
