package analysis

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// memSource is an in-memory workspace that records what was read.
type memSource struct {
	files   map[string]string
	listErr error
	readErr map[string]error

	mu   sync.Mutex
	read []string
}

func (m *memSource) List(context.Context) ([]string, error) {
	if m.listErr != nil {
		return nil, m.listErr
	}
	var out []string
	for p := range m.files {
		out = append(out, p)
	}
	return out, nil
}

func (m *memSource) Read(_ context.Context, p string) (string, error) {
	m.mu.Lock()
	m.read = append(m.read, p)
	m.mu.Unlock()
	if err := m.readErr[p]; err != nil {
		return "", err
	}
	c, ok := m.files[p]
	if !ok {
		return "", status.Error(codes.NotFound, "no such file")
	}
	return c, nil
}

const (
	create = typev1.FileAction_FILE_ACTION_CREATE
	modify = typev1.FileAction_FILE_ACTION_MODIFY
	del    = typev1.FileAction_FILE_ACTION_DELETE
)

func pf(path string, action typev1.FileAction, content string, deps ...string) *builderv1.PlannedFile {
	return &builderv1.PlannedFile{Path: path, Action: action, Content: content, DependsOn: deps}
}

// nodes returns the graph's nodes as path → depends_on (nil for none).
func nodes(g *builderv1.DependencyGraph) map[string][]string {
	out := map[string][]string{}
	for _, n := range g.GetNodes() {
		out[n.GetPath()] = n.GetDependsOn()
	}
	return out
}

func cycles(g *builderv1.DependencyGraph) [][]string {
	var out [][]string
	for _, c := range g.GetCycles() {
		out = append(out, c.GetPaths())
	}
	return out
}

func stats(g *builderv1.DependencyGraph) map[string][2]int32 {
	out := map[string][2]int32{}
	for _, s := range g.GetStats() {
		out[s.GetLanguage()] = [2]int32{s.GetFiles(), s.GetEdges()}
	}
	return out
}

func TestAnalyze(t *testing.T) {
	tests := []struct {
		name       string
		workspace  map[string]string // nil: no workspace
		planned    []*builderv1.PlannedFile
		newProject bool

		nodes    map[string][]string
		order    []string
		cycles   [][]string
		stats    map[string][2]int32
		strategy builderv1.BuildStrategy
		newProj  bool
		notRead  []string // workspace files that must not be read
	}{
		{
			name:       "go module with planned new files declaring depends_on",
			workspace:  map[string]string{},
			newProject: false,
			planned: []*builderv1.PlannedFile{
				pf("go.mod", create, "module example.com/app\n\ngo 1.22\n"),
				pf("cmd/app/main.go", create, "", "internal/store/store.go", "internal/api/api.go"),
				pf("internal/api/api.go", create, "", "internal/store/store.go"),
				pf("internal/store/store.go", create, ""),
			},
			nodes: map[string][]string{
				"go.mod":                  nil,
				"cmd/app/main.go":         {"internal/api/api.go", "internal/store/store.go"},
				"internal/api/api.go":     {"internal/store/store.go"},
				"internal/store/store.go": nil,
			},
			order:    []string{"go.mod", "internal/store/store.go", "internal/api/api.go", "cmd/app/main.go"},
			stats:    map[string][2]int32{"go": {3, 3}},
			strategy: builderv1.BuildStrategy_BUILD_STRATEGY_SCAFFOLD_FIRST, // empty workspace
			newProj:  true,
		},
		{
			name: "go: planned MODIFY depends transitively through an existing file",
			workspace: map[string]string{
				"go.mod":               "module example.com/app\n",
				"README.md":            "# app\n",
				"main.go":              "package main\n\nimport _ \"example.com/app/service\"\n\nfunc main() {}\n",
				"service/service.go":   "package service\n\nimport _ \"example.com/app/util\"\n",
				"util/util.go":         "package util\n\nimport _ \"example.com/app/model\"\n",
				"model/model.go":       "package model\n",
				"other/other.go":       "package other\n",
				"web/static/style.css": "body {}\n",
			},
			planned: []*builderv1.PlannedFile{
				pf("main.go", modify, ""),
				pf("model/extra.go", create, ""),
				pf("other/other.go", modify, ""),
			},
			nodes: map[string][]string{
				// main.go → service.go → util.go → model/{model,extra}.go
				"main.go":        {"model/extra.go"},
				"model/extra.go": nil,
				"other/other.go": nil,
			},
			order:    []string{"model/extra.go", "other/other.go", "main.go"},
			stats:    map[string][2]int32{"go": {6, 4}},
			strategy: builderv1.BuildStrategy_BUILD_STRATEGY_DEPENDENCY_ORDER,
			notRead:  []string{"README.md", "web/static/style.css"},
		},
		{
			name: "typescript: type-only import makes no edge, index file import does",
			workspace: map[string]string{
				"package.json":              `{"name":"web"}`,
				"tsconfig.json":             `{}`,
				"src/types.ts":              "export type User = { id: string }\n",
				"src/components/index.tsx":  "export const Button = () => <button/>\n",
				"src/components/Button.css": ".b {}\n",
			},
			planned: []*builderv1.PlannedFile{
				pf("src/app.tsx", create, strings.Join([]string{
					"import type { User } from './types'",
					"import { Button } from './components'",
					"export const App = (u: User) => <Button/>",
				}, "\n")),
				pf("src/types.ts", modify, ""),
				pf("src/components/index.tsx", modify, ""),
			},
			nodes: map[string][]string{
				"src/app.tsx":              {"src/components/index.tsx"},
				"src/types.ts":             nil,
				"src/components/index.tsx": nil,
			},
			order:    []string{"src/components/index.tsx", "src/app.tsx", "src/types.ts"},
			stats:    map[string][2]int32{"typescript": {3, 1}},
			strategy: builderv1.BuildStrategy_BUILD_STRATEGY_DEPENDENCY_ORDER,
			notRead:  []string{"src/components/Button.css"},
		},
		{
			name: "python: through an existing module",
			workspace: map[string]string{
				"app/__init__.py": "",
				"app/main.py":     "from app import service\n",
				"app/service.py":  "from .models import User\n",
				"app/models.py":   "class User: ...\n",
			},
			planned: []*builderv1.PlannedFile{
				pf("app/main.py", modify, ""),
				pf("app/models.py", modify, ""),
				pf("app/cli.py", create, "import app.main\n"),
			},
			nodes: map[string][]string{
				"app/main.py":   {"app/models.py"},
				"app/models.py": nil,
				"app/cli.py":    {"app/main.py"},
			},
			order:    []string{"app/models.py", "app/main.py", "app/cli.py"},
			stats:    map[string][2]int32{"python": {5, 3}},
			strategy: builderv1.BuildStrategy_BUILD_STRATEGY_DEPENDENCY_ORDER,
		},
		{
			name: "cycle between two planned files",
			workspace: map[string]string{
				"lib/x.ts": "export const x = 1\n",
			},
			planned: []*builderv1.PlannedFile{
				pf("lib/b.ts", create, "import { a } from './a'\nexport const b = () => a\n"),
				pf("lib/a.ts", create, "import { b } from './b'\nexport const a = () => b\n"),
			},
			nodes: map[string][]string{
				"lib/b.ts": {"lib/a.ts"},
				"lib/a.ts": {"lib/b.ts"},
			},
			// depgraph sorts the cycle; the answer breaks it in plan order.
			order:    []string{"lib/b.ts", "lib/a.ts"},
			cycles:   [][]string{{"lib/b.ts", "lib/a.ts"}},
			stats:    map[string][2]int32{"typescript": {3, 2}},
			strategy: builderv1.BuildStrategy_BUILD_STRATEGY_DEPENDENCY_ORDER,
		},
		{
			name: "cycle through an existing file keeps its planned members",
			workspace: map[string]string{
				"a.py":   "import mid\n",
				"mid.py": "import b\n",
				"b.py":   "import a\n",
			},
			planned: []*builderv1.PlannedFile{
				pf("a.py", modify, ""),
				pf("b.py", modify, ""),
			},
			nodes:    map[string][]string{"a.py": {"b.py"}, "b.py": {"a.py"}},
			order:    []string{"a.py", "b.py"},
			cycles:   [][]string{{"a.py", "b.py"}},
			stats:    map[string][2]int32{"python": {3, 3}},
			strategy: builderv1.BuildStrategy_BUILD_STRATEGY_DEPENDENCY_ORDER,
		},
		{
			name: "three-file cycle in ring order, self-import, one planned member of an existing cycle",
			workspace: map[string]string{
				"a.py":   "import b\n",
				"b.py":   "import c\n",
				"c.py":   "import a\n",
				"s.py":   "import s\n",
				"m.py":   "import mid\n",
				"mid.py": "import m\n",
			},
			planned: []*builderv1.PlannedFile{
				pf("a.py", modify, ""),
				pf("c.py", modify, ""),
				pf("b.py", modify, ""),
				pf("s.py", modify, ""),
				pf("m.py", modify, ""),
			},
			nodes: map[string][]string{
				"a.py": {"b.py"}, "b.py": {"c.py"}, "c.py": {"a.py"}, "s.py": nil, "m.py": nil,
			},
			order:    []string{"a.py", "c.py", "b.py", "m.py", "s.py"},
			cycles:   [][]string{{"a.py", "b.py", "c.py"}, {"s.py"}},
			stats:    map[string][2]int32{"python": {6, 5}},
			strategy: builderv1.BuildStrategy_BUILD_STRATEGY_DEPENDENCY_ORDER,
		},
		{
			name: "independent files: sequential; delete is a node",
			workspace: map[string]string{
				"a.py": "X = 1\n",
				"b.py": "Y = 2\n",
			},
			planned: []*builderv1.PlannedFile{
				pf("a.py", modify, ""),
				pf("b.py", del, ""),
				pf("docs/notes.md", create, "notes"),
			},
			nodes:    map[string][]string{"a.py": nil, "b.py": nil, "docs/notes.md": nil},
			order:    []string{"a.py", "b.py", "docs/notes.md"},
			stats:    map[string][2]int32{"python": {2, 0}},
			strategy: builderv1.BuildStrategy_BUILD_STRATEGY_SEQUENTIAL,
			notRead:  []string{"b.py"},
		},
		{
			name:       "no workspace, new project requested",
			workspace:  nil,
			newProject: true,
			planned: []*builderv1.PlannedFile{
				pf("index.js", create, "const u = require('./util')\n"),
				pf("util.js", create, ""),
			},
			nodes:    map[string][]string{"index.js": {"util.js"}, "util.js": nil},
			order:    []string{"util.js", "index.js"},
			stats:    map[string][2]int32{"javascript": {2, 1}},
			strategy: builderv1.BuildStrategy_BUILD_STRATEGY_SCAFFOLD_FIRST,
			newProj:  true,
		},
		{
			name:      "no workspace, not new",
			workspace: nil,
			planned: []*builderv1.PlannedFile{
				pf("a.go", modify, ""),
			},
			nodes:    map[string][]string{"a.go": nil},
			order:    []string{"a.go"},
			stats:    map[string][2]int32{"go": {1, 0}},
			strategy: builderv1.BuildStrategy_BUILD_STRATEGY_SEQUENTIAL,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var src Source
			var ms *memSource
			if tc.workspace != nil {
				ms = &memSource{files: tc.workspace}
				src = ms
			}
			res, err := Analyze(context.Background(), src, tc.planned, tc.newProject)
			if err != nil {
				t.Fatalf("Analyze: %v", err)
			}
			g := res.Graph
			got := nodes(g)
			for p, d := range got {
				if len(d) == 0 {
					got[p] = nil
				}
			}
			if !reflect.DeepEqual(got, tc.nodes) {
				t.Errorf("nodes = %v, want %v", got, tc.nodes)
			}
			if len(g.GetNodes()) != len(tc.planned) {
				t.Errorf("%d nodes, want one per planned file (%d)", len(g.GetNodes()), len(tc.planned))
			}
			for i, n := range g.GetNodes() {
				if n.GetPath() != tc.planned[i].GetPath() {
					t.Errorf("node %d = %s, want request order %s", i, n.GetPath(), tc.planned[i].GetPath())
				}
			}
			if !reflect.DeepEqual(g.GetOrder(), tc.order) {
				t.Errorf("order = %v, want %v", g.GetOrder(), tc.order)
			}
			if !reflect.DeepEqual(cycles(g), tc.cycles) {
				t.Errorf("cycles = %v, want %v", cycles(g), tc.cycles)
			}
			if !reflect.DeepEqual(stats(g), tc.stats) {
				t.Errorf("stats = %v, want %v", stats(g), tc.stats)
			}
			langs := []string{}
			for _, s := range g.GetStats() {
				langs = append(langs, s.GetLanguage())
			}
			if !sort.StringsAreSorted(langs) {
				t.Errorf("stats not sorted by language: %v", langs)
			}
			if res.Strategy != tc.strategy {
				t.Errorf("strategy = %v (%s), want %v", res.Strategy, res.Reason, tc.strategy)
			}
			if res.Reason == "" || strings.Contains(res.Reason, "\n") {
				t.Errorf("reason = %q, want one line", res.Reason)
			}
			if res.NewProject != tc.newProj {
				t.Errorf("NewProject = %v, want %v", res.NewProject, tc.newProj)
			}
			if ms != nil {
				want := make([]string, 0, len(tc.workspace))
				for p := range tc.workspace {
					want = append(want, p)
				}
				sort.Strings(want)
				if !reflect.DeepEqual(res.Existing, want) {
					t.Errorf("Existing = %v, want %v", res.Existing, want)
				}
				for _, p := range tc.notRead {
					for _, r := range ms.read {
						if r == p {
							t.Errorf("%s was read", p)
						}
					}
				}
			} else if res.Existing != nil {
				t.Errorf("Existing = %v without a workspace", res.Existing)
			}
		})
	}
}

func TestAnalyzeReadErrors(t *testing.T) {
	planned := []*builderv1.PlannedFile{pf("a.py", modify, "")}

	// A file that vanished between List and Read is left out.
	ms := &memSource{
		files:   map[string]string{"a.py": "import b\n", "b.py": ""},
		readErr: map[string]error{"b.py": status.Error(codes.NotFound, "gone")},
	}
	res, err := Analyze(context.Background(), ms, planned, false)
	if err != nil {
		t.Fatalf("Analyze: %v", err)
	}
	if got := stats(res.Graph)["python"]; got != [2]int32{1, 0} {
		t.Errorf("python stats = %v, want 1 file 0 edges", got)
	}

	// Any other read error fails the analysis.
	boom := status.Error(codes.Unavailable, "sandbox down")
	ms = &memSource{files: map[string]string{"a.py": ""}, readErr: map[string]error{"a.py": boom}}
	if _, err := Analyze(context.Background(), ms, planned, false); status.Code(err) != codes.Unavailable {
		t.Errorf("err = %v, want Unavailable", err)
	}
	// So does a listing error.
	ms = &memSource{listErr: errors.New("list failed")}
	if _, err := Analyze(context.Background(), ms, planned, false); err == nil {
		t.Error("no error for a failed listing")
	}
	// Invalid planned files are InvalidArgument.
	_, err = Analyze(context.Background(), nil, nil, false)
	wantInvalid(t, err, "files")
}

func TestChooseStrategy(t *testing.T) {
	indep := &builderv1.DependencyGraph{Nodes: []*builderv1.DependencyNode{{Path: "a"}, {Path: "b"}}}
	dep := &builderv1.DependencyGraph{Nodes: []*builderv1.DependencyNode{{Path: "a", DependsOn: []string{"b"}}, {Path: "b"}}}
	tests := []struct {
		name       string
		newProject bool
		g          *builderv1.DependencyGraph
		want       builderv1.BuildStrategy
	}{
		{"new project wins", true, dep, builderv1.BuildStrategy_BUILD_STRATEGY_SCAFFOLD_FIRST},
		{"new project without deps", true, indep, builderv1.BuildStrategy_BUILD_STRATEGY_SCAFFOLD_FIRST},
		{"dependencies", false, dep, builderv1.BuildStrategy_BUILD_STRATEGY_DEPENDENCY_ORDER},
		{"independent", false, indep, builderv1.BuildStrategy_BUILD_STRATEGY_SEQUENTIAL},
		{"nil graph", false, nil, builderv1.BuildStrategy_BUILD_STRATEGY_SEQUENTIAL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, reason := ChooseStrategy(tc.newProject, tc.g)
			if got != tc.want {
				t.Errorf("strategy = %v, want %v", got, tc.want)
			}
			if reason == "" || strings.Contains(reason, "\n") {
				t.Errorf("reason = %q, want one line", reason)
			}
		})
	}
}

// wantInvalid asserts an InvalidArgument status whose message names field.
func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("got %v, want InvalidArgument", err)
	}
	if msg := status.Convert(err).Message(); !strings.HasPrefix(msg, field+": ") {
		t.Fatalf("error %q does not name %q", msg, field)
	}
}

func TestCheckRequest(t *testing.T) {
	ok := func() []*builderv1.PlannedFile {
		return []*builderv1.PlannedFile{
			pf("a.go", create, ""),
			pf("b.go", modify, "", "a.go"),
			pf("c.go", del, ""),
		}
	}
	many := make([]*builderv1.PlannedFile, MaxPlannedFiles+1)
	for i := range many {
		many[i] = pf(fmt.Sprintf("f%d.go", i), create, "")
	}
	tests := []struct {
		name  string
		req   *builderv1.AnalyzeDependenciesRequest
		field string // "" for valid
	}{
		{"valid", &builderv1.AnalyzeDependenciesRequest{Files: ok()}, ""},
		{"valid with sandbox", &builderv1.AnalyzeDependenciesRequest{Files: ok(), SandboxId: "0b5e6a3e-3c1f-4d0e-9d7c-2f7b1c2a9e11"}, ""},
		{"nil request", nil, "files"},
		{"no files", &builderv1.AnalyzeDependenciesRequest{}, "files"},
		{"too many files", &builderv1.AnalyzeDependenciesRequest{Files: many}, "files"},
		{"nil file", &builderv1.AnalyzeDependenciesRequest{Files: []*builderv1.PlannedFile{pf("a.go", create, ""), nil}}, "files[1]"},
		{"empty path", &builderv1.AnalyzeDependenciesRequest{Files: append(ok(), pf("", create, ""))}, "files[3].path"},
		{"absolute path", &builderv1.AnalyzeDependenciesRequest{Files: append(ok(), pf("/etc/passwd", create, ""))}, "files[3].path"},
		{"dotdot path", &builderv1.AnalyzeDependenciesRequest{Files: append(ok(), pf("a/../../x.go", create, ""))}, "files[3].path"},
		{"dot segment", &builderv1.AnalyzeDependenciesRequest{Files: append(ok(), pf("./x.go", create, ""))}, "files[3].path"},
		{"trailing slash", &builderv1.AnalyzeDependenciesRequest{Files: append(ok(), pf("dir/", create, ""))}, "files[3].path"},
		{"backslash", &builderv1.AnalyzeDependenciesRequest{Files: append(ok(), pf(`a\b.go`, create, ""))}, "files[3].path"},
		{"duplicate path", &builderv1.AnalyzeDependenciesRequest{Files: append(ok(), pf("b.go", create, ""))}, "files[3].path"},
		{"unspecified action", &builderv1.AnalyzeDependenciesRequest{Files: append(ok(), pf("d.go", typev1.FileAction_FILE_ACTION_UNSPECIFIED, ""))}, "files[3].action"},
		{"unknown action", &builderv1.AnalyzeDependenciesRequest{Files: append(ok(), pf("d.go", typev1.FileAction(42), ""))}, "files[3].action"},
		{"unknown dependency", &builderv1.AnalyzeDependenciesRequest{Files: append(ok(), pf("d.go", create, "", "a.go", "zzz.go"))}, "files[3].depends_on[1]"},
		{"self dependency", &builderv1.AnalyzeDependenciesRequest{Files: []*builderv1.PlannedFile{pf("a.go", create, "", "a.go")}}, "files[0].depends_on[0]"},
		{"empty dependency", &builderv1.AnalyzeDependenciesRequest{Files: []*builderv1.PlannedFile{pf("a.go", create, "", "")}}, "files[0].depends_on[0]"},
		{"bad sandbox id", &builderv1.AnalyzeDependenciesRequest{Files: ok(), SandboxId: "sandbox-1"}, "sandbox_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckRequest(tc.req)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("CheckRequest: %v", err)
				}
				return
			}
			wantInvalid(t, err, tc.field)
		})
	}
}

// fakeSandbox serves ListFiles in pages and ReadFile from a map.
type fakeSandbox struct {
	sandboxv1.SandboxServiceClient // nil: other methods panic
	pages                          [][]*sandboxv1.FileInfo
	files                          map[string]string
	listReqs                       []*sandboxv1.ListFilesRequest
}

func (f *fakeSandbox) ListFiles(_ context.Context, in *sandboxv1.ListFilesRequest, _ ...grpc.CallOption) (*sandboxv1.ListFilesResponse, error) {
	f.listReqs = append(f.listReqs, in)
	i := 0
	if in.GetPageToken() != "" {
		i = int(in.GetPageToken()[0] - '0')
	}
	resp := &sandboxv1.ListFilesResponse{Files: f.pages[i]}
	if i+1 < len(f.pages) {
		resp.NextPageToken = string(rune('0' + i + 1))
	}
	return resp, nil
}

func (f *fakeSandbox) ReadFile(_ context.Context, in *sandboxv1.ReadFileRequest, _ ...grpc.CallOption) (*sandboxv1.ReadFileResponse, error) {
	c, ok := f.files[in.GetPath()]
	if !ok {
		return nil, status.Error(codes.NotFound, "no such file")
	}
	return &sandboxv1.ReadFileResponse{Content: []byte(c), Size: int64(len(c))}, nil
}

func TestSandboxSource(t *testing.T) {
	const id = "0b5e6a3e-3c1f-4d0e-9d7c-2f7b1c2a9e11"
	fs := &fakeSandbox{
		pages: [][]*sandboxv1.FileInfo{
			{{Path: "a", IsDir: true}, {Path: "a/x.go"}},
			{{Path: "b.py"}, {Path: "c", IsDir: true}},
			{{Path: "c/d.ts"}},
		},
		files: map[string]string{"b.py": "import x\n"},
	}
	src := SandboxSource(fs, id)
	got, err := src.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if want := []string{"a/x.go", "b.py", "c/d.ts"}; !reflect.DeepEqual(got, want) {
		t.Errorf("List = %v, want %v", got, want)
	}
	if len(fs.listReqs) != 3 {
		t.Fatalf("%d ListFiles calls, want 3", len(fs.listReqs))
	}
	for i, r := range fs.listReqs {
		if r.GetSandboxId() != id || !r.GetRecursive() || r.GetPageSize() != 10000 {
			t.Errorf("request %d = %v", i, r)
		}
	}
	if fs.listReqs[1].GetPageToken() != "1" || fs.listReqs[2].GetPageToken() != "2" {
		t.Errorf("page tokens not followed: %v", fs.listReqs)
	}
	c, err := src.Read(context.Background(), "b.py")
	if err != nil || c != "import x\n" {
		t.Errorf("Read = %q, %v", c, err)
	}
	if _, err := src.Read(context.Background(), "nope"); status.Code(err) != codes.NotFound {
		t.Errorf("Read missing: %v, want NotFound", err)
	}
}
