// Package depgraph computes the file-level dependency graph of a repository
// and a deterministic generation order for TheFold's builder.
//
// The builder generates a plan's files one at a time, each with its finished
// dependencies as context, so it needs every file to come after the files it
// depends on. Analyze reads the imports of Go, TypeScript/JavaScript and
// Python files, adds the dependencies declared by planned (not yet written)
// files, and returns the graph, its strongly connected components and a
// topological order of the condensation.
//
// Limitations: Go build constraints (build tags and GOOS/GOARCH file
// suffixes) are not evaluated, so every .go file counts, whatever platform it
// targets; Go directories whose names begin with '_' or '.' are treated like
// any other. TypeScript imports whose bindings are all unused are elided by
// esbuild exactly as the TypeScript compiler does, so they create no edge.
// Python imports are found syntactically, also inside functions and
// conditional blocks.
package depgraph

import (
	"container/heap"
	"fmt"
	"path"
	"sort"
	"strings"
)

// File is a repository file: its '/'-separated path relative to the
// repository root, and its content.
type File struct {
	Path, Content string
}

// Planned is a file the plan will create. It has no content yet, so its only
// outgoing edges are the repository paths it declares it depends on.
type Planned struct {
	Path      string
	DependsOn []string
}

// Graph is the result of Analyze: the files, their dependency edges, a
// generation order and the dependency cycles that order had to break.
type Graph struct {
	// Nodes holds every file path (existing source files of the supported
	// languages plus planned files), sorted.
	Nodes []string
	// Edges maps a file to the files it depends on, sorted, deduplicated and
	// without self-edges. Files without dependencies have no entry.
	Edges map[string][]string
	// Order is a topological order: every file comes after all of its
	// dependencies, except within a cycle, whose members appear
	// consecutively and sorted.
	Order []string
	// Cycles lists the strongly connected components of more than one file
	// (or a single file importing itself), each sorted, in Order's order.
	Cycles [][]string
	// Stats counts files and outgoing edges by language ("go",
	// "typescript", "javascript", "python"); planned files of other types
	// are not counted.
	Stats map[string]LanguageStats
}

// LanguageStats counts the nodes of one language and the edges leaving them.
type LanguageStats struct {
	Files, Edges int
}

// language returns the language of a path by its extension, or "".
func language(p string) string {
	switch path.Ext(p) {
	case ".go":
		return "go"
	case ".ts", ".tsx", ".mts", ".cts":
		return "typescript"
	case ".js", ".jsx", ".mjs", ".cjs":
		return "javascript"
	case ".py":
		return "python"
	}
	return ""
}

// validPath reports why p is not a clean relative '/'-separated path, or "".
func validPath(p string) string {
	switch {
	case p == "":
		return "empty path"
	case strings.HasPrefix(p, "/"):
		return "absolute path"
	case strings.Contains(p, "\\"):
		return "backslash in path"
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "":
			return "empty path segment"
		case ".", "..":
			return "'" + seg + "' path segment"
		}
	}
	return ""
}

// edgeSet accumulates edges and self-imports while the graph is built.
type edgeSet struct {
	out  map[string]map[string]bool
	self map[string]bool
}

func (e *edgeSet) add(from, to string) {
	if from == to {
		e.self[from] = true
		return
	}
	m := e.out[from]
	if m == nil {
		m = map[string]bool{}
		e.out[from] = m
	}
	m[to] = true
}

// Analyze builds the dependency graph of files (existing files with content)
// and planned (new files with their declared dependencies). A planned path
// that also exists in files is the same node, with the declared edges added.
// It returns an error for an invalid or duplicate path and for a declared
// dependency that is not a node; unparsable source files merely lose their
// edges.
func Analyze(files []File, planned []Planned) (*Graph, error) {
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		if why := validPath(f.Path); why != "" {
			return nil, fmt.Errorf("depgraph: invalid file path %q: %s", f.Path, why)
		}
		if seen[f.Path] {
			return nil, fmt.Errorf("depgraph: duplicate file path %q", f.Path)
		}
		seen[f.Path] = true
	}
	plannedSeen := map[string]bool{}
	for _, p := range planned {
		if why := validPath(p.Path); why != "" {
			return nil, fmt.Errorf("depgraph: invalid planned path %q: %s", p.Path, why)
		}
		if plannedSeen[p.Path] {
			return nil, fmt.Errorf("depgraph: duplicate planned path %q", p.Path)
		}
		plannedSeen[p.Path] = true
	}

	nodes := map[string]bool{}
	for _, f := range files {
		if language(f.Path) != "" && !(language(f.Path) == "go" && goSkipped(f.Path)) {
			nodes[f.Path] = true
		}
	}
	for _, p := range planned {
		nodes[p.Path] = true
	}
	// plannedOnly are the planned paths without content.
	plannedOnly := map[string]bool{}
	for _, p := range planned {
		if !seen[p.Path] {
			plannedOnly[p.Path] = true
		}
	}

	es := &edgeSet{out: map[string]map[string]bool{}, self: map[string]bool{}}
	goEdges(files, plannedOnly, es)
	if err := jsEdges(files, plannedOnly, es); err != nil {
		return nil, err
	}
	pyEdges(files, plannedOnly, es)

	for _, p := range planned {
		for _, d := range p.DependsOn {
			if !nodes[d] {
				return nil, fmt.Errorf("depgraph: planned file %q depends on unknown path %q", p.Path, d)
			}
			es.add(p.Path, d)
		}
	}

	g := &Graph{Edges: map[string][]string{}, Stats: map[string]LanguageStats{}}
	for n := range nodes {
		g.Nodes = append(g.Nodes, n)
	}
	sort.Strings(g.Nodes)
	for _, n := range g.Nodes {
		lang := language(n)
		var deps []string
		for d := range es.out[n] {
			if nodes[d] {
				deps = append(deps, d)
			}
		}
		sort.Strings(deps)
		if len(deps) > 0 {
			g.Edges[n] = deps
		}
		if lang != "" {
			s := g.Stats[lang]
			s.Files++
			s.Edges += len(deps)
			g.Stats[lang] = s
		}
	}
	g.Order, g.Cycles = order(g.Nodes, g.Edges, es.self)
	return g, nil
}

// order computes the strongly connected components of the graph (Tarjan),
// then orders the condensation with Kahn's algorithm, always emitting the
// ready component whose smallest path is smallest.
func order(nodes []string, edges map[string][]string, self map[string]bool) ([]string, [][]string) {
	idx := make(map[string]int, len(nodes))
	for i, n := range nodes {
		idx[n] = i
	}
	adj := make([][]int, len(nodes))
	for i, n := range nodes {
		for _, d := range edges[n] {
			adj[i] = append(adj[i], idx[d])
		}
	}
	comp := tarjan(adj)
	nc := 0
	for _, c := range comp {
		if c+1 > nc {
			nc = c + 1
		}
	}
	members := make([][]int, nc)
	for i, c := range comp { // i ascending, so members are sorted by path
		members[c] = append(members[c], i)
	}
	// pending[c] = number of distinct components c depends on.
	pending := make([]int, nc)
	dependents := make([][]int, nc)
	for c := range members {
		deps := map[int]bool{}
		for _, i := range members[c] {
			for _, j := range adj[i] {
				if comp[j] != c {
					deps[comp[j]] = true
				}
			}
		}
		pending[c] = len(deps)
		for d := range deps {
			dependents[d] = append(dependents[d], c)
		}
	}
	h := &compHeap{key: func(c int) int { return members[c][0] }}
	for c := range members {
		if pending[c] == 0 {
			heap.Push(h, c)
		}
	}
	var ord []string
	var cycles [][]string
	for h.Len() > 0 {
		c := heap.Pop(h).(int)
		var names []string
		for _, i := range members[c] {
			names = append(names, nodes[i])
		}
		ord = append(ord, names...)
		if len(names) > 1 || self[names[0]] {
			cycles = append(cycles, names)
		}
		for _, d := range dependents[c] {
			pending[d]--
			if pending[d] == 0 {
				heap.Push(h, d)
			}
		}
	}
	return ord, cycles
}

// compHeap is a min-heap of component ids ordered by key.
type compHeap struct {
	items []int
	key   func(int) int
}

func (h *compHeap) Len() int           { return len(h.items) }
func (h *compHeap) Less(i, j int) bool { return h.key(h.items[i]) < h.key(h.items[j]) }
func (h *compHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *compHeap) Push(x any)         { h.items = append(h.items, x.(int)) }
func (h *compHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

// tarjan returns the strongly connected component of every vertex, using an
// iterative version of Tarjan's algorithm so deep graphs cannot exhaust the
// stack.
func tarjan(adj [][]int) []int {
	n := len(adj)
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	comp := make([]int, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	next, nc := 0, 0
	type frame struct{ v, e int }
	for root := 0; root < n; root++ {
		if index[root] >= 0 {
			continue
		}
		call := []frame{{root, 0}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			if f.e < len(adj[f.v]) {
				w := adj[f.v][f.e]
				f.e++
				if index[w] < 0 {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{w, 0})
				} else if onStack[w] && index[w] < low[f.v] {
					low[f.v] = index[w]
				}
				continue
			}
			v := f.v
			call = call[:len(call)-1]
			if len(call) > 0 {
				p := call[len(call)-1].v
				if low[v] < low[p] {
					low[p] = low[v]
				}
			}
			if low[v] == index[v] {
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp[w] = nc
					if w == v {
						break
					}
				}
				nc++
			}
		}
	}
	return comp
}
