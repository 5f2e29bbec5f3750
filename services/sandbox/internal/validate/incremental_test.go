package validate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/errs"
)

// layered is a module where b imports a, c imports b (so c depends on a through b), and d
// is unrelated.
func layered(aGo string) map[string]string {
	return map[string]string{
		"go.mod":  "module example.com/m\n\ngo 1.22\n",
		"a/a.go":  aGo,
		"b/b.go":  "package b\n\nimport \"example.com/m/a\"\n\nfunc F() int {\n\treturn a.Add(1, 2)\n}\n",
		"c/c.go":  "package c\n\nimport \"example.com/m/b\"\n\nfunc G() int { return b.F() }\n",
		"d/d.go":  "package d\n\nfunc H() {}\n",
		"README":  "not go\n",
		"x/x.txt": "",
	}
}

const aOriginal = "package a\n\nfunc Add(x, y int) int { return x + y }\n"

func TestValidateIncrementalGo(t *testing.T) {
	t.Parallel()
	requireGo(t)
	cases := []struct {
		name       string
		aGo        string
		passed     bool
		own        []string // substrings of a/a.go diagnostics, in any step
		others     string   // substring of a diagnostic in b/b.go, or ""
		otherLine  int32
		dependents []string
	}{
		{
			name:   "signature change breaks the dependent",
			aGo:    "package a\n\nfunc Add(x int) int { return x }\n",
			passed: true, others: "too many arguments in call to a.Add\nhave (number, number)\nwant (int)", otherLine: 6,
			dependents: []string{"example.com/m/b", "example.com/m/c"},
		},
		{
			name:   "the file itself does not compile",
			aGo:    "package a\n\nfunc Add(x, y int) int { return x + z }\n",
			passed: false, own: []string{"a/a.go:3:37 ERROR [go build/] undefined: z", "a/a.go:3:37 ERROR [go vet/] undefined: z"},
			dependents: []string{"example.com/m/b", "example.com/m/c"},
		},
		{
			name:   "unformatted is a warning only",
			aGo:    "package a\nfunc Add(x, y int) int { return x + y }\n",
			passed: true, own: []string{"a/a.go:0:0 WARNING [gofmt/gofmt] not gofmt-formatted"},
			dependents: []string{"example.com/m/b", "example.com/m/c"},
		},
		{
			name:       "unchanged",
			aGo:        aOriginal,
			passed:     true,
			dependents: []string{"example.com/m/b", "example.com/m/c"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := writeTree(t, layered(c.aGo))
			rep, err := ValidateIncremental(context.Background(), root, []string{"a/a.go"}, execRunner(root, ""))
			if err != nil {
				t.Fatal(err)
			}
			resp := rep.Response
			if resp.Passed != c.passed || resp.Toolchain != "go" {
				t.Errorf("passed %v toolchain %q, want %v go; steps %v", resp.Passed, resp.Toolchain, c.passed, stepSummary(resp.Steps))
			}
			var own []string
			for _, s := range resp.Steps {
				for _, d := range s.Diagnostics {
					if d.Path != "a/a.go" {
						t.Errorf("step diagnostics must be limited to the file: %s", diagString(d))
					}
					own = append(own, diagString(d))
				}
			}
			if len(own) != len(c.own) {
				t.Errorf("own diagnostics %q, want %q", own, c.own)
			}
			for _, want := range c.own {
				if !slices.ContainsFunc(own, func(s string) bool { return strings.HasPrefix(s, want) }) {
					t.Errorf("own diagnostics %q: missing %q", own, want)
				}
			}
			if c.others != "" {
				if !hasDiag(rep.Others, "b/b.go", c.otherLine, c.others) {
					t.Errorf("others %v: want b/b.go:%d %q", diagStrings(rep.Others), c.otherLine, c.others)
				}
				if resp.OtherErrors < 1 {
					t.Errorf("other_errors = %d, want ≥ 1", resp.OtherErrors)
				}
			} else if resp.OtherErrors != 0 || len(rep.Others) != 0 {
				t.Errorf("other_errors %d, others %v: want none", resp.OtherErrors, diagStrings(rep.Others))
			}
			if !slices.Equal(rep.Dependents, c.dependents) {
				t.Errorf("dependents %v, want %v", rep.Dependents, c.dependents)
			}
			build := findStep(t, resp.Steps, "go build")
			if !slices.Contains(build.Command, "./b") || !slices.Contains(build.Command, "./c") || slices.Contains(build.Command, "./d") {
				t.Errorf("go build command %v: want a's dependents b and c and not d", build.Command)
			}
		})
	}
}

func TestValidateIncrementalPython(t *testing.T) {
	t.Parallel()
	requirePython(t)
	root := writeTree(t, map[string]string{
		"ok.py":      "x = 1\n",
		"pkg/bad.py": "def f(:\n    pass\n",
	})
	rep, err := ValidateIncremental(context.Background(), root, []string{"pkg/bad.py"}, execRunner(root, ""))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Response.Passed || rep.Response.Toolchain != "python" || len(rep.Response.Steps) != 1 {
		t.Fatalf("passed %v toolchain %q steps %v: want a failed python typecheck", rep.Response.Passed, rep.Response.Toolchain, stepSummary(rep.Response.Steps))
	}
	if d := rep.Response.Steps[0].Diagnostics; !hasDiag(d, "pkg/bad.py", 1, "SyntaxError") {
		t.Errorf("diagnostics %v: want pkg/bad.py:1 SyntaxError", diagStrings(d))
	}
	if _, err := os.Stat(filepath.Join(root, "pkg", "__pycache__")); err == nil {
		t.Error("compiling wrote __pycache__ into the workspace")
	}
}

func TestValidateIncrementalBadPaths(t *testing.T) {
	t.Parallel()
	root := writeTree(t, map[string]string{"go.mod": "module example.com/m\n", "a.go": "package m\n", "dir/x": ""})
	outside := writeTree(t, map[string]string{"secret.go": "package secret\n"})
	if err := os.Symlink(filepath.Join(outside, "secret.go"), filepath.Join(root, "link.go")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		paths []string
		want  error
	}{
		{nil, errs.ErrInvalid},
		{[]string{""}, errs.ErrInvalid},
		{[]string{"../a.go"}, errs.ErrInvalid},
		{[]string{"/etc/passwd"}, errs.ErrInvalid},
		{[]string{"link.go"}, errs.ErrInvalid},
		{[]string{"dir"}, errs.ErrInvalid},
		{[]string{"missing.go"}, errs.ErrNotFound},
	}
	for _, c := range cases {
		_, err := ValidateIncremental(context.Background(), root, c.paths, func(context.Context, string, []string) (int, []byte, []byte, error) {
			t.Errorf("%q: ran a command for a path that should have been refused", c.paths)
			return 0, nil, nil, errors.New("not reached")
		})
		if !errors.Is(err, c.want) {
			t.Errorf("%q: error %v, want %v", c.paths, err, c.want)
		}
	}
}

func TestValidateIncrementalTypeScriptWithoutTools(t *testing.T) {
	t.Parallel()
	root := writeTree(t, map[string]string{
		"web/package.json":  "{}",
		"web/tsconfig.json": "{}",
		"web/src/a.ts":      "export const a: number = 1;\n",
	})
	rep, err := ValidateIncremental(context.Background(), root, []string{"web/src/a.ts"}, execRunner(root, ""))
	if err != nil {
		t.Fatal(err)
	}
	resp := rep.Response
	if !resp.Passed || resp.Toolchain != "node" || len(resp.Steps) != 2 {
		t.Fatalf("passed %v toolchain %q steps %v: want passed, node, tsc and eslint", resp.Passed, resp.Toolchain, stepSummary(resp.Steps))
	}
	for _, s := range resp.Steps {
		if s.Status != skipped || !strings.Contains(s.Message, "not installed") {
			t.Errorf("%q: %s %q, want SKIPPED: not installed", strings.Join(s.Command, " "), s.Status, s.Message)
		}
	}
}
