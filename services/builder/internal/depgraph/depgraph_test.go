package depgraph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/testenv"
)

// edges is shorthand for an expected edge map.
type edges = map[string][]string

// checkOrder verifies that every file comes after its dependencies, except
// within a reported cycle, and that cycle members are consecutive.
func checkOrder(t *testing.T, g *Graph) {
	t.Helper()
	if len(g.Order) != len(g.Nodes) {
		t.Fatalf("order has %d files, nodes %d", len(g.Order), len(g.Nodes))
	}
	pos := map[string]int{}
	for i, n := range g.Order {
		pos[n] = i
	}
	cycleOf := map[string]int{}
	for ci, c := range g.Cycles {
		for k, n := range c {
			cycleOf[n] = ci + 1
			if pos[n] != pos[c[0]]+k {
				t.Errorf("cycle %v not consecutive in order %v", c, g.Order)
			}
		}
	}
	for from, deps := range g.Edges {
		for _, d := range deps {
			if pos[d] > pos[from] && (cycleOf[d] == 0 || cycleOf[d] != cycleOf[from]) {
				t.Errorf("%s ordered before its dependency %s", from, d)
			}
		}
	}
}

func TestAnalyze(t *testing.T) {
	goMod := File{"go.mod", "module example.com/app\n\ngo 1.26\n"}
	tests := []struct {
		name    string
		files   []File
		planned []Planned
		want    edges
		cycles  [][]string
		stats   map[string]LanguageStats
	}{
		{
			name: "go multi-package module",
			files: []File{
				goMod,
				{"cmd/app/main.go", "package main\nimport (\n\t\"fmt\"\n\t\"example.com/app/internal/store\"\n)\nfunc main() { fmt.Println(store.X) }\n"},
				{"internal/store/store.go", "package store\nimport \"example.com/app/internal/model\"\nvar X model.M\n"},
				{"internal/store/util.go", "package store\nimport \"strings\"\nvar _ = strings.ToUpper\n"},
				{"internal/store/store_test.go", "package store_test\nimport (\"testing\"; \"example.com/app/internal/store\"; \"example.com/app/internal/model\")\nfunc TestX(t *testing.T) { _ = store.X; _ = model.M{} }\n"},
				{"internal/model/model.go", "package model\ntype M struct{}\n"},
				{"internal/model/model_test.go", "package model\nimport \"testing\"\nfunc TestM(t *testing.T) {}\n"},
				{"internal/model/testdata/x.go", "package x\nimport \"example.com/app/internal/store\"\n"},
				{"vendor/example.com/v/v.go", "package v\n"},
				{"README.md", "# app"},
			},
			want: edges{
				"cmd/app/main.go":              {"internal/store/store.go", "internal/store/util.go"},
				"internal/store/store.go":      {"internal/model/model.go"},
				"internal/store/store_test.go": {"internal/model/model.go", "internal/store/store.go", "internal/store/util.go"},
			},
			stats: map[string]LanguageStats{"go": {Files: 6, Edges: 6}},
		},
		{
			name: "go nested module and std lib",
			files: []File{
				goMod,
				{"a/a.go", "package a\nimport (\"os\"; \"example.com/app/b\"; \"example.com/app/tools/x\"; \"example.com/tools/x\"; \"github.com/other/mod\")\n"},
				{"b/b.go", "package b\nimport \"net/http\"\n"},
				{"tools/go.mod", "module example.com/tools\n"},
				{"tools/x/x.go", "package x\nimport (\"example.com/tools/y\"; \"example.com/app/b\")\n"},
				{"tools/y/y.go", "package y\n"},
			},
			want: edges{
				"a/a.go":       {"b/b.go"},
				"tools/x/x.go": {"tools/y/y.go"},
			},
		},
		{
			name: "typescript and javascript",
			files: []File{
				{"web/app.ts", strings.Join([]string{
					"import {helper} from './util'",         // extension resolution
					"import {Button} from './components'",   // index file
					"import {esm} from './esm.js'",          // ./x.js names x.ts
					"import type {T} from './types'",        // type-only: no edge
					"export type {U} from './types2'",       // type-only re-export: no edge
					"import {type V, value} from './mixed'", // mixed: edge
					"import React from 'react'",             // bare: no edge
					"const lazy = import('./lazy')",
					"const legacy = require('./legacy')",
					"console.log(helper, Button, esm, value, React, lazy, legacy)",
				}, "\n")},
				{"web/util.ts", "export const helper = 1\n"},
				{"web/components/index.tsx", "export const Button = () => <button/>\n"},
				{"web/esm.ts", "export const esm = 1\n"},
				{"web/types.ts", "export type T = number\n"},
				{"web/types2.ts", "export type U = string\n"},
				{"web/mixed.ts", "export type V = 1\nexport const value = 2\n"},
				{"web/lazy.jsx", "export default function L() { return <div/> }\n"},
				{"web/legacy.cjs", "module.exports = {}\n"},
				{"web/broken.ts", "import {helper} from './util'\nlet x = (((;\n"},
				{"web/decl.d.ts", "export declare const d: number\n"},
				{"web/uses-decl.ts", "import {d} from './decl'\nconsole.log(d)\n"},
			},
			want: edges{
				"web/app.ts": {"web/components/index.tsx", "web/esm.ts", "web/lazy.jsx", "web/legacy.cjs", "web/mixed.ts", "web/util.ts"},
			},
			stats: map[string]LanguageStats{"typescript": {Files: 10, Edges: 6}, "javascript": {Files: 2}},
		},
		{
			name: "python",
			files: []File{
				{"app/__init__.py", ""},
				{"app/main.py", strings.Join([]string{
					"import os, sys  # std lib",
					"import app.config as cfg",
					"from app import services",
					"from . import helpers",
					"from .models import (",
					"    User,  # comment",
					"    Group,",
					")",
					"from app.util \\",
					"    import tool",
					"import requests",
					`s = """import app.never"""`,
				}, "\n")},
				{"app/config.py", "X = 1\n"},
				{"app/services/__init__.py", "from ..config import X\n"},
				{"app/helpers.py", "from .services import Service\n"},
				{"app/models.py", "import json\n"},
				{"app/util.py", ""},
				{"lib/src/mylib/__init__.py", "from mylib.core import run\n"},
				{"lib/src/mylib/core.py", "import json\nimport mylib.core2\n"},
				{"lib/src/mylib/core2.py", ""},
				{"scripts/run.py", "import mylib\nimport app.models\nimport sibling\n"},
				{"scripts/sibling.py", ""},
			},
			want: edges{
				"app/main.py":               {"app/config.py", "app/helpers.py", "app/models.py", "app/services/__init__.py", "app/util.py"},
				"app/services/__init__.py":  {"app/config.py"},
				"app/helpers.py":            {"app/services/__init__.py"},
				"lib/src/mylib/__init__.py": {"lib/src/mylib/core.py"},
				"lib/src/mylib/core.py":     {"lib/src/mylib/core2.py"},
				"scripts/run.py":            {"app/models.py", "lib/src/mylib/__init__.py", "scripts/sibling.py"},
			},
		},
		{
			name: "cycles",
			files: []File{
				{"a.ts", "import './b'\n"}, {"b.ts", "import './a'\n"},
				{"c.py", "import d\n"}, {"d.py", "import e\n"}, {"e.py", "import c\n"},
				{"f.js", "import './f.js'\nimport './a'\n"},
			},
			want: edges{
				"a.ts": {"b.ts"}, "b.ts": {"a.ts"},
				"c.py": {"d.py"}, "d.py": {"e.py"}, "e.py": {"c.py"},
				"f.js": {"a.ts"},
			},
			cycles: [][]string{{"a.ts", "b.ts"}, {"c.py", "d.py", "e.py"}, {"f.js"}},
		},
		{
			name: "planned files",
			files: []File{
				goMod,
				{"cmd/main.go", "package main\nimport \"example.com/app/store\"\n"},
				{"store/store.go", "package store\n"},
				{"web/a.ts", "import './b'\n"},
			},
			planned: []Planned{
				{Path: "store/cache.go", DependsOn: []string{"store/store.go"}},
				{Path: "store/cache_test.go"},
				{Path: "web/b.ts", DependsOn: []string{"store/cache.go"}},
				{Path: "docs/design.md", DependsOn: []string{"web/b.ts", "cmd/main.go"}},
				{Path: "web/a.ts", DependsOn: []string{"docs/design.md"}},
			},
			want: edges{
				"cmd/main.go":    {"store/cache.go", "store/store.go"},
				"store/cache.go": {"store/store.go"},
				"web/b.ts":       {"store/cache.go"},
				"docs/design.md": {"cmd/main.go", "web/b.ts"},
				"web/a.ts":       {"docs/design.md", "web/b.ts"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := Analyze(tt.files, tt.planned)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g.Edges, tt.want) {
				t.Errorf("edges:\n got %v\nwant %v", g.Edges, tt.want)
			}
			if !reflect.DeepEqual(g.Cycles, tt.cycles) {
				t.Errorf("cycles: got %v, want %v", g.Cycles, tt.cycles)
			}
			if tt.stats != nil && !reflect.DeepEqual(g.Stats, tt.stats) {
				t.Errorf("stats: got %v, want %v", g.Stats, tt.stats)
			}
			if !sort.StringsAreSorted(g.Nodes) {
				t.Errorf("nodes not sorted: %v", g.Nodes)
			}
			checkOrder(t, g)
			// The same input in another order gives the same answer.
			rng := rand.New(rand.NewSource(1))
			for i := 0; i < 5; i++ {
				files := append([]File(nil), tt.files...)
				planned := append([]Planned(nil), tt.planned...)
				rng.Shuffle(len(files), func(a, b int) { files[a], files[b] = files[b], files[a] })
				rng.Shuffle(len(planned), func(a, b int) { planned[a], planned[b] = planned[b], planned[a] })
				g2, err := Analyze(files, planned)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(g, g2) {
					t.Fatalf("shuffled input changed the result:\n%+v\n%+v", g, g2)
				}
			}
		})
	}
}

func TestAnalyzeErrors(t *testing.T) {
	tests := []struct {
		name    string
		files   []File
		planned []Planned
		want    string
	}{
		{"unknown dependency", []File{{"a.go", "package a"}}, []Planned{{Path: "b.go", DependsOn: []string{"a.go", "c.go"}}}, `"b.go" depends on unknown path "c.go"`},
		{"absolute", []File{{"/a.go", ""}}, nil, `"/a.go"`},
		{"dotdot", []File{{"a/../b.go", ""}}, nil, `"a/../b.go"`},
		{"backslash", []File{{`a\b.go`, ""}}, nil, `"a\\b.go"`},
		{"empty segment", []File{{"a//b.go", ""}}, nil, `"a//b.go"`},
		{"empty", []File{{"", ""}}, nil, `""`},
		{"duplicate", []File{{"a.go", ""}, {"a.go", ""}}, nil, `duplicate file path "a.go"`},
		{"bad planned", nil, []Planned{{Path: "../x.ts"}}, `"../x.ts"`},
		{"duplicate planned", nil, []Planned{{Path: "x.ts"}, {Path: "x.ts"}}, `duplicate planned path "x.ts"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Analyze(tt.files, tt.planned)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got error %v, want one containing %s", err, tt.want)
			}
		})
	}
}

func TestOrderDeterministicTieBreak(t *testing.T) {
	files := []File{
		{"z.ts", ""}, {"y.ts", "import './x'"}, {"x.ts", ""}, {"b.ts", "import './a'"}, {"a.ts", "import './b'"},
	}
	g, err := Analyze(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a.ts", "b.ts", "x.ts", "y.ts", "z.ts"}
	if !reflect.DeepEqual(g.Order, want) {
		t.Fatalf("order %v, want %v", g.Order, want)
	}
}

// goListPackage is the part of `go list -json` output the comparison uses.
type goListPackage struct {
	ImportPath     string
	Dir            string
	Standard       bool
	GoFiles        []string
	CgoFiles       []string
	IgnoredGoFiles []string
	Imports        []string
	Module         *struct{ Path string }
}

// TestRealModules compares the package-level aggregation of Analyze's Go
// edges with `go list` for modules from the module cache. go list evaluates
// build constraints and Analyze does not, so edges are compared for the
// files go list compiles (GoFiles and CgoFiles); edges contributed only by
// files excluded by build constraints are logged, not failed. go list runs
// with -e so that a package whose external dependencies are missing from the
// module cache still reports its imports. Packages under testdata directories
// (grpc has one) are importable, but Analyze skips testdata by design, so
// go list edges into them are counted and logged instead of compared.
func TestRealModules(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		testenv.SkipOrFail(t, "go env: %v", err)
	}
	cache := strings.TrimSpace(string(out))
	candidates := []string{
		"github.com/jackc/pgx/v5", "google.golang.org/grpc", "golang.org/x/net",
		"golang.org/x/text", "github.com/prometheus/client_golang", "google.golang.org/protobuf",
		"github.com/pressly/goose/v3",
	}
	done := 0
	for _, mod := range candidates {
		if done == 3 {
			break
		}
		matches, _ := filepath.Glob(filepath.Join(cache, filepath.FromSlash(mod)+"@v*"))
		sort.Strings(matches)
		if len(matches) == 0 {
			continue
		}
		dir := matches[len(matches)-1]
		if compareWithGoList(t, mod, dir) {
			done++
		}
	}
	if done == 0 {
		testenv.SkipOrFail(t, "no module from the module cache could be compared")
	}
}

// compareWithGoList runs the comparison for one module directory and reports
// whether it ran.
func compareWithGoList(t *testing.T, mod, dir string) bool {
	cmd := exec.Command("go", "list", "-e", "-deps", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg, _, _ := strings.Cut(stderr.String(), "\n")
		t.Logf("%s: go list failed, skipping: %v: %s", mod, err, msg)
		return false
	}
	pkgDir := map[string]string{} // import path → repository directory
	var pkgs []goListPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p goListPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("%s: decoding go list: %v", mod, err)
		}
		if p.Standard || p.Module == nil || p.Module.Path != mod {
			continue
		}
		rel, err := filepath.Rel(dir, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			rel = ""
		}
		pkgDir[p.ImportPath] = rel
		pkgs = append(pkgs, p)
	}

	var files []File
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != dir && (n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") && d.Name() != "go.mod" || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, File{Path: filepath.ToSlash(rel), Content: string(b)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	g, err := Analyze(files, nil)
	if err != nil {
		t.Fatalf("%s: %v", mod, err)
	}
	checkOrder(t, g)

	compared, edgeCount, ignoredOnly, testdataEdges, mismatches := 0, 0, 0, 0, 0
	for _, p := range pkgs {
		d := pkgDir[p.ImportPath]
		join := func(n string) string {
			if d == "" {
				return n
			}
			return d + "/" + n
		}
		got := map[string]bool{}
		for _, n := range append(append([]string(nil), p.GoFiles...), p.CgoFiles...) {
			for _, dep := range g.Edges[join(n)] {
				got[dirOf(dep)] = true
			}
		}
		fromIgnored := map[string]bool{}
		for _, n := range p.IgnoredGoFiles {
			for _, dep := range g.Edges[join(n)] {
				if !got[dirOf(dep)] {
					fromIgnored[dirOf(dep)] = true
				}
			}
		}
		ignoredOnly += len(fromIgnored)
		want := map[string]bool{}
		for _, imp := range p.Imports {
			td, ok := pkgDir[imp]
			switch {
			case !ok:
			case goSkipped(td + "/x.go"):
				// Packages under testdata (such as grpc/testdata) are
				// importable, but Analyze skips testdata by design.
				testdataEdges++
			default:
				want[td] = true
			}
		}
		if !reflect.DeepEqual(got, want) {
			mismatches++
			t.Errorf("%s: package %s: Analyze %v, go list %v", mod, p.ImportPath, keys(got), keys(want))
		}
		compared++
		edgeCount += len(want)
	}
	t.Logf("%s (%s): %d files, %d packages and %d package edges compared, %d packages differ; %d extra package edges come only from files excluded by build constraints; %d go list edges into testdata packages not compared",
		mod, filepath.Base(dir), len(files), compared, edgeCount, mismatches, ignoredOnly, testdataEdges)
	return true
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// generatedRepo builds a Go repository of pkgs packages with perPkg files
// each; every file imports a few lower-numbered packages.
func generatedRepo(pkgs, perPkg int) []File {
	files := []File{{"go.mod", "module example.com/big\n\ngo 1.26\n"}}
	for p := 0; p < pkgs; p++ {
		for f := 0; f < perPkg; f++ {
			var b strings.Builder
			fmt.Fprintf(&b, "package p%d\n\nimport (\n\t\"fmt\"\n", p)
			for k := 1; k <= 3 && p-k*f-k >= 0; k++ {
				fmt.Fprintf(&b, "\t\"example.com/big/pkg/p%d\"\n", p-k*f-k)
			}
			fmt.Fprintf(&b, ")\n\nfunc F%d() { fmt.Println() }\n", f)
			files = append(files, File{Path: fmt.Sprintf("pkg/p%d/f%d.go", p, f), Content: b.String()})
		}
	}
	return files
}

// BenchmarkAnalyzeGo5000 analyses a generated repository of 5,000 Go files and, for
// comparison, times `go list -e -deps -json ./...` on the same tree written to disk.
func BenchmarkAnalyzeGo5000(b *testing.B) {
	files := generatedRepo(250, 20)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		g, err := Analyze(files, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(g.Order) != 5000 {
			b.Fatalf("order has %d files", len(g.Order))
		}
	}
	per := time.Since(start) / time.Duration(b.N)
	b.StopTimer()
	dir := b.TempDir()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.Content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cmd := exec.Command("go", "list", "-e", "-deps", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	listStart := time.Now()
	if out, err := cmd.Output(); err != nil {
		b.Fatalf("go list: %v\n%s", err, out)
	}
	list := time.Since(listStart)
	b.ReportMetric(float64(per.Milliseconds()), "ms/analysis")
	fmt.Printf("AnalyzeDependencies on 5,000 generated Go files: %d ms per analysis (target ≤ 1 s); go list -e -deps -json ./... on the same tree: %d ms\n",
		per.Milliseconds(), list.Milliseconds())
}
