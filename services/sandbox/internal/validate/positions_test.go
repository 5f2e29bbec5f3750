package validate

import (
	"slices"
	"strings"
	"testing"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// TestParsePositions: every diagnostic has a workspace-relative path and its line and
// column, whatever the file type and wherever the tool ran (the container's /workspace,
// the host directory of the local backend, a module below the workspace root).
func TestParsePositions(t *testing.T) {
	t.Parallel()
	root := ProjectDir{Rel: "."}
	inSandbox := ProjectDir{Rel: ".", Abs: "/workspace"}
	cg := ProjectDir{Rel: ".", Module: "example.com/cg"}
	cases := []struct {
		name  string
		parse func() []*typev1.Diagnostic
		want  []string
	}{
		{
			name: "go vet -json asmdecl finding in the container",
			parse: func() []*typev1.Diagnostic {
				return ParseGoVetJSON([]byte(`{"github.com/cespare/xxhash/v2": {"asmdecl": [{"posn": "/workspace/xxhash_amd64.s:189:1", "end": "/workspace/xxhash_amd64.s:189:1", "message": "[amd64] Sum64: invalid offset h+0(FP); expected h+8(FP)"}]}}`), inSandbox)
			},
			want: []string{"xxhash_amd64.s:189:1 ERROR [go vet/asmdecl] [amd64] Sum64: invalid offset h+0(FP); expected h+8(FP)"},
		},
		{
			name: "go vet -json asmdecl finding, the sandbox directory unknown",
			parse: func() []*typev1.Diagnostic {
				return ParseGoVetJSON([]byte(`{"github.com/cespare/xxhash/v2": {"asmdecl": [{"posn": "/workspace/xxhash_amd64.s:189:1", "message": "[amd64] Sum64: invalid offset"}]}}`), root)
			},
			want: []string{"xxhash_amd64.s:189:1 ERROR [go vet/asmdecl] [amd64] Sum64: invalid offset"},
		},
		{
			name: "go vet -json asmdecl, real output with the host path (local backend)",
			parse: func() []*typev1.Diagnostic {
				return ParseGoVetJSON(readTestdata(t, "govet_json_asmdecl.stdout"), ProjectDir{Rel: ".", Abs: "/tmp/vcap2/xx"})
			},
			want: []string{"xxhash_amd64.s:189:1 ERROR [go vet/asmdecl] [amd64] writeBlocks: unknown variable s; offset 0 is d+0(FP)"},
		},
		{
			name: "go vet -json asmdecl, host root known but not the module's directory",
			parse: func() []*typev1.Diagnostic {
				return ParseGoVetJSON(readTestdata(t, "govet_json_asmdecl.stdout"), ProjectDir{Rel: "xx", Root: "/tmp/vcap2"})
			},
			want: []string{"xx/xxhash_amd64.s:189:1 ERROR [go vet/asmdecl] [amd64] writeBlocks: unknown variable s; offset 0 is d+0(FP)"},
		},
		{
			name: "go vet text: asmdecl line, relative and absolute",
			parse: func() []*typev1.Diagnostic {
				out := append(readTestdata(t, "govet_asmdecl.txt"), "/workspace/xxhash_amd64.s:189:1: [amd64] Sum64: invalid offset h+0(FP); expected h+8(FP)\n"...)
				return ParseGoBuild(out, "go vet", root)
			},
			want: []string{
				"xxhash_amd64.s:189:1 ERROR [go vet/] [amd64] writeBlocks: unknown variable s; offset 0 is d+0(FP)",
				"xxhash_amd64.s:189:1 ERROR [go vet/] [amd64] Sum64: invalid offset h+0(FP); expected h+8(FP)",
			},
		},
		{
			name: "go vet text in a module below the root: vet: prefix, ./ names, # headers",
			parse: func() []*typev1.Diagnostic {
				return ParseGoBuild([]byte("# example.com/svc/b\n"+
					"vet: ./b/b.go:4:14: cannot use \"s\" (untyped string constant) as int value in variable declaration\n"+
					"# example.com/svc/a\n"+
					"./a/a.go:8:14: fmt.Printf format %d has arg s of wrong type string\n"+
					"vet: /workspace/svc/a/a_test.go:3:1: missing return\n"), "go vet", ProjectDir{Rel: "svc", Abs: "/workspace/svc", Module: "example.com/svc"})
			},
			want: []string{
				`svc/b/b.go:4:14 ERROR [go vet/] cannot use "s" (untyped string constant) as int value in variable declaration`,
				"svc/a/a.go:8:14 ERROR [go vet/] fmt.Printf format %d has arg s of wrong type string",
				"svc/a/a_test.go:3:1 ERROR [go vet/] missing return",
			},
		},
		{
			name: "cgo: gcc's error in a header, relative to the package directory under # pkg",
			parse: func() []*typev1.Diagnostic {
				return ParseGoBuild(readTestdata(t, "gobuild_cgo_header.txt"), "go build", cg)
			},
			want: []string{
				"c/c.h:2:22 ERROR [go build/] 'undefined_thing' undeclared (first use in this function)",
				"c/c.h:2:22 INFO [go build/] each undeclared identifier is reported only once for each function it appears in",
			},
		},
		{
			name: "cgo and assembly: a .c file (package-relative) and a .s file (relative to the module)",
			parse: func() []*typev1.Diagnostic {
				return ParseGoBuild(readTestdata(t, "gobuild_cgo_c_asm.txt"), "go build", ProjectDir{Rel: "svc", Abs: "/workspace/svc", Module: "example.com/cg"})
			},
			want: []string{
				`svc/s/s_amd64.s:5:0 ERROR [go build/] unrecognized instruction "BOGUS"`,
				"svc/c/c.c:2:23 ERROR [go build/] expected ‘;’ before ‘}’ token",
			},
		},
		{
			name: "cgo: a warning and a fatal error, test-binary header, C++ file already relative to the module",
			parse: func() []*typev1.Diagnostic {
				return ParseGoBuild([]byte("# example.com/cg/c [example.com/cg/c.test]\n"+
					"./c.c:3:7: warning: unused variable 'x' [-Wunused-variable]\n"+
					"c/w.cc:1:10: fatal error: mylib.h: No such file or directory\n"+
					"# example.com/cg\n"+
					"top.h:1:1: error: unknown type name 'foo'\n"), "go build", cg)
			},
			want: []string{
				"c/c.c:3:7 WARNING [go build/] unused variable 'x' [-Wunused-variable]",
				"c/w.cc:1:10 ERROR [go build/] fatal error: mylib.h: No such file or directory",
				"top.h:1:1 ERROR [go build/] unknown type name 'foo'",
			},
		},
		{
			name: "cgo: without the module path a C name stays relative to where the go command ran",
			parse: func() []*typev1.Diagnostic {
				return ParseGoBuild(readTestdata(t, "gobuild_cgo_header.txt"), "go build", root)
			},
			want: []string{
				"c.h:2:22 ERROR [go build/] 'undefined_thing' undeclared (first use in this function)",
				"c.h:2:22 INFO [go build/] each undeclared identifier is reported only once for each function it appears in",
			},
		},
		{
			name: "go.mod errors, relative and absolute",
			parse: func() []*typev1.Diagnostic {
				out := append(readTestdata(t, "gobuild_gomod.txt"), "go: errors parsing go.mod:\n/workspace/svc/go.mod:5:2: unknown block type: frobnicate\n"...)
				return ParseGoBuild(out, "go build", ProjectDir{Rel: "svc"})
			},
			want: []string{
				"svc/go.mod:3:0 ERROR [go build/] unknown directive: foo",
				"svc/go.mod:5:2 ERROR [go build/] unknown block type: frobnicate",
			},
		},
		{
			name: "host-root-prefixed names from the local backend",
			parse: func() []*typev1.Diagnostic {
				return ParseGoBuild([]byte("# example.com/svc/a\n"+
					"/home/u/ws/svc/a/a.go:3:4: undefined: x\n"+
					"/home/u/ws/shared/s.go:7: imported and not used: \"os\"\n"+
					"/usr/local/go/src/runtime/panic.go:10:2: outside the workspace\n"), "go build", ProjectDir{Rel: "svc", Root: "/home/u/ws"})
			},
			want: []string{
				"svc/a/a.go:3:4 ERROR [go build/] undefined: x",
				`shared/s.go:7:0 ERROR [go build/] imported and not used: "os"`,
				"/usr/local/go/src/runtime/panic.go:10:2 ERROR [go build/] outside the workspace",
			},
		},
		{
			name: "lines that only look located are no findings",
			parse: func() []*typev1.Diagnostic {
				return ParseGoBuild([]byte("2026/11/27 03:10:00 Error building plugin: exit status 1\n"+
					"127.0.0.1:8080: connection refused\n"+
					"localhost:8080: connection refused\n"+
					"asm: assembly of s/s_amd64.s failed\n"+
					"In file included from c/c.go:3:\n"), "go build", root)
			},
			want: []string{},
		},
		{
			name: "tsc, pytest and py_compile with the container's absolute paths",
			parse: func() []*typev1.Diagnostic {
				web := ProjectDir{Rel: "web"}
				d := ParseTSC([]byte("/workspace/web/src/a.tsx(3,5): error TS2322: Type 'string' is not assignable to type 'number'.\n"), web)
				d = append(d, ParsePython([]byte("  File \"/workspace/pkg/bad.py\", line 4\nSyntaxError: invalid syntax\n"+
					"/workspace/tests/test_x.py:12: AssertionError: assert 2 == 3\n"), root)...)
				return d
			},
			want: []string{
				"web/src/a.tsx:3:5 ERROR [tsc/TS2322] Type 'string' is not assignable to type 'number'.",
				"pkg/bad.py:4:0 ERROR [python3/SyntaxError] SyntaxError: invalid syntax",
				"tests/test_x.py:12:0 ERROR [pytest/] AssertionError: assert 2 == 3",
			},
		},
		{
			name: "eslint with the container's absolute paths",
			parse: func() []*typev1.Diagnostic {
				d, _ := ParseESLintJSON([]byte(`[{"filePath":"/workspace/web/src/a.js","messages":[{"ruleId":"semi","severity":2,"message":"Missing semicolon.","line":1,"column":10}]}]`), ProjectDir{Rel: "web"})
				return d
			},
			want: []string{"web/src/a.js:1:10 ERROR [eslint/semi] Missing semicolon."},
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

// TestPkgPathPrefersExistingFile: with the host root known, a C name that reads two ways
// resolves to the file that exists.
func TestPkgPathPrefersExistingFile(t *testing.T) {
	t.Parallel()
	root := writeTree(t, map[string]string{
		"svc/go.mod":       "module example.com/svc\n",
		"svc/c/c.go":       "package c\n",
		"svc/c/c/inner.h":  "",
		"svc/c/c.h":        "",
		"svc/c/top/only.h": "",
	})
	m := ProjectDir{Rel: "svc", Root: root, Module: "example.com/svc"}
	cases := []struct{ in, want string }{
		{"./c.h", "svc/c/c.h"},                // package-relative, exists
		{"c/inner.h", "svc/c/c/inner.h"},      // reads as module-relative, only the package reading exists
		{"c/c.h", "svc/c/c.h"},                // module-relative, exists
		{"top/only.h", "svc/c/top/only.h"},    // package-relative
		{"../other/x.h", "other/x.h"},         // above the package: relative to where go ran
		{"/workspace/svc/c/c.h", "svc/c/c.h"}, // absolute
	}
	for _, c := range cases {
		if got := m.pkgPath(c.in, "c"); got != c.want {
			t.Errorf("pkgPath(%q, c) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := goModulePath(root + "/svc"); got != "example.com/svc" {
		t.Errorf("goModulePath = %q", got)
	}
}
