package validate

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// The files in testdata are the real output of the Go toolchain (go1.26), gcc and python3
// (3.11) on this machine, captured from small modules under /tmp/vcap: the module at
// /tmp/vcap/m is "m" in the workspace, the others are at the workspace root. Those under
// /tmp/vcap2 (cgo, assembly, go.mod, the plugin tests of github.com/cespare/xxhash/v2
// v2.3.0 run without a C compiler) sit at the workspace root too.

func readTestdata(t *testing.T, names ...string) []byte {
	t.Helper()
	var out []byte
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

func TestParsers(t *testing.T) {
	t.Parallel()
	m := ProjectDir{Rel: "m", Abs: "/tmp/vcap/m"}
	root := ProjectDir{Rel: "."}
	cases := []struct {
		name  string
		parse func() []*typev1.Diagnostic
		want  []string
	}{
		{
			name: "go build type errors under a # header",
			parse: func() []*typev1.Diagnostic {
				return ParseGoBuild(readTestdata(t, "gobuild_typeerrors.txt"), "go build", m)
			},
			want: []string{
				"m/b/b.go:4:6 ERROR [go build/] declared and not used: x",
				`m/b/b.go:4:14 ERROR [go build/] cannot use "s" (untyped string constant) as int value in variable declaration`,
				"m/b/b.go:5:9 ERROR [go build/] undefined: y",
			},
		},
		{
			name: "go build stops at too many errors, which is no finding",
			parse: func() []*typev1.Diagnostic {
				return ParseGoBuild(readTestdata(t, "gobuild_toomany.txt"), "go build", root)[8:]
			},
			want: []string{
				"many.go:12:6 ERROR [go build/] undefined: undefined9",
				"many.go:13:6 ERROR [go build/] undefined: undefined10",
			},
		},
		{
			name: "go build continuation lines join the message",
			parse: func() []*typev1.Diagnostic {
				return ParseGoBuild(readTestdata(t, "gobuild_havewant.txt"), "go build", ProjectDir{Rel: "lay"})
			},
			want: []string{"lay/b/b.go:6:18 ERROR [go build/] too many arguments in call to a.Add\nhave (number, number)\nwant (int)"},
		},
		{
			name: "go vet text: type errors with the vet: prefix and findings without analyzer",
			parse: func() []*typev1.Diagnostic {
				return ParseGoBuild(readTestdata(t, "govet_text.txt"), "go vet", m)
			},
			want: []string{
				"m/a/a.go:8:14 ERROR [go vet/] fmt.Printf format %d has arg s of wrong type string",
				`m/b/b.go:4:14 ERROR [go vet/] cannot use "s" (untyped string constant) as int value in variable declaration`,
			},
		},
		{
			name: "go vet -json: findings keyed by analyzer, absolute positions, mixed with text",
			parse: func() []*typev1.Diagnostic {
				return ParseGoVetJSON(readTestdata(t, "govet_json_mixed.stdout", "govet_json_mixed.stderr"), m)
			},
			want: []string{
				"m/a/a.go:8:14 ERROR [go vet/printf] fmt.Printf format %d has arg s of wrong type string",
				`m/b/b.go:4:14 ERROR [go vet/] cannot use "s" (untyped string constant) as int value in variable declaration`,
			},
		},
		{
			name: "gofmt -l lists files; its syntax errors are errors",
			parse: func() []*typev1.Diagnostic {
				return append(ParseGofmtList(readTestdata(t, "gofmt_l.stdout"), root), ParseGoBuild(readTestdata(t, "gofmt_l.stderr"), "gofmt", root)...)
			},
			want: []string{
				"a.go:0:0 WARNING [gofmt/gofmt] not gofmt-formatted (run gofmt -w)",
				"sub/bad.go:0:0 WARNING [gofmt/gofmt] not gofmt-formatted (run gofmt -w)",
				"sub/syn.go:2:6 ERROR [gofmt/] expected 'IDENT', found '{'",
			},
		},
		{
			name:  "go test -json: failing tests, multi-line messages, subtests, a panic",
			parse: func() []*typev1.Diagnostic { return ParseGoTestJSON(readTestdata(t, "gotest_json_fail.txt"), m) },
			want: []string{
				"m/a/a_test.go:7:0 ERROR [go test/TestAdd] Add(1, 1) = 2, want 3",
				"m/a/a_test.go:14:0 ERROR [go test/TestMulti] context line",
				"m/a/a_test.go:15:0 ERROR [go test/TestMulti] broken:\nsecond line 2",
				"m/a/a_test.go:20:0 ERROR [go test/TestSub/inner] inner failed",
				"m/a/a_test.go:26:0 ERROR [go test/TestPanic] panic: assignment to entry in nil map [recovered, repanicked]",
			},
		},
		{
			name: "go test -json: a test binary that does not build",
			parse: func() []*typev1.Diagnostic {
				return ParseGoTestJSON(readTestdata(t, "gotest_json_buildfail.txt"), ProjectDir{Rel: ".", Abs: "/tmp/vcap/lay"})
			},
			want: []string{
				"b/b.go:6:18 ERROR [go test/] too many arguments in call to a.Add\nhave (number, number)\nwant (int)",
				"b/b_test.go:6:17 ERROR [go test/] cannot use F() (value of type int) as string value in variable declaration",
			},
		},
		{
			name:  "py_compile syntax error",
			parse: func() []*typev1.Diagnostic { return ParsePython(readTestdata(t, "py_compile.txt"), root) },
			want:  []string{"pkg/bad.py:1:0 ERROR [python3/SyntaxError] SyntaxError: invalid syntax"},
		},
		{
			name:  "the compile script: every bad file, IndentationError too",
			parse: func() []*typev1.Diagnostic { return ParsePython(readTestdata(t, "python_compile_script.txt"), root) },
			want: []string{
				"bad.py:1:0 ERROR [python3/SyntaxError] SyntaxError: invalid syntax",
				"indent.py:3:0 ERROR [python3/IndentationError] IndentationError: unexpected indent",
			},
		},
		// tsc, eslint and pytest are not installed on this machine and there is no network
		// to install them: these cases follow the tools' documented output formats.
		{
			name: "tsc --pretty false, with a message chain and a global error",
			parse: func() []*typev1.Diagnostic {
				return ParseTSC([]byte("src/a.ts(3,5): error TS2322: Type 'string' is not assignable to type 'number'.\n"+
					"src/b.ts(10,1): error TS2345: Argument of type '{ a: string; }' is not assignable to parameter of type 'P'.\n"+
					"  Property 'b' is missing in type '{ a: string; }' but required in type 'P'.\n"+
					"error TS5058: The specified path does not exist: 'tsconfig.json'.\n"), ProjectDir{Rel: "web"})
			},
			want: []string{
				"web/src/a.ts:3:5 ERROR [tsc/TS2322] Type 'string' is not assignable to type 'number'.",
				"web/src/b.ts:10:1 ERROR [tsc/TS2345] Argument of type '{ a: string; }' is not assignable to parameter of type 'P'.\nProperty 'b' is missing in type '{ a: string; }' but required in type 'P'.",
				":0:0 ERROR [tsc/TS5058] The specified path does not exist: 'tsconfig.json'.",
			},
		},
		{
			name: "eslint --format json: errors, warnings, a fatal parse error, absolute paths",
			parse: func() []*typev1.Diagnostic {
				d, ok := ParseESLintJSON([]byte("npm warn [deprecated] a notice before the report\n"+`[{"filePath":"/ws/web/src/a.js","messages":[`+
					`{"ruleId":"no-unused-vars","severity":2,"message":"'x' is assigned a value but never used.","line":1,"column":7,"nodeType":"Identifier","messageId":"unusedVar","endLine":1,"endColumn":8},`+
					`{"ruleId":"eqeqeq","severity":1,"message":"Expected '===' and instead saw '=='.","line":2,"column":7}],"errorCount":1,"warningCount":1},`+
					`{"filePath":"/ws/web/src/b.js","messages":[{"ruleId":null,"fatal":true,"severity":2,"message":"Parsing error: Unexpected token )","line":3,"column":9}],"errorCount":1},`+
					`{"filePath":"/ws/web/src/c.js","messages":[],"errorCount":0}]`), ProjectDir{Rel: "web", Abs: "/ws/web"})
				if !ok {
					t.Error("ParseESLintJSON: ok = false for an eslint report")
				}
				return d
			},
			want: []string{
				"web/src/a.js:1:7 ERROR [eslint/no-unused-vars] 'x' is assigned a value but never used.",
				"web/src/a.js:2:7 WARNING [eslint/eqeqeq] Expected '===' and instead saw '=='.",
				"web/src/b.js:3:9 ERROR [eslint/] Parsing error: Unexpected token )",
			},
		},
		{
			name: "pytest -q --tb=line: located failures, and a summary line for a file without one",
			parse: func() []*typev1.Diagnostic {
				return ParsePython([]byte("F.E                                                                      [100%]\n"+
					"/ws/tests/test_calc.py:12: AssertionError: assert 2 == 3\n"+
					"=========================== short test summary info ============================\n"+
					"FAILED tests/test_calc.py::test_add - AssertionError: assert 2 == 3\n"+
					"ERROR tests/test_io.py::test_read - FileNotFoundError: [Errno 2] No such file or directory: 'x'\n"+
					"1 failed, 1 passed, 1 error in 0.05s\n"), ProjectDir{Rel: ".", Abs: "/ws"})
			},
			want: []string{
				"tests/test_calc.py:12:0 ERROR [pytest/] AssertionError: assert 2 == 3",
				"tests/test_io.py:0:0 ERROR [pytest/test_read] FileNotFoundError: [Errno 2] No such file or directory: 'x'",
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := diagStrings(c.parse())
			if !slices.Equal(got, c.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

func TestParseESLintJSONNotAReport(t *testing.T) {
	t.Parallel()
	for _, out := range []string{"", "Oops! Something went wrong! :(\n", "[not json"} {
		if d, ok := ParseESLintJSON([]byte(out), ProjectDir{Rel: "."}); ok || d != nil {
			t.Errorf("ParseESLintJSON(%q) = %v, %v: want nil, false", out, d, ok)
		}
	}
}

func TestProjectDirPath(t *testing.T) {
	t.Parallel()
	cases := []struct {
		dir  ProjectDir
		in   string
		want string
	}{
		{ProjectDir{Rel: "."}, "./a.go", "a.go"},
		{ProjectDir{Rel: "svc"}, "./a/a.go", "svc/a/a.go"},
		{ProjectDir{Rel: "svc/x"}, "../y/b.go", "svc/y/b.go"},
		{ProjectDir{Rel: "svc", Abs: "/ws/svc"}, "/ws/svc/a/a.go", "svc/a/a.go"},
		{ProjectDir{Rel: "svc", Abs: "/ws/svc/"}, "/ws/svc/a.go", "svc/a.go"},
		// Outside the module but inside the workspace (/ws, what Abs says without Rel).
		{ProjectDir{Rel: "svc", Abs: "/ws/svc"}, "/ws/svcx/a.go", "svcx/a.go"},
		{ProjectDir{Rel: "svc", Abs: "/ws/svc"}, "/ws/shared/x.go", "shared/x.go"},
		{ProjectDir{Rel: "svc", Abs: "/ws/svc"}, "/usr/local/go/src/fmt/print.go", "/usr/local/go/src/fmt/print.go"},
		{ProjectDir{Rel: ""}, `sub\a.go`, "sub/a.go"},
		// The docker and bwrap backends' /workspace never reaches a diagnostic, even when
		// the project's directory inside the sandbox is unknown.
		{ProjectDir{Rel: "."}, "/workspace/xxhash_amd64.s", "xxhash_amd64.s"},
		{ProjectDir{Rel: "svc"}, "/workspace/svc/a.go", "svc/a.go"},
		{ProjectDir{Rel: "svc"}, "/workspace/other/b.py", "other/b.py"},
		{ProjectDir{Rel: "svc", Abs: "/workspace/svc"}, "/workspace/svc/./c/../c/c.h", "svc/c/c.h"},
		{ProjectDir{Rel: "."}, "/workspacex/a.go", "/workspacex/a.go"},
		// The local backend runs in the host directory: its root goes too.
		{ProjectDir{Rel: "svc", Root: "/home/u/ws"}, "/home/u/ws/svc/a.go", "svc/a.go"},
		{ProjectDir{Rel: "svc", Root: "/home/u/ws/"}, "/home/u/ws/go.mod", "go.mod"},
		{ProjectDir{Rel: "svc", Abs: "/home/u/ws/svc", Root: "/home/u/ws"}, "/home/u/ws/lib/l.go", "lib/l.go"},
		// Relative names: "./" goes, and a name relative to the project directory (where the
		// tool ran) is resolved against it; above the workspace it becomes absolute.
		{ProjectDir{Rel: "svc/sub"}, "./go.mod", "svc/sub/go.mod"},
		{ProjectDir{Rel: "svc"}, "././a/../b.ts", "svc/b.ts"},
		{ProjectDir{Rel: ".", Abs: "/workspace"}, "../outside/x.go", "/outside/x.go"},
		{ProjectDir{Rel: "."}, "../outside/x.go", "../outside/x.go"},
		// A file system root is no workspace.
		{ProjectDir{Rel: ".", Abs: "/"}, "/usr/local/go/src/fmt/print.go", "/usr/local/go/src/fmt/print.go"},
	}
	for _, c := range cases {
		if got := c.dir.Path(c.in); got != c.want {
			t.Errorf("%+v.Path(%q) = %q, want %q", c.dir, c.in, got, c.want)
		}
	}
}

func TestTail(t *testing.T) {
	t.Parallel()
	if got := tail("short", 10); got != "short" {
		t.Errorf("tail(short) = %q", got)
	}
	got := tail(strings.Repeat("a", 20)+"é", 3)
	if !strings.HasSuffix(got, "aé") || !strings.Contains(got, "cut") {
		t.Errorf("tail = %q: want the last bytes at a rune boundary and a cut marker", got)
	}
}
