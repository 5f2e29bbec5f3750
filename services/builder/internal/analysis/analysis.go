// Package analysis answers AnalyzeDependencies: it reads the workspace's source files,
// runs the file-level dependency analysis of package depgraph over them together with the
// planned files, projects the result onto the planned files and chooses a build strategy.
//
// The answer's graph holds planned files only. A planned file depends on another planned
// file when it imports it (or declares it in depends_on) directly, or through a chain of
// files that already exist and are not part of the plan: modifying a.go, which imports
// util.go, which imports the planned b.go, makes a.go depend on b.go.
package analysis

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sort"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/errs"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"
	"github.com/thefold/thefold/services/builder/internal/depgraph"
)

const (
	// MaxPlannedFiles bounds the files of one AnalyzeDependencies request.
	MaxPlannedFiles = 5000
	// MaxReadFiles bounds the workspace files read for one analysis; the rest are left out
	// of the graph (manifests and planned files are read first).
	MaxReadFiles = 20000
	// readers is how many files are read concurrently.
	readers = 8
	// listPageSize is the ListFiles page size (the sandbox's maximum).
	listPageSize = 10000
	// maxListPages guards against a sandbox that never ends its listing.
	maxListPages = 1000
)

// Source is a workspace: its files, as repository-relative '/'-separated paths, and their
// contents.
type Source interface {
	// List returns the paths of the workspace's files (not directories).
	List(ctx context.Context) ([]string, error)
	// Read returns the content of one file.
	Read(ctx context.Context, path string) (string, error)
}

// SandboxSource is the workspace of a sandbox, read through the sandbox service.
func SandboxSource(c sandboxv1.SandboxServiceClient, sandboxID string) Source {
	return &sandboxSource{c: c, id: sandboxID}
}

type sandboxSource struct {
	c  sandboxv1.SandboxServiceClient
	id string
}

// List pages through ListFiles (recursive, ignored folders left out) and skips
// directories.
func (s *sandboxSource) List(ctx context.Context) ([]string, error) {
	var out []string
	token := ""
	for page := 0; ; page++ {
		if page >= maxListPages {
			return nil, fmt.Errorf("list sandbox files: more than %d pages", maxListPages)
		}
		resp, err := s.c.ListFiles(ctx, &sandboxv1.ListFilesRequest{
			SandboxId: s.id,
			Recursive: true,
			PageSize:  listPageSize,
			PageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("list sandbox files: %w", err)
		}
		for _, f := range resp.GetFiles() {
			if !f.GetIsDir() {
				out = append(out, f.GetPath())
			}
		}
		next := resp.GetNextPageToken()
		if next == "" {
			return out, nil
		}
		if next == token {
			return nil, fmt.Errorf("list sandbox files: page token did not advance")
		}
		token = next
	}
}

// Read reads one file with ReadFile.
func (s *sandboxSource) Read(ctx context.Context, p string) (string, error) {
	resp, err := s.c.ReadFile(ctx, &sandboxv1.ReadFileRequest{SandboxId: s.id, Path: p})
	if err != nil {
		return "", fmt.Errorf("read sandbox file %q: %w", p, err)
	}
	return string(resp.GetContent()), nil
}

// Result is the outcome of Analyze.
type Result struct {
	// Graph holds the planned files only (see the package documentation).
	Graph *builderv1.DependencyGraph
	// Strategy and Reason are ChooseStrategy's answer.
	Strategy builderv1.BuildStrategy
	Reason   string
	// NewProject is true when it was requested or the workspace has no files at all.
	NewProject bool
	// Existing lists the workspace's files (all of them, not only those read), sorted;
	// empty without a workspace.
	Existing []string
}

// CheckRequest checks an AnalyzeDependencies request. Every error is an InvalidArgument
// status naming the field (files, files[i].path, files[i].action, files[i].depends_on[j],
// sandbox_id, archive).
func CheckRequest(req *builderv1.AnalyzeDependenciesRequest) error {
	if err := checkFiles(req.GetFiles()); err != nil {
		return err
	}
	if _, err := validate.UUID("sandbox_id", req.GetSandboxId(), false); err != nil {
		return err
	}
	if req.GetSandboxId() != "" && len(req.GetArchive()) > 0 {
		return errs.Invalid("archive", "give sandbox_id or archive, not both")
	}
	return nil
}

// checkFiles checks the planned files: at least one, at most MaxPlannedFiles, valid unique
// paths, an action, and depends_on naming other planned files.
func checkFiles(files []*builderv1.PlannedFile) error {
	switch {
	case len(files) == 0:
		return errs.Invalid("files", "at least one planned file is required")
	case len(files) > MaxPlannedFiles:
		return errs.Invalid("files", "at most %d planned files, got %d", MaxPlannedFiles, len(files))
	}
	index := make(map[string]int, len(files))
	for i, f := range files {
		if f == nil {
			return errs.Invalid(fmt.Sprintf("files[%d]", i), "missing")
		}
		field := fmt.Sprintf("files[%d].path", i)
		if err := validate.Path(field, f.GetPath()); err != nil {
			return err
		}
		if j, dup := index[f.GetPath()]; dup {
			return errs.Invalid(field, "%q is also files[%d].path", f.GetPath(), j)
		}
		index[f.GetPath()] = i
		if err := validate.Enum(fmt.Sprintf("files[%d].action", i), f.GetAction(), false); err != nil {
			return err
		}
	}
	for i, f := range files {
		for j, d := range f.GetDependsOn() {
			field := fmt.Sprintf("files[%d].depends_on[%d]", i, j)
			switch {
			case d == f.GetPath():
				return errs.Invalid(field, "%q is the file itself", validate.Truncate(d, 200))
			default:
				if _, ok := index[d]; !ok {
					return errs.Invalid(field, "%q is not a planned file", validate.Truncate(d, 200))
				}
			}
		}
	}
	return nil
}

// ChooseStrategy chooses the build strategy for a graph of planned files and says why in
// one line: a new project is scaffolded first; otherwise the dependency order is used when
// any planned file depends on another, else the plan's order.
func ChooseStrategy(newProject bool, g *builderv1.DependencyGraph) (builderv1.BuildStrategy, string) {
	if newProject {
		return builderv1.BuildStrategy_BUILD_STRATEGY_SCAFFOLD_FIRST,
			"new project: scaffold first, then the files in dependency order"
	}
	dependent := 0
	for _, n := range g.GetNodes() {
		if len(n.GetDependsOn()) > 0 {
			dependent++
		}
	}
	if dependent > 0 {
		reason := fmt.Sprintf("%d of %d planned files depend on other planned files: build in dependency order",
			dependent, len(g.GetNodes()))
		if c := len(g.GetCycles()); c > 0 {
			reason += fmt.Sprintf(" (%d cycle(s) generated together)", c)
		}
		return builderv1.BuildStrategy_BUILD_STRATEGY_DEPENDENCY_ORDER, reason
	}
	return builderv1.BuildStrategy_BUILD_STRATEGY_SEQUENTIAL,
		fmt.Sprintf("no planned file depends on another (%d files): build in plan order", len(g.GetNodes()))
}

// relevant reports whether a workspace file matters for the graph: a source file of a
// language depgraph reads, or a manifest.
func relevant(p string) bool {
	switch path.Base(p) {
	case "go.mod", "package.json", "tsconfig.json":
		return true
	}
	switch path.Ext(p) {
	case ".go", ".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs", ".py":
		return true
	}
	return false
}

// manifest reports whether p is a manifest, read before the source files.
func manifest(p string) bool {
	switch path.Base(p) {
	case "go.mod", "package.json", "tsconfig.json":
		return true
	}
	return false
}

// skippableRead reports whether a read error only means that one file cannot be analysed
// (it vanished, is not text, is too large), rather than that the workspace cannot be read.
func skippableRead(err error) bool {
	switch status.Code(err) {
	case codes.NotFound, codes.InvalidArgument, codes.FailedPrecondition, codes.ResourceExhausted, codes.OutOfRange:
		return true
	}
	return false
}

// Analyze reads the workspace src (nil: no workspace), analyses the dependencies of the
// existing files and the planned ones, and returns the graph of the planned files with the
// strategy. A planned CREATE or MODIFY file with content is analysed with that content
// instead of the workspace's; one without content is analysed with the workspace's
// content when it exists, else only with its declared depends_on. A DELETE file is
// analysed without content. Invalid planned files are an InvalidArgument error as
// CheckRequest gives it.
func Analyze(ctx context.Context, src Source, planned []*builderv1.PlannedFile, newProject bool) (*Result, error) {
	if err := checkFiles(planned); err != nil {
		return nil, err
	}
	res := &Result{NewProject: newProject}

	// given: planned content that replaces or adds a file; deleted: files the plan removes.
	given := map[string]string{}
	deleted := map[string]bool{}
	plannedIdx := make(map[string]int, len(planned))
	for i, p := range planned {
		plannedIdx[p.GetPath()] = i
		switch p.GetAction() {
		case typev1.FileAction_FILE_ACTION_DELETE:
			deleted[p.GetPath()] = true
		default:
			if p.GetContent() != "" {
				given[p.GetPath()] = p.GetContent()
			}
		}
	}

	var files []depgraph.File
	if src != nil {
		listed, err := src.List(ctx)
		if err != nil {
			return nil, err
		}
		existing := make([]string, 0, len(listed))
		seen := make(map[string]bool, len(listed))
		for _, p := range listed {
			if !seen[p] {
				seen[p] = true
				existing = append(existing, p)
			}
		}
		sort.Strings(existing)
		res.Existing = existing
		if len(existing) == 0 {
			res.NewProject = true
		}
		read, err := readWorkspace(ctx, src, existing, func(p string) bool {
			_, g := given[p]
			return !g && !deleted[p]
		}, plannedIdx)
		if err != nil {
			return nil, err
		}
		files = read
	}
	for _, p := range planned {
		if c, ok := given[p.GetPath()]; ok {
			files = append(files, depgraph.File{Path: p.GetPath(), Content: c})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })

	dplanned := make([]depgraph.Planned, len(planned))
	for i, p := range planned {
		dplanned[i] = depgraph.Planned{Path: p.GetPath(), DependsOn: p.GetDependsOn()}
	}
	g, err := depgraph.Analyze(files, dplanned)
	if err != nil {
		return nil, fmt.Errorf("analyze dependencies: %w", err)
	}
	res.Graph = project(g, planned, plannedIdx)
	res.Strategy, res.Reason = ChooseStrategy(res.NewProject, res.Graph)
	return res, nil
}

// readWorkspace reads the relevant files of the workspace that want accepts, at most
// MaxReadFiles of them (manifests first, then planned files, then by path), readers at a
// time. Files that cannot be read for a reason of their own are left out.
func readWorkspace(ctx context.Context, src Source, existing []string, want func(string) bool, plannedIdx map[string]int) ([]depgraph.File, error) {
	var toRead []string
	for _, p := range existing {
		if relevant(p) && want(p) && validate.RelPath(p) == nil {
			toRead = append(toRead, p)
		}
	}
	rank := func(p string) int {
		if manifest(p) {
			return 0
		}
		if _, ok := plannedIdx[p]; ok {
			return 1
		}
		return 2
	}
	sort.SliceStable(toRead, func(i, j int) bool { return rank(toRead[i]) < rank(toRead[j]) })
	if len(toRead) > MaxReadFiles {
		toRead = toRead[:MaxReadFiles]
	}

	contents := make([]string, len(toRead))
	ok := make([]bool, len(toRead))
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(readers)
	for i, p := range toRead {
		eg.Go(func() error {
			c, err := src.Read(ectx, p)
			if err != nil {
				if skippableRead(err) {
					return nil
				}
				return err
			}
			contents[i], ok[i] = c, true
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	files := make([]depgraph.File, 0, len(toRead))
	for i, p := range toRead {
		if ok[i] {
			files = append(files, depgraph.File{Path: p, Content: contents[i]})
		}
	}
	return files, nil
}

// project restricts depgraph's graph to the planned files.
func project(g *depgraph.Graph, planned []*builderv1.PlannedFile, plannedIdx map[string]int) *builderv1.DependencyGraph {
	out := &builderv1.DependencyGraph{}
	byPlan := func(ps []string) {
		sort.SliceStable(ps, func(i, j int) bool { return plannedIdx[ps[i]] < plannedIdx[ps[j]] })
	}

	// Nodes: the planned files each depends on, directly or through non-planned files.
	deps := make(map[string][]string, len(planned))
	for _, p := range planned {
		d := reach(g, p.GetPath(), plannedIdx)
		byPlan(d)
		deps[p.GetPath()] = d
		out.Nodes = append(out.Nodes, &builderv1.DependencyNode{Path: p.GetPath(), DependsOn: d})
	}

	// Order: depgraph's order of the planned files; within a cycle, plan order.
	cycleOf := map[string]int{}
	for i, c := range g.Cycles {
		for _, p := range c {
			cycleOf[p] = i + 1
		}
	}
	var group []string
	groupID := 0
	flush := func() {
		byPlan(group)
		out.Order = append(out.Order, group...)
		group = group[:0]
	}
	for _, p := range g.Order {
		if _, ok := plannedIdx[p]; !ok {
			continue
		}
		if id := cycleOf[p]; id == 0 || id != groupID {
			flush()
			groupID = id
		}
		group = append(group, p)
	}
	flush()

	// Cycles: depgraph's cycles with their planned members, in ring order when one exists.
	for _, c := range g.Cycles {
		var members []string
		for _, p := range c {
			if _, ok := plannedIdx[p]; ok {
				members = append(members, p)
			}
		}
		if len(members) >= 2 || (len(members) == 1 && len(c) == 1) {
			byPlan(members)
			out.Cycles = append(out.Cycles, &builderv1.DependencyCycle{Paths: ring(members, deps)})
		}
	}

	langs := make([]string, 0, len(g.Stats))
	for l := range g.Stats {
		langs = append(langs, l)
	}
	sort.Strings(langs)
	for _, l := range langs {
		s := g.Stats[l]
		out.Stats = append(out.Stats, &builderv1.LanguageStats{Language: l, Files: int32(s.Files), Edges: int32(s.Edges)})
	}
	return out
}

// reach returns the planned files that from depends on: those it has an edge to, and those
// reachable from it through files that are not planned. from itself is left out.
func reach(g *depgraph.Graph, from string, plannedIdx map[string]int) []string {
	var found []string
	foundSet := map[string]bool{}
	visited := map[string]bool{from: true}
	stack := slices.Clone(g.Edges[from])
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if visited[n] {
			continue
		}
		visited[n] = true
		if _, ok := plannedIdx[n]; ok {
			if !foundSet[n] {
				foundSet[n] = true
				found = append(found, n)
			}
			continue
		}
		for _, d := range g.Edges[n] {
			if !visited[d] {
				stack = append(stack, d)
			}
		}
	}
	return found
}

// maxRingSearch bounds the cycles whose ring order is searched for; larger ones keep plan
// order.
const maxRingSearch = 10

// ring orders the members of a cycle (given in plan order) so that each depends on the next
// and the last on the first, starting with the first in plan order. When no such order
// exists among the projected edges (or the cycle is large), members is returned as is.
func ring(members []string, deps map[string][]string) []string {
	if len(members) < 3 || len(members) > maxRingSearch {
		return members
	}
	in := map[string]bool{}
	for _, m := range members {
		in[m] = true
	}
	dependsOn := func(a, b string) bool { return slices.Contains(deps[a], b) }
	path := []string{members[0]}
	used := map[string]bool{members[0]: true}
	var search func() bool
	search = func() bool {
		last := path[len(path)-1]
		if len(path) == len(members) {
			return dependsOn(last, members[0])
		}
		for _, next := range deps[last] {
			if !in[next] || used[next] {
				continue
			}
			used[next] = true
			path = append(path, next)
			if search() {
				return true
			}
			path = path[:len(path)-1]
			used[next] = false
		}
		return false
	}
	if search() {
		return path
	}
	return members
}
