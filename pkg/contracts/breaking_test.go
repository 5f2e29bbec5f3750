package contracts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/testenv"
)

// baseline is the frozen v1 contracts (buf build of proto/ when v1 was tagged
// contracts-v1): make lint runs buf breaking against it, so a breaking change to a v1
// package fails CI and needs a v2 package instead.
const baseline = "../../proto/baseline/contracts-v1.binpb"

// TestBreakingChangesAreRefused proves the freeze bites: the contracts as they are pass
// buf breaking against the baseline, and the same contracts with a field renamed and one
// removed do not.
func TestBreakingChangesAreRefused(t *testing.T) {
	buf, err := exec.LookPath("buf")
	if err != nil {
		if buf = filepath.Join(os.Getenv("HOME"), "go", "bin", "buf"); !exists(buf) {
			testenv.SkipOrFail(t, "buf is not installed (scripts/setup.sh installs it)")
		}
	}
	if !exists(baseline) {
		t.Fatalf("no baseline at %s: the v1 contracts are not frozen", baseline)
	}
	root := filepath.Join("..", "..")
	check := func(dir string) (string, error) {
		cmd := exec.Command(buf, "breaking", dir, "--against", baseline)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := check(filepath.Join(root, "proto")); err != nil {
		t.Fatalf("the contracts break the v1 baseline:\n%s", out)
	}
	// A copy of proto/ with a breaking change.
	tmp := t.TempDir()
	if err := os.CopyFS(filepath.Join(tmp, "proto"), os.DirFS(filepath.Join(root, "proto"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "buf.yaml"), []byte("version: v2\nmodules:\n  - path: proto\nbreaking:\n  use:\n    - FILE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(tmp, "proto", "thefold", "tasks", "v1", "tasks.proto")
	src, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(src), "  string title = ", "  string headline = ", 1)
	if broken == string(src) {
		t.Fatal("tasks.proto has no title field to rename")
	}
	if err := os.WriteFile(p, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(buf, "breaking", "--against", filepath.Join(mustAbs(t, baseline)))
	cmd.Dir = tmp
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("renaming a field passed buf breaking:\n%s", out)
	}
	if !strings.Contains(string(out), "title") {
		t.Errorf("buf breaking did not name the renamed field:\n%s", out)
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
