package validate

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

func TestEnvLackIn(t *testing.T) {
	t.Parallel()
	cases := []struct {
		line string
		what string // "" for a line that is the code's problem, or nothing
	}{
		{`cgo: C compiler "gcc" not found: exec: "gcc": executable file not found in $PATH`, "gcc"},
		{`cgo: C compiler "/usr/bin/clang" not found: exec: "/usr/bin/clang": stat /usr/bin/clang: no such file or directory`, "clang"},
		{`-buildmode=plugin requires external (cgo) linking, but cgo is not enabled`, "a C compiler"},
		{`go: missing Git command. See https://golang.org/s/gogetcmd`, "git"},
		{`a.go:3:8: unable to resolve git version: failed to execute git version: exec: "git": executable file not found in $PATH`, "git"},
		{`exec: "g++": executable file not found in $PATH`, "g++"},
		{`pkg-config: exec: "pkg-config": executable file not found in $PATH`, "pkg-config"},
		{`Package sqlite3 was not found in the pkg-config search path.`, "the development files of sqlite3"},
		{`collect2: fatal error: cannot find 'ld'`, "ld"},
		{`gcc: fatal error: cannot execute 'cc1': execvp: No such file or directory`, ""},
		{`gcc: error trying to exec 'cc1': execvp: No such file or directory`, "cc1"},
		{`/usr/bin/ld: cannot find crt1.o: No such file or directory`, "the C library's development files (libc6-dev)"},
		{`/usr/bin/ld: cannot find -lsqlite3: No such file or directory`, "the C library libsqlite3"},
		{`./c.h:1:10: fatal error: stdlib.h: No such file or directory`, "the C standard headers (libc6-dev)"},
		{`/usr/bin/python3: No module named pytest`, "pytest"},
		{`ModuleNotFoundError: No module named 'pytest'`, "pytest"},
		{`sh: 1: tsc: not found`, "tsc"},
		{`bash: tsc: command not found`, "tsc"},
		{`tsc: command not found`, "tsc"},
		{`tsc: command not found in PATH /usr/local/bin:/usr/bin:/bin`, "tsc"},
		{`sandbox: exec: line 0: npx: not found`, "npx"},
		{`sandbox: 1: exec: pytest: not found`, "pytest"},
		{`sandbox: line 1: exec: node: not found`, "node"},
		{`/usr/bin/env: 'node': No such file or directory`, "node"},
		{`Error: Cannot find module 'typescript'`, "typescript"},
		{`OCI runtime exec failed: exec failed: unable to start container process: exec: "npx": executable file not found in $PATH`, "npx"},
		// The code's problems, not the sandbox's.
		{`./c.h:1:10: fatal error: mylib.h: No such file or directory`, ""},
		{`Error: Cannot find module './util'`, ""},
		{`ModuleNotFoundError: No module named 'myapp'`, ""},
		{`b/b.go:5:9: undefined: y`, ""},
		{`2026/11/27 03:10:00 Error building plugin: exit status 1`, ""},
		{`fork/exec ./bin/tool: no such file or directory`, ""},
		{`lookup: alice: not found`, ""},
		{`    x_test.go:12: key: not found`, ""},
	}
	for _, c := range cases {
		l, ok := envLackIn(c.line)
		if ok != (c.what != "") || l.what != c.what {
			t.Errorf("envLackIn(%q) = %q, %v; want %q", c.line, l.what, ok, c.what)
		}
		if ok && (!strings.HasPrefix(l.message(), "environment: the sandbox lacks "+c.what+" (") || !strings.HasSuffix(l.message(), "; this is not an error in the code")) {
			t.Errorf("message %q: want it to say plainly what the sandbox lacks", l.message())
		}
	}
}

// TestParseEnvironment: the Go parsers report the sandbox's limitations as such, with the
// failure they explain, and never as an error of the code.
func TestParseEnvironment(t *testing.T) {
	t.Parallel()
	root := ProjectDir{Rel: ".", Module: "github.com/cespare/xxhash/v2"}
	const gccLacking = "environment: the sandbox lacks gcc (cgo needs a C compiler); this is not an error in the code"
	cases := []struct {
		name  string
		parse func() []*typev1.Diagnostic
		want  []string
	}{
		{
			// xxhash's dynamic test builds a plugin in TestMain; without a C compiler the
			// go command turns cgo off and the plugin cannot be built.
			name: "go test: a TestMain building a plugin without cgo",
			parse: func() []*typev1.Diagnostic {
				return ParseGoTestJSON(readTestdata(t, "gotest_json_plugin_nocgo.txt"), root)
			},
			want: []string{":0:0 WARNING [go test/environment] environment: the sandbox lacks a C compiler (without one the go command turns cgo off, and this build needs cgo); this is not an error in the code\n" +
				"package github.com/cespare/xxhash/v2/dynamic failed: Error building plugin: exit status 1\n" +
				"-buildmode=plugin requires external (cgo) linking, but cgo is not enabled"},
		},
		{
			name: "go test: CGO_ENABLED=1 without gcc, the test binary cannot build",
			parse: func() []*typev1.Diagnostic {
				return ParseGoTestJSON(readTestdata(t, "gotest_json_plugin_nogcc.txt"), root)
			},
			want: []string{":0:0 WARNING [go test/environment] " + gccLacking + "\n" +
				`cgo: C compiler "gcc" not found: exec: "gcc": executable file not found in $PATH`},
		},
		{
			name: "go test: a failing test whose output shows a missing program; another fails on its own",
			parse: func() []*typev1.Diagnostic {
				return ParseGoTestJSON([]byte(
					`{"Action":"output","Package":"example.com/p","Test":"TestPlugin","Output":"    p_test.go:20: Error building plugin: exit status 1\n"}`+"\n"+
						`{"Action":"output","Package":"example.com/p","Test":"TestPlugin","Output":"        # runtime/cgo\n"}`+"\n"+
						`{"Action":"output","Package":"example.com/p","Test":"TestPlugin","Output":"        cgo: C compiler \"gcc\" not found: exec: \"gcc\": executable file not found in $PATH\n"}`+"\n"+
						`{"Action":"fail","Package":"example.com/p","Test":"TestPlugin"}`+"\n"+
						`{"Action":"output","Package":"example.com/p","Test":"TestAdd","Output":"    p_test.go:30: Add(1, 1) = 3, want 2\n"}`+"\n"+
						`{"Action":"fail","Package":"example.com/p","Test":"TestAdd"}`+"\n"+
						`{"Action":"fail","Package":"example.com/p"}`+"\n"), ProjectDir{Rel: "p", Abs: "/workspace/p"})
			},
			want: []string{
				"p/p_test.go:20:0 WARNING [go test/environment] " + gccLacking + "\nTestPlugin: Error building plugin: exit status 1\n# runtime/cgo\n" +
					`cgo: C compiler "gcc" not found: exec: "gcc": executable file not found in $PATH`,
				"p/p_test.go:30:0 ERROR [go test/TestAdd] Add(1, 1) = 3, want 2",
			},
		},
		{
			name: "go build: git missing to resolve an import, at the import's position",
			parse: func() []*typev1.Diagnostic {
				return ParseGoBuild(readTestdata(t, "gobuild_nogit.txt"), "go build", ProjectDir{Rel: "."})
			},
			want: []string{"a.go:3:8 WARNING [go build/environment] environment: the sandbox lacks git (the go command runs it to fetch modules); this is not an error in the code\n" +
				`unable to resolve git version: failed to execute git version: exec: "git": executable file not found in $PATH`},
		},
		{
			name: "go build and vet: no C compiler, no linker, no libc headers, next to a real error",
			parse: func() []*typev1.Diagnostic {
				out := "# runtime/cgo\n" +
					`cgo: C compiler "gcc" not found: exec: "gcc": executable file not found in $PATH` + "\n" +
					"# example.com/x/c\n" +
					"collect2: fatal error: cannot find 'ld'\n" +
					"./c.h:1:10: fatal error: stdlib.h: No such file or directory\n" +
					"# example.com/x/b\n" +
					"b/b.go:5:9: undefined: y\n"
				return ParseGoBuild([]byte(out), "go build", ProjectDir{Rel: ".", Module: "example.com/x"})
			},
			want: []string{
				":0:0 WARNING [go build/environment] " + gccLacking + "\n" + `cgo: C compiler "gcc" not found: exec: "gcc": executable file not found in $PATH`,
				":0:0 WARNING [go build/environment] environment: the sandbox lacks ld (the C compiler links with it); this is not an error in the code\ncollect2: fatal error: cannot find 'ld'",
				"c/c.h:1:10 WARNING [go build/environment] environment: the sandbox lacks the C standard headers (libc6-dev) (the C compiler cannot find stdlib.h); this is not an error in the code\nfatal error: stdlib.h: No such file or directory",
				"b/b.go:5:9 ERROR [go build/] undefined: y",
			},
		},
		{
			name: "go vet -json: an analyzer that could not run for lack of a C compiler",
			parse: func() []*typev1.Diagnostic {
				return ParseGoVetJSON([]byte(`{"example.com/x/c": {"cgocall": {"error": "cgo: C compiler \"gcc\" not found: exec: \"gcc\": executable file not found in $PATH"}}}`), ProjectDir{Rel: "."})
			},
			want: []string{":0:0 WARNING [go vet/environment] " + gccLacking + "\ncgocall: example.com/x/c: " +
				`cgo: C compiler "gcc" not found: exec: "gcc": executable file not found in $PATH`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := diagStrings(c.parse())
			if !slices.Equal(got, c.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n---\n"), strings.Join(c.want, "\n---\n"))
			}
		})
	}
}

// fakeRunner answers each command (argv joined by spaces, prefix match, longest first)
// with canned output: the status rules without a toolchain.
type fakeRun struct {
	exit           int
	stdout, stderr string
	err            error
}

func fakeRunner(answers map[string]fakeRun) Runner {
	return func(_ context.Context, _ string, argv []string) (int, []byte, []byte, error) {
		cmd := strings.Join(argv, " ")
		best := ""
		for k := range answers {
			if strings.HasPrefix(cmd, k) && len(k) > len(best) {
				best = k
			}
		}
		a, ok := answers[best]
		if !ok {
			return 0, nil, nil, nil
		}
		return a.exit, []byte(a.stdout), []byte(a.stderr), a.err
	}
}

// TestValidateEnvironmentIsNotTheCodesFailure: a check that failed only because the sandbox
// lacks a program is ERROR (it did not happen), says so plainly, holds no ERROR diagnostic,
// and leaves passed false; a check with a real error next to it stays FAILED.
func TestValidateEnvironmentIsNotTheCodesFailure(t *testing.T) {
	t.Parallel()
	root := writeTree(t, map[string]string{"go.mod": "module github.com/cespare/xxhash/v2\n\ngo 1.22\n", "x.go": "package xxhash\n"})
	base := map[string]fakeRun{
		"go env GOMOD": {stdout: "/workspace/go.mod\n"},
		"go vet":       {stdout: "{}\n"},
	}
	with := func(extra map[string]fakeRun) map[string]fakeRun {
		m := map[string]fakeRun{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	testOnly := Options{Steps: []sandboxv1.ValidationStepKind{sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TEST}}
	cases := []struct {
		name       string
		answers    map[string]fakeRun
		opt        Options
		command    string
		status     sandboxv1.StepStatus
		msgPrefix  string
		wantErrors bool
	}{
		{
			name:      "plugin test without cgo",
			answers:   with(map[string]fakeRun{"go test": {exit: 1, stdout: string(readTestdata(t, "gotest_json_plugin_nocgo.txt"))}}),
			opt:       testOnly,
			command:   "go test",
			status:    errored,
			msgPrefix: "environment: the sandbox lacks a C compiler (",
		},
		{
			name:      "test binary without gcc",
			answers:   with(map[string]fakeRun{"go test": {exit: 1, stdout: string(readTestdata(t, "gotest_json_plugin_nogcc.txt"))}}),
			opt:       testOnly,
			command:   "go test",
			status:    errored,
			msgPrefix: "environment: the sandbox lacks gcc (cgo needs a C compiler); this is not an error in the code",
		},
		{
			name: "a real failure next to the missing compiler stays the code's",
			answers: with(map[string]fakeRun{"go test": {exit: 1, stdout: string(readTestdata(t, "gotest_json_plugin_nogcc.txt")) +
				`{"Action":"output","Package":"github.com/cespare/xxhash/v2","Test":"TestSum","Output":"    /workspace/xxhash_test.go:12: Sum64 = 1, want 2\n"}` + "\n" +
				`{"Action":"fail","Package":"github.com/cespare/xxhash/v2","Test":"TestSum"}` + "\n"}}),
			opt:        testOnly,
			command:    "go test",
			status:     failed,
			msgPrefix:  "environment: the sandbox lacks gcc",
			wantErrors: true,
		},
		{
			name:      "go build: git missing",
			answers:   with(map[string]fakeRun{"go build": {exit: 1, stderr: string(readTestdata(t, "gobuild_nogit.txt"))}}),
			opt:       Options{Steps: []sandboxv1.ValidationStepKind{sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK}},
			command:   "go build",
			status:    errored,
			msgPrefix: "environment: the sandbox lacks git (",
		},
		{
			name:      "a tool the step runs is missing: the shell says so, nothing is parsed",
			answers:   with(map[string]fakeRun{"gofmt": {exit: 127, stderr: "sh: 1: gofmt: not found\n"}}),
			opt:       Options{Steps: []sandboxv1.ValidationStepKind{sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_LINT}},
			command:   "gofmt",
			status:    errored,
			msgPrefix: "environment: the sandbox lacks gofmt (the Go toolchain); this is not an error in the code",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			resp, err := Validate(context.Background(), root, fakeRunner(c.answers), c.opt)
			if err != nil {
				t.Fatal(err)
			}
			s := findStep(t, resp.Steps, c.command)
			if s.Status != c.status || !strings.HasPrefix(s.Message, c.msgPrefix) && !strings.Contains(s.Message, "; "+c.msgPrefix) {
				t.Errorf("%s: %s %q, want %s with a message starting %q; diagnostics:\n%s", c.command, s.Status, s.Message, c.status, c.msgPrefix, strings.Join(diagStrings(s.Diagnostics), "\n"))
			}
			if hasErrors(s.Diagnostics) != c.wantErrors {
				t.Errorf("error diagnostics %v, want %v:\n%s", hasErrors(s.Diagnostics), c.wantErrors, strings.Join(diagStrings(s.Diagnostics), "\n"))
			}
			if c.status != passed && resp.Passed {
				t.Error("Passed = true: a check that could not run is no pass")
			}
			for _, d := range s.Diagnostics {
				if isEnvironmental(d) && (d.Severity != typev1.Severity_SEVERITY_WARNING || !strings.HasPrefix(d.Message, "environment: the sandbox lacks ")) {
					t.Errorf("environment diagnostic %s: want a WARNING saying what the sandbox lacks", diagString(d))
				}
				if strings.HasPrefix(d.Path, "/") {
					t.Errorf("diagnostic not workspace-relative: %s", diagString(d))
				}
			}
		})
	}
}

// TestExecStepEnvironment covers the generic fallback for any tool: a failure with nothing
// parsed whose output says a program is missing, and a program the runner cannot start.
func TestExecStepEnvironment(t *testing.T) {
	t.Parallel()
	noParse := func(ProjectDir, int, []byte, []byte) []*typev1.Diagnostic { return nil }
	cases := []struct {
		name   string
		run    fakeRun
		status sandboxv1.StepStatus
		msg    string
	}{
		{"tsc not installed", fakeRun{exit: 127, stderr: "sh: 1: tsc: not found\n"}, errored,
			"environment: the sandbox lacks tsc (the TypeScript compiler; typescript is not installed); this is not an error in the code"},
		{"typescript not in node_modules", fakeRun{exit: 1, stderr: "Error: Cannot find module 'typescript'\nRequire stack:\n- /workspace/web/x.js\n"}, errored,
			"environment: the sandbox lacks typescript (the project's tools are not installed in node_modules); this is not an error in the code"},
		{"pytest not installed", fakeRun{exit: 1, stderr: "/usr/bin/python3: No module named pytest\n"}, errored,
			"environment: the sandbox lacks pytest (the Python tests run with it); this is not an error in the code"},
		{"the runner cannot start the program", fakeRun{err: &exec.Error{Name: "npx", Err: exec.ErrNotFound}}, errored,
			"environment: the sandbox lacks npx (the Node.js toolchain); this is not an error in the code (npx eslint in web could not run: exec: \"npx\": executable file not found in $PATH)"},
		{"a plain failure stays the code's", fakeRun{exit: 1, stderr: "1 test failed\n"}, failed,
			"npx eslint in web exited with 1 and reported nothing parseable; see the output"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := step{
				kind: sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_LINT, name: "npx eslint",
				dirs:  []ProjectDir{{Rel: "web"}},
				argv:  func(ProjectDir) []string { return []string{"npx", "eslint"} },
				parse: noParse,
			}
			res := &sandboxv1.StepResult{}
			execStep(context.Background(), fakeRunner(map[string]fakeRun{"npx": c.run}), s, res, DefaultOutputLimit)
			if res.Status != c.status || res.Message != c.msg {
				t.Errorf("%s %q\nwant %s %q", res.Status, res.Message, c.status, c.msg)
			}
			if hasErrors(res.Diagnostics) {
				t.Errorf("error diagnostics: %v", diagStrings(res.Diagnostics))
			}
		})
	}
}

// TestValidatePublicModuleWithoutCompiler validates github.com/cespare/xxhash/v2, unmodified,
// with no C compiler on PATH: its dynamic test builds a plugin, which needs cgo. The test
// step is the environment's ERROR, not the code's FAILED; vet's asmdecl finding in the
// assembly file has a workspace-relative path, a line and a column.
func TestValidatePublicModuleWithoutCompiler(t *testing.T) {
	t.Parallel()
	requireGo(t)
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip(err)
	}
	out, err := exec.Command("go", "env", "GOMODCACHE", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Fields(string(out))
	src := filepath.Join(env[0], "github.com", "cespare", "xxhash", "v2@v2.3.0")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("github.com/cespare/xxhash/v2@v2.3.0 is not in this machine's module cache (%v) and there is no network to fetch it", err)
	}
	// A PATH with the go command and gofmt only.
	bin := t.TempDir()
	gofmt := filepath.Join(env[1], "bin", "gofmt")
	if resolved, err := filepath.EvalSymlinks(gobin); err == nil {
		gobin = resolved
	}
	for name, target := range map[string]string{"go": gobin, "gofmt": gofmt} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	copyTree(t, src, root)
	resp, err := Validate(context.Background(), root, execRunner(root, bin), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Passed {
		t.Error("Passed = true: the test step could not run")
	}
	test := findStep(t, resp.Steps, "go test")
	// "a C compiler" (cgo turned off without one) or "gcc" when CGO_ENABLED=1 is set.
	if test.Status != errored || !strings.HasPrefix(test.Message, "environment: the sandbox lacks ") || !strings.Contains(test.Message, "this is not an error in the code") {
		t.Errorf("go test: %s %q, want ERROR saying the sandbox lacks a C compiler; diagnostics:\n%s\noutput:\n%s", test.Status, test.Message, strings.Join(diagStrings(test.Diagnostics), "\n"), test.Output)
	}
	if hasErrors(test.Diagnostics) || !slices.ContainsFunc(test.Diagnostics, isEnvironmental) {
		t.Errorf("go test diagnostics: want only the environment's:\n%s", strings.Join(diagStrings(test.Diagnostics), "\n"))
	}
	vet := findStep(t, resp.Steps, "go vet")
	if !slices.ContainsFunc(vet.Diagnostics, func(d *typev1.Diagnostic) bool {
		return d.Path == "xxhash_amd64.s" && d.Line == 189 && d.Column == 1 && d.Rule == "asmdecl"
	}) {
		t.Errorf("go vet: want the asmdecl finding at xxhash_amd64.s:189:1, got\n%s", strings.Join(diagStrings(vet.Diagnostics), "\n"))
	}
	for _, s := range resp.Steps {
		for _, d := range s.Diagnostics {
			if filepath.IsAbs(d.Path) {
				t.Errorf("%s: diagnostic not workspace-relative: %s", s.Command, diagString(d))
			}
		}
	}
}

// TestValidateCgoErrorPositions builds a cgo package with errors in its C file (gcc
// present): the diagnostic names the C file by its workspace path, with line and column.
func TestValidateCgoErrorPositions(t *testing.T) {
	t.Parallel()
	requireGo(t)
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc is not installed on this machine")
	}
	root := writeTree(t, map[string]string{
		"svc/go.mod":  "module example.com/svc\n\ngo 1.22\n",
		"svc/c/c.go":  "package c\n\n// #include \"c.h\"\nimport \"C\"\n\nfunc F() int { return int(C.f()) }\n",
		"svc/c/c.h":   "int f(void);\n",
		"svc/c/c.c":   "#include \"c.h\"\nint f(void) { return 1 }\n",
		"svc/s/s.go":  "package s\n\nfunc Add(a, b int) int\n",
		"svc/s/s.s":   "#include \"textflag.h\"\n\nTEXT ·Add(SB),NOSPLIT,$0-24\n\tMOVQ a+0(FP), AX\n\tBOGUS AX\n\tRET\n",
		"svc/ok/a.go": "package ok\n",
	})
	resp, err := Validate(context.Background(), root, execRunner(root, ""), Options{Steps: []sandboxv1.ValidationStepKind{sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK}})
	if err != nil {
		t.Fatal(err)
	}
	build := findStep(t, resp.Steps, "go build")
	if build.Status != failed {
		t.Errorf("go build: %s, want FAILED", build.Status)
	}
	for _, want := range []struct {
		path      string
		line, col int32
		substr    string
	}{
		{"svc/c/c.c", 2, 23, "expected"},
		{"svc/s/s.s", 5, 0, `unrecognized instruction "BOGUS"`},
	} {
		if !slices.ContainsFunc(build.Diagnostics, func(d *typev1.Diagnostic) bool {
			return d.Path == want.path && d.Line == want.line && d.Column == want.col && strings.Contains(d.Message, want.substr) && d.Severity == typev1.Severity_SEVERITY_ERROR
		}) {
			t.Errorf("no ERROR at %s:%d:%d %q in\n%s", want.path, want.line, want.col, want.substr, strings.Join(diagStrings(build.Diagnostics), "\n"))
		}
	}
}
