package engine_test

// Builds run by the engine end to end over a real builder schema, with the sandbox and the
// ai service faked at the gRPC boundary (fakes_test.go): what the model calls that write
// code are given, and how a step's errors in files a later step changes are treated.

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/google/go-cmp/cmp"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/tokens"

	"github.com/thefold/thefold/services/builder/internal/engine"
	"github.com/thefold/thefold/services/builder/internal/outline"
	"github.com/thefold/thefold/services/builder/internal/store"
	"github.com/thefold/thefold/services/builder/migrations"
)

// shop is the workspace: lib.Greet, called by app.Welcome.
var shop = map[string]string{
	"go.mod": "module example.com/shop\n\ngo 1.22\n",
	"lib/greet.go": `// Package lib greets people.
package lib

import "strings"

// Greet greets name.
func Greet(name string) string {
	return "hello " + strings.TrimSpace(name)
}
`,
	"lib/names.go": `package lib

// Names are the people greeted when nobody is named.
var Names = []string{"ada"}

// Loud greets name loudly.
func Loud(name string) string {
	return Greet(name) + "!"
}
`,
	"lib/greet_test.go": "package lib\n\nimport \"testing\"\n\nfunc TestGreet(t *testing.T) {}\n",
	"app/app.go": `package app

import (
	"fmt"

	"example.com/shop/lib"
	"example.com/shop/store"
)

// Welcome welcomes name and remembers them.
func Welcome(name string) string {
	_ = store.Save(store.Item{Name: name})
	return fmt.Sprint(lib.Greet(name))
}
`,
	"app/routes.go": "package app\n\n// Routes are the app's paths.\nvar Routes = []string{\"/\"}\n",
	"store/store.go": `// Package store keeps things.
package store

// Item is one thing kept.
type Item struct{ Name string }

// Save keeps i.
func Save(i Item) error {
	return nil
}
`,
	"docs/greetings.md": "# Greetings\n\nGreetings are polite and short.\n",
	"README.md":         "# shop\n",
}

// The plan: lib.Greet takes a greeting (step s1), then app.Welcome passes one (s2).
const (
	greetTwoArgs = `// Package lib greets people.
package lib

// Greet greets name with greeting.
func Greet(greeting, name string) string {
	return greeting + " " + name
}
`
	appFixed = `package app

import (
	"fmt"

	"example.com/shop/lib"
	"example.com/shop/store"
)

// Welcome welcomes name and remembers them.
func Welcome(name string) string {
	_ = store.Save(store.Item{Name: name})
	return fmt.Sprint(lib.Greet("welcome", name))
}
`
	taskTitle = "Greetings take the greeting word"
	taskDesc  = "People want to choose the word they are greeted with.\n\nKeep lib.Greet's name; callers pass the word."
)

func shopPlan() *typev1.Plan {
	return &typev1.Plan{Summary: "lib.Greet takes a greeting; app passes \"welcome\"\nThen the docs.", Steps: []*typev1.PlanStep{
		{Id: "s1", Path: "lib/greet.go", Action: typev1.FileAction_FILE_ACTION_MODIFY, Description: "Greet(greeting, name string)"},
		{Id: "s2", Path: "app/app.go", Action: typev1.FileAction_FILE_ACTION_MODIFY, Description: "Welcome passes \"welcome\"", DependsOn: []string{"s1"}},
	}}
}

// harness is an engine over a fresh builder schema, the fake sandbox and the fake ai.
type harness struct {
	t     *testing.T
	store *store.Store
	sb    *fakeSandbox
	ai    *fakeAI
	eng   *engine.Engine
}

func newHarness(t *testing.T, sb *fakeSandbox, ai *fakeAI, cfg engine.Config) *harness {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "builder", migrations.FS)
	st := store.New(pool, nil)
	sbConn := serve(t, func(s *grpc.Server) { sandboxv1.RegisterSandboxServiceServer(s, sb) })
	aiConn := serve(t, func(s *grpc.Server) { aiv1.RegisterAIServiceServer(s, ai) })
	cfg.LeaseExpiry, cfg.RenewEvery, cfg.CallTimeout, cfg.ValidateTimeout = 10*time.Second, time.Second, 10*time.Second, 10*time.Second
	eng := engine.New(st, aiv1.NewAIServiceClient(aiConn), sandboxv1.NewSandboxServiceClient(sbConn), nil, nil, cfg, nil)
	return &harness{t: t, store: st, sb: sb, ai: ai, eng: eng}
}

// build creates a build of plan with the task and context paths, runs it to its end and
// returns it with its steps.
func (h *harness) build(plan *typev1.Plan, contextPaths ...string) (*store.Build, []*store.Step) {
	h.t.Helper()
	id := h.create(plan, contextPaths...)
	runCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.eng.Run(runCtx, id); err != nil {
		h.t.Fatalf("run: %v", err)
	}
	return h.get(id)
}

// create creates a build of plan with the task and context paths (not run) and returns its
// id.
func (h *harness) create(plan *typev1.Plan, contextPaths ...string) string {
	h.t.Helper()
	b := &store.Build{
		BuildJob:  &builderv1.BuildJob{OwnerId: "alice", RequestId: "r1", SandboxId: sandboxID, Repo: "acme/shop", Plan: plan},
		TaskTitle: taskTitle, TaskDescription: taskDesc, ContextPaths: contextPaths, MaxIterations: 3,
		MemoryHints: []string{"callers of a changed function are updated in the same change"},
	}
	created, _, err := h.store.Create(context.Background(), b, []byte("hash"), func(context.Context, pgx.Tx, string) error { return nil })
	if err != nil {
		h.t.Fatal(err)
	}
	return created.Id
}

// get returns build id as stored, with its steps.
func (h *harness) get(id string) (*store.Build, []*store.Step) {
	h.t.Helper()
	got, err := h.store.Get(context.Background(), "alice", id)
	if err != nil {
		h.t.Fatal(err)
	}
	steps, err := h.store.Steps(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return got, steps
}

// events are the build's events as stored, in order.
func (h *harness) events(id string) []*builderv1.WatchBuildResponse {
	h.t.Helper()
	rows, err := h.store.Pool().Query(context.Background(), `SELECT payload FROM events WHERE stream = $1 AND aggregate_id = $2 ORDER BY id`, store.EventStream, id)
	if err != nil {
		h.t.Fatal(err)
	}
	payloads, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		h.t.Fatal(err)
	}
	var out []*builderv1.WatchBuildResponse
	for _, p := range payloads {
		e := &builderv1.WatchBuildResponse{}
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(p, e); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func (h *harness) logs(id string) []string {
	var out []string
	for _, e := range h.events(id) {
		if l := e.GetLog(); l != nil {
			out = append(out, l.Message)
		}
	}
	return out
}

// fileStep is the FILE step of path.
func fileStep(t *testing.T, steps []*store.Step, path string) *store.Step {
	t.Helper()
	for _, st := range steps {
		if st.Kind == builderv1.StepKind_STEP_KIND_FILE && st.Path == path {
			return st
		}
	}
	t.Fatalf("no file step for %s", path)
	return nil
}

// ref is a reference file as the engine gives it: the file's outline.
func ref(path string) *aiv1.ContextFile {
	return &aiv1.ContextFile{Path: path, Content: outline.File(path, shop[path])}
}

func paths(files []*aiv1.ContextFile) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	return out
}

func wantCompleted(t *testing.T, b *store.Build) {
	t.Helper()
	if b.Status != builderv1.BuildStatus_BUILD_STATUS_COMPLETED {
		t.Fatalf("build %v: %s", b.Status, b.Error)
	}
}

// GenerateFile is given the task as the person wrote it, the whole plan and the outlines
// of the repository files around the target: the build's context paths, the target's
// package, the module's packages it imports — not the target, not its dependency files —
// each file read from the sandbox once per run.
func TestGenerateFileGetsTheTaskThePlanAndOutlines(t *testing.T) {
	t.Parallel()
	sb := newSandbox(shop, goCheck)
	ai := &fakeAI{generate: func(req *aiv1.GenerateFileRequest) string {
		return map[string]string{"lib/greet.go": greetTwoArgs, "app/app.go": appFixed}[req.File.Path]
	}}
	h := newHarness(t, sb, ai, engine.DefaultConfig)
	b, _ := h.build(shopPlan(), "docs/greetings.md", "lib/greet.go", "no/such/file.go")
	wantCompleted(t, b)

	gens, fixes := ai.calls()
	if len(gens) != 2 || len(fixes) != 0 {
		t.Fatalf("%d generations and %d fixes, want 2 and 0", len(gens), len(fixes))
	}
	for _, g := range gens {
		if g.Task.GetTitle() != taskTitle {
			t.Errorf("%s: task title %q, want the task's", g.File.Path, g.Task.GetTitle())
		}
		d := g.Task.GetDescription()
		if !strings.HasPrefix(d, taskDesc+"\n\n## The plan's summary\n"+shopPlan().Summary+"\n\n") ||
			!strings.Contains(d, "\n- callers of a changed function are updated in the same change") {
			t.Errorf("%s: task description\n%s\nwant the task as written, then the plan's summary under a heading, then the hints", g.File.Path, d)
		}
		if !proto.Equal(g.Plan, shopPlan()) {
			t.Errorf("%s: plan %v, want the build's", g.File.Path, g.Plan)
		}
	}
	if gens[0].Task.GetDescription() != gens[1].Task.GetDescription() {
		t.Error("the task differs between the generations of one build")
	}

	// lib/greet.go: the context paths (itself left out, a missing one skipped), its package
	// (not the test), and nothing it imports from the module.
	if diff := cmp.Diff([]*aiv1.ContextFile{ref("docs/greetings.md"), ref("lib/names.go")}, gens[0].ReferenceFiles, protocmp.Transform()); diff != "" {
		t.Errorf("lib/greet.go's reference files (-want +got):\n%s", diff)
	}
	// app/app.go: the context path, its package, then what it imports from the module — lib
	// without greet.go, which it gets whole as a dependency file.
	if got := paths(gens[1].DependencyFiles); !slices.Equal(got, []string{"lib/greet.go"}) {
		t.Fatalf("app/app.go's dependency files %v", got)
	}
	want := []*aiv1.ContextFile{ref("docs/greetings.md"), ref("app/routes.go"), ref("lib/names.go"), ref("store/store.go")}
	if diff := cmp.Diff(want, gens[1].ReferenceFiles, protocmp.Transform()); diff != "" {
		t.Errorf("app/app.go's reference files (-want +got):\n%s", diff)
	}
	o := gens[1].ReferenceFiles[3].Content
	if !strings.Contains(o, "// Save keeps i.\nfunc Save(i Item) error") || strings.Contains(o, "return nil") {
		t.Errorf("store/store.go's outline:\n%s", o)
	}
	// Read once though both generations use it (the analysis at init reads no Markdown).
	if n := sb.readsOf("docs/greetings.md"); n != 1 {
		t.Errorf("docs/greetings.md read %d times, want once", n)
	}
}

// The reference outlines stop at the budget: the first that does not fit is cut at a line
// and marked truncated, and nothing comes after it.
func TestReferenceFilesStopAtTheBudget(t *testing.T) {
	t.Parallel()
	first := outline.File("store/store.go", shop["store/store.go"])
	second := outline.File("lib/names.go", shop["lib/names.go"])
	lines := strings.Split(second, "\n")
	cut := strings.Join(lines[:3], "\n")
	cfg := engine.DefaultConfig
	cfg.ReferenceBudget = tokens.Count(first) + tokens.Count(cut)
	if tokens.Count(strings.Join(lines[:4], "\n")) <= tokens.Count(cut) {
		t.Fatalf("what is left of the budget holds a fourth line of %q", second)
	}
	sb := newSandbox(shop, goCheck)
	ai := &fakeAI{generate: func(*aiv1.GenerateFileRequest) string { return greetTwoArgs }}
	h := newHarness(t, sb, ai, cfg)
	plan := &typev1.Plan{Summary: "greet with a word", Steps: []*typev1.PlanStep{shopPlan().Steps[0]}}
	h.build(plan, "store/store.go", "lib/names.go", "docs/greetings.md")
	gens, _ := ai.calls()
	if len(gens) != 1 {
		t.Fatalf("%d generations", len(gens))
	}
	want := []*aiv1.ContextFile{{Path: "store/store.go", Content: first}, {Path: "lib/names.go", Content: cut, Truncated: true}}
	if diff := cmp.Diff(want, gens[0].ReferenceFiles, protocmp.Transform()); diff != "" {
		t.Errorf("reference files (-want +got):\n%s", diff)
	}

	// A budget of 0 gives none.
	cfg.ReferenceBudget = 0
	ai = &fakeAI{generate: func(*aiv1.GenerateFileRequest) string { return greetTwoArgs }}
	newHarness(t, newSandbox(shop, goCheck), ai, cfg).build(plan, "store/store.go")
	if gens, _ := ai.calls(); len(gens) != 1 || len(gens[0].ReferenceFiles) != 0 {
		t.Errorf("with no budget: %v", gens)
	}
}

// Step 1 changes lib.Greet's signature; its caller, app/app.go, fails to compile until
// step 2 rewrites it. Step 1 passes without a fix round (the caller's error is step 2's,
// and the build's log says so), step 2 fixes the caller, the integrate phase's full
// validation passes. Whether the sandbox fails a file for a dependent's errors or not.
func TestAStepPassesWhenOnlyALaterStepsFileFails(t *testing.T) {
	t.Parallel()
	for _, strict := range []bool{false, true} {
		name := map[bool]string{false: "dependents do not fail the check", true: "dependents fail the check"}[strict]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sb := newSandbox(shop, goCheck)
			sb.strict = strict
			appAfterStep1 := ""
			ai := &fakeAI{generate: func(req *aiv1.GenerateFileRequest) string {
				if req.File.Path == "app/app.go" {
					appAfterStep1 = req.File.ExistingContent
					return appFixed
				}
				return greetTwoArgs
			}}
			h := newHarness(t, sb, ai, engine.DefaultConfig)
			b, steps := h.build(shopPlan())
			wantCompleted(t, b)
			if _, fixes := ai.calls(); len(fixes) != 0 {
				t.Fatalf("%d fix rounds, want none: the first was asked to fix %v", len(fixes), fixes[0].Errors)
			}
			lib, app := fileStep(t, steps, "lib/greet.go"), fileStep(t, steps, "app/app.go")
			if lib.Status != builderv1.BuildStepStatus_BUILD_STEP_STATUS_SUCCEEDED || len(lib.FixRounds) != 0 {
				t.Errorf("step %d (lib/greet.go) %v with %d fix rounds", lib.StepNumber, lib.Status, len(lib.FixRounds))
			}
			if ds := lib.Validation.GetDiagnostics(); len(ds) != 1 || ds[0].Path != "app/app.go" {
				t.Errorf("step %d's validation %v, want app/app.go's error", lib.StepNumber, ds)
			}
			if !strings.Contains(appAfterStep1, "lib.Greet(name)") {
				t.Errorf("step %d rewrote app/app.go before step %d:\n%s", lib.StepNumber, app.StepNumber, appAfterStep1)
			}
			if app.Status != builderv1.BuildStepStatus_BUILD_STEP_STATUS_SUCCEEDED || !app.Validation.GetPassed() || sb.content("app/app.go") != appFixed {
				t.Errorf("step %d (app/app.go) %v, validation %v", app.StepNumber, app.Status, app.Validation)
			}
			logs := h.logs(b.Id)
			wantLog := "lib/greet.go passes for its step: 1 error(s) left in files later steps change"
			if !slices.ContainsFunc(logs, func(l string) bool {
				return strings.HasPrefix(l, wantLog) && strings.Contains(l, "app/app.go (step 2 modify)") && strings.Contains(l, "not enough arguments in call to lib.Greet")
			}) {
				t.Errorf("no log %q naming app/app.go and step 2 in %q", wantLog, logs)
			}
			if !b.Report.GetValidationPassed() || len(b.Report.GetFailedPaths()) != 0 || b.Report.GetFixRounds() != 0 {
				t.Errorf("report %v", b.Report)
			}
		})
	}
}

// FixFile is told the file's earlier rounds (what each did and what was left) and, apart
// from the errors to fix, the errors a later step's file has (expected, not this fix's);
// each round keeps the model's explanation.
func TestFixFileGetsPreviousRoundsAndExpectedErrors(t *testing.T) {
	t.Parallel()
	sb := newSandbox(shop, goCheck)
	broken := strings.Replace(greetTwoArgs, `return greeting + " " + name`, `return greeting + " " + BROKEN`, 1)
	stillBroken := strings.Replace(greetTwoArgs, "package lib\n", "package lib\n\nvar _ = BROKEN\n", 1)
	ai := &fakeAI{
		generate: func(req *aiv1.GenerateFileRequest) string {
			return map[string]string{"lib/greet.go": broken, "app/app.go": appFixed}[req.File.Path]
		},
		fix: func(req *aiv1.FixFileRequest) (string, string) {
			if req.Attempt == 1 {
				return stillBroken, "used name instead of the undefined identifier"
			}
			return greetTwoArgs, "removed the stray declaration"
		},
	}
	h := newHarness(t, sb, ai, engine.DefaultConfig)
	b, steps := h.build(shopPlan(), "docs/greetings.md")
	wantCompleted(t, b)

	gens, fixes := ai.calls()
	if len(fixes) != 2 {
		t.Fatalf("%d fix rounds, want 2", len(fixes))
	}
	appErr := &typev1.Diagnostic{Path: "app/app.go", Line: 13, Severity: typev1.Severity_SEVERITY_ERROR,
		Message: "not enough arguments in call to lib.Greet\n\thave (string)\n\twant (string, string)", Tool: "go vet"}
	own := func(line int32) *typev1.Diagnostic {
		return &typev1.Diagnostic{Path: "lib/greet.go", Line: line, Severity: typev1.Severity_SEVERITY_ERROR, Message: "undefined: BROKEN", Tool: "go vet"}
	}
	for i, want := range []*aiv1.FixFileRequest{
		{Attempt: 1, Errors: []*typev1.Diagnostic{own(6)}, ExpectedErrors: []*typev1.Diagnostic{appErr}},
		{Attempt: 2, Errors: []*typev1.Diagnostic{own(4)}, ExpectedErrors: []*typev1.Diagnostic{appErr},
			PreviousRounds: []*aiv1.FixHistory{{Round: 1, Explanation: "used name instead of the undefined identifier", ErrorsAfter: []*typev1.Diagnostic{own(4)}}}},
	} {
		got := fixes[i]
		if diff := cmp.Diff(want, &aiv1.FixFileRequest{Attempt: got.Attempt, Errors: got.Errors, ExpectedErrors: got.ExpectedErrors, PreviousRounds: got.PreviousRounds},
			protocmp.Transform()); diff != "" {
			t.Errorf("fix round %d (-want +got):\n%s", i+1, diff)
		}
		if !proto.Equal(got.Plan, shopPlan()) || !proto.Equal(got.Task, gens[0].Task) {
			t.Errorf("fix round %d: plan %v, task %v; want the build's plan and the generation's task", i+1, got.Plan, got.Task)
		}
		if diff := cmp.Diff([]*aiv1.ContextFile{ref("docs/greetings.md"), ref("lib/names.go")}, got.ReferenceFiles, protocmp.Transform()); diff != "" {
			t.Errorf("fix round %d's reference files (-want +got):\n%s", i+1, diff)
		}
	}

	lib := fileStep(t, steps, "lib/greet.go")
	var why []string
	for _, fr := range lib.FixRounds {
		why = append(why, fr.Explanation)
	}
	if !slices.Equal(why, []string{"used name instead of the undefined identifier", "removed the stray declaration"}) || !lib.FixRounds[1].Resolved {
		t.Errorf("stored rounds' explanations %q, resolved %v", why, lib.FixRounds[1].GetResolved())
	}
	if ds := lib.FixRounds[0].DiagnosticsBefore; len(ds) != 1 || ds[0].Path != "lib/greet.go" {
		t.Errorf("round 1 was asked to resolve %v, want lib/greet.go's error only", ds)
	}
	if app := fileStep(t, steps, "app/app.go"); app.Status != builderv1.BuildStepStatus_BUILD_STEP_STATUS_SUCCEEDED || len(app.FixRounds) != 0 {
		t.Errorf("app/app.go: %v with %d rounds", app.Status, len(app.FixRounds))
	}
}

// modelOutputInvalid is the ai service's answer when a model's output stayed unusable.
func modelOutputInvalid(t *testing.T) error {
	t.Helper()
	st, err := status.New(codes.Unavailable, "model fake answered GenerateFile with output that cannot be used, also after 3 repair rounds: the answer has no code").
		WithDetails(&errdetails.ErrorInfo{Reason: errs.ReasonModelOutputInvalid, Domain: errs.AIDomain})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

// A model answer the ai service could not use is a failed fix round, or a generation asked
// again — not a failed build.
func TestUnusableModelOutputIsAFailedRound(t *testing.T) {
	t.Parallel()
	sb := newSandbox(shop, goCheck)
	broken := strings.Replace(greetTwoArgs, `return greeting + " " + name`, `return greeting + " " + BROKEN`, 1)
	ai := &fakeAI{
		generate: func(req *aiv1.GenerateFileRequest) string {
			return map[string]string{"lib/greet.go": broken, "app/app.go": appFixed}[req.File.Path]
		},
		fix: func(*aiv1.FixFileRequest) (string, string) { return greetTwoArgs, "use name" },
		fail: func(method string, n int) error {
			if n == 1 {
				return modelOutputInvalid(t)
			}
			return nil
		},
	}
	h := newHarness(t, sb, ai, engine.DefaultConfig)
	b, steps := h.build(shopPlan())
	wantCompleted(t, b)
	gens, fixes := ai.calls()
	if len(gens) != 3 || gens[0].File.Path != "lib/greet.go" || gens[1].File.Path != "lib/greet.go" || gens[0].RequestId == gens[1].RequestId {
		t.Fatalf("generations %d; want lib/greet.go asked twice with its own keys, then app/app.go", len(gens))
	}
	lib := fileStep(t, steps, "lib/greet.go")
	if len(fixes) != 2 || len(lib.FixRounds) != 2 || !strings.Contains(lib.FixRounds[0].Error, "cannot be used") || !lib.FixRounds[1].Resolved {
		t.Fatalf("fix rounds %v", lib.FixRounds)
	}
	if fixes[1].PreviousRounds[0].GetError() == "" {
		t.Error("the second round is not told the first's answer was unusable")
	}
}

// A file whose generations all stay unusable fails its step with the reason, and the build
// ends failed naming it — at its end, with the rest built and checked, instead of erroring
// out at the first unusable answer.
func TestUnusableGenerationFailsTheStep(t *testing.T) {
	t.Parallel()
	sb := newSandbox(shop, goCheck)
	ai := &fakeAI{
		generate: func(req *aiv1.GenerateFileRequest) string { return greetTwoArgs },
		fail: func(method string, _ int) error {
			if method == "GenerateFile" {
				return modelOutputInvalid(t)
			}
			return nil
		},
	}
	h := newHarness(t, sb, ai, engine.DefaultConfig)
	b, steps := h.build(shopPlan())
	if b.Status != builderv1.BuildStatus_BUILD_STATUS_FAILED || !strings.Contains(b.Error, "planned files not written: lib/greet.go") {
		t.Fatalf("build %v (%s), want FAILED naming lib/greet.go", b.Status, b.Error)
	}
	lib := fileStep(t, steps, "lib/greet.go")
	if lib.Status != builderv1.BuildStepStatus_BUILD_STEP_STATUS_FAILED || !strings.Contains(lib.Error, "could not be used (2 tries)") {
		t.Fatalf("step %v: %q", lib.Status, lib.Error)
	}
	if !slices.Contains(b.Report.GetFailedPaths(), "lib/greet.go") {
		t.Errorf("failed paths %v", b.Report.GetFailedPaths())
	}
}

// A test that fails at its own line may fail on the code under test: its fix round is given
// that code and may change it; the change is written and the test passes.
func TestFailingTestsFixMayChangeTheCodeUnderTest(t *testing.T) {
	t.Parallel()
	const calc = "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a - b }\n"
	const calcTest = "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 2) != 4 {\n\t\tt.Fatal(\"2+2\")\n\t}\n}\n"
	files := maps.Clone(shop)
	files["calc/calc.go"] = calc
	files["calc/other.go"] = "package calc\n\n// Sub subtracts.\nfunc Sub(a, b int) int { return a - b }\n"
	check := func(fs map[string]string) []*typev1.Diagnostic {
		if _, ok := fs["calc/calc_test.go"]; ok && strings.Contains(fs["calc/calc.go"], "a - b") {
			return []*typev1.Diagnostic{{Path: "calc/calc_test.go", Line: 7, Severity: typev1.Severity_SEVERITY_ERROR, Message: "TestAdd: 2+2", Tool: "go test"}}
		}
		return nil
	}
	sb := newSandbox(files, check)
	fixedCalc := strings.Replace(calc, "a - b", "a + b", 1)
	ai := &fakeAI{
		generate: func(*aiv1.GenerateFileRequest) string { return calcTest },
		fixFull: func(req *aiv1.FixFileRequest) *aiv1.FixFileResponse {
			return &aiv1.FixFileResponse{Content: req.Content, Explanation: "Add subtracted",
				RelatedChanges: []*typev1.FileChange{{Path: "calc/calc.go", Action: typev1.FileAction_FILE_ACTION_MODIFY, Content: fixedCalc}}}
		},
	}
	h := newHarness(t, sb, ai, engine.DefaultConfig)
	b, steps := h.build(&typev1.Plan{Summary: "test Add", Steps: []*typev1.PlanStep{
		{Id: "s1", Path: "calc/calc_test.go", Action: typev1.FileAction_FILE_ACTION_CREATE, Description: "TestAdd"}}})
	wantCompleted(t, b)
	_, fixes := ai.calls()
	if len(fixes) != 1 {
		t.Fatalf("%d fix rounds, want 1", len(fixes))
	}
	rel := fixes[0].RelatedFiles
	if len(rel) != 2 || rel[0].Path != "calc/calc.go" || rel[0].Content != calc || rel[1].Path != "calc/other.go" {
		t.Fatalf("related files %v, want calc/calc.go (the file the test names) first, then calc/other.go", rel)
	}
	if sb.content("calc/calc.go") != fixedCalc {
		t.Errorf("the code under test was not changed in the sandbox: %q", sb.content("calc/calc.go"))
	}
	st := fileStep(t, steps, "calc/calc_test.go")
	if fr := st.FixRounds; len(fr) != 1 || !fr[0].Resolved || !slices.Equal(fr[0].ChangedPaths, []string{"calc/calc_test.go", "calc/calc.go"}) {
		t.Errorf("fix round %v", fr)
	}
}
