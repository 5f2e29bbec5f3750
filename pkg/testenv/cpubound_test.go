package testenv

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every test that calls CPUBound skips under -race, so it runs only if the Makefile's
// second pass names it (and its package): a test missing there would never run in CI.
func TestCPUBoundTestsRunWithoutRace(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	tests := regexp.MustCompile(`(?m)^CPU_BOUND_TESTS := (.*)$`).FindSubmatch(makefile)
	pkgs := regexp.MustCompile(`(?m)^CPU_BOUND_PKGS := (.*)$`).FindSubmatch(makefile)
	if tests == nil || pkgs == nil {
		t.Fatal("the Makefile has no CPU_BOUND_TESTS or CPU_BOUND_PKGS")
	}
	named := map[string]bool{}
	for _, n := range strings.Split(string(tests[1]), "|") {
		named[strings.TrimSpace(n)] = true
	}
	listed := map[string]bool{}
	for _, p := range strings.Fields(string(pkgs[1])) {
		listed[strings.TrimPrefix(p, "./")] = true
	}
	testFunc := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	found := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".thefold" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(src)
		for _, at := range regexp.MustCompile(`testenv\.CPUBound\(`).FindAllStringIndex(text, -1) {
			fns := testFunc.FindAllStringSubmatch(text[:at[0]], -1)
			if len(fns) == 0 {
				t.Errorf("%s: CPUBound outside a test function", path)
				continue
			}
			name := fns[len(fns)-1][1]
			found++
			if !named[name] {
				t.Errorf("%s calls CPUBound but the Makefile's CPU_BOUND_TESTS does not name it: it would never run", name)
			}
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			if !listed[filepath.ToSlash(rel)] {
				t.Errorf("%s's package %s is not in the Makefile's CPU_BOUND_PKGS: it would never run", name, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found != len(named) {
		t.Errorf("CPU_BOUND_TESTS names %d tests, %d call CPUBound", len(named), found)
	}
}
