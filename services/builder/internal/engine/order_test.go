package engine

import (
	"slices"
	"strings"
	"testing"

	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/builder/internal/store"
)

func ids(steps []*typev1.PlanStep) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Id)
	}
	return out
}

func TestOrderStepsFollowsTheGraphAndDeclaredDependencies(t *testing.T) {
	steps := []*typev1.PlanStep{
		{Id: "main", Path: "cmd/main.go"},
		{Id: "lib", Path: "lib/lib.go"},
		{Id: "tidy", Command: []string{"go", "mod", "tidy"}, DependsOn: []string{"main"}},
		{Id: "init", Command: []string{"go", "mod", "init", "x"}},
		{Id: "a", Path: "ring/a.go"},
		{Id: "b", Path: "ring/b.go"},
	}
	g := &builderv1.DependencyGraph{
		Nodes: []*builderv1.DependencyNode{
			{Path: "cmd/main.go", DependsOn: []string{"lib/lib.go", "ring/a.go"}},
			{Path: "lib/lib.go"},
			{Path: "ring/a.go", DependsOn: []string{"ring/b.go"}},
			{Path: "ring/b.go", DependsOn: []string{"ring/a.go"}},
		},
		Order: []string{"lib/lib.go", "ring/a.go", "ring/b.go", "cmd/main.go"},
	}
	got := ids(orderSteps(steps, g, builderv1.BuildStrategy_BUILD_STRATEGY_DEPENDENCY_ORDER))
	// A ready command goes first; files in graph order, the ring broken at its first member
	// by that order and kept together; the command after the file it declares.
	want := []string{"init", "lib", "a", "b", "main", "tidy"}
	if !slices.Equal(got, want) {
		t.Errorf("dependency order %v, want %v", got, want)
	}
	// Sequential keeps the plan's order where the declared dependencies allow it.
	got = ids(orderSteps(steps, g, builderv1.BuildStrategy_BUILD_STRATEGY_SEQUENTIAL))
	want = []string{"main", "lib", "tidy", "init", "a", "b"}
	if !slices.Equal(got, want) {
		t.Errorf("sequential order %v, want %v", got, want)
	}
	// A declared ring of commands still yields every step once.
	ring := []*typev1.PlanStep{{Id: "x", Command: []string{"true"}, DependsOn: []string{"y"}}, {Id: "y", Command: []string{"true"}, DependsOn: []string{"x"}}}
	if got := ids(orderSteps(ring, &builderv1.DependencyGraph{}, builderv1.BuildStrategy_BUILD_STRATEGY_DEPENDENCY_ORDER)); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("ring of commands %v", got)
	}
}

func TestSummarizeNamesTheFirstErrors(t *testing.T) {
	ds := []*typev1.Diagnostic{
		{Path: "a.go", Line: 3, Severity: typev1.Severity_SEVERITY_ERROR, Message: "undefined: x\nmore"},
		{Path: "a.go", Line: 4, Severity: typev1.Severity_SEVERITY_WARNING, Message: "style"},
		{Path: "b.go", Severity: typev1.Severity_SEVERITY_ERROR, Message: "bad"},
		{Path: "c.go", Line: 1, Severity: typev1.Severity_SEVERITY_ERROR, Message: "c"},
		{Path: "d.go", Line: 1, Severity: typev1.Severity_SEVERITY_ERROR, Message: "d"},
	}
	if got, want := summarize(ds), "a.go:3 undefined: x; b.go bad; c.go:1 c (and 1 more)"; got != want {
		t.Errorf("summarize = %q, want %q", got, want)
	}
	if got := summarize(nil); got != "no error diagnostics" {
		t.Errorf("summarize(nil) = %q", got)
	}
}

func TestTaskCarriesContextHintsAndGuidance(t *testing.T) {
	r := &run{b: &store.Build{BuildJob: &builderv1.BuildJob{Plan: &typev1.Plan{Summary: "add a cache\nwith details"}},
		AdditionalContext: "the reviewer asked for tests",
		MemoryHints:       []string{"pgx: use a Batch for many inserts", "errors:\nwrap with %w"}}}
	got := r.task(&store.Step{BuildStep: &builderv1.BuildStep{}, Guidance: "return an int"})
	if got.Title != "add a cache" {
		t.Errorf("title %q", got.Title)
	}
	for _, want := range []string{"the reviewer asked for tests", "not instructions", "\n- pgx: use a Batch for many inserts", "\n- errors:\n  wrap with %w", "Guidance for this retry:\nreturn an int"} {
		if !strings.Contains(got.Description, want) {
			t.Errorf("description lacks %q:\n%s", want, got.Description)
		}
	}
}
