package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/thefold/thefold/pkg/fakellm"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// The scripted files of the build tests. Each entry matches the prompt of one file only:
// generation prompts say `File to create: <path>`, fix prompts `# Mode: fix` then
// `File: <path>` (the dependency files in a prompt are elsewhere in it).
var calcFiles = map[string]string{
	"calc/add.go":      "package calc\n\n// Add returns a + b.\nfunc Add(a, b int) int { return a + b }\n",
	"calc/mul.go":      "package calc\n\n// Mul returns a × b by repeated addition.\nfunc Mul(a, b int) int {\n\tr := 0\n\tfor i := 0; i < b; i++ {\n\t\tr = Add(r, a)\n\t}\n\treturn r\n}\n",
	"calc/mul_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestMul(t *testing.T) {\n\tif got := Mul(2, 3); got != 6 {\n\t\tt.Fatalf(\"Mul(2, 3) = %d, want 6\", got)\n\t}\n}\n",
	"cmd/calc/main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/calc/calc\"\n\t\"example.com/calc/format\"\n)\n\nfunc main() { fmt.Println(format.Sum(2, 3), calc.Mul(2, 3)) }\n",
	// format.go is generated failing go vet, fixed wrong once, and right on the second round.
	"format/format.go": formatSource("%d + %d = %d", "a, b, calc.Add(a, b)"),
}

func formatSource(verb, args string) string {
	return "package format\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/calc/calc\"\n)\n\n// Sum formats a sum.\nfunc Sum(a, b int) string { return fmt.Sprintf(\"" + verb + "\", " + args + ") }\n"
}

const brokenSource = "package bad\n\n// Bad is not an int.\nfunc Bad() int { return \"x\" }\n"

func genMatch(path string) string {
	return `File to create: "?` + regexp.QuoteMeta(path) + `"?\n`
}

func fixMatch(path string) string {
	return `# Mode: fix\nFile: "?` + regexp.QuoteMeta(path) + `"?\n`
}

// content is a GenerateFile answer: the file in a code block.
func content(s string) string {
	fence := "```"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	return fence + "\n" + s + fence + "\n"
}

// fixed is a FixFile answer: the explanation in JSON, then the file.
func fixed(s string) string {
	return `{"explanation": "scripted"}` + "\n" + content(s)
}

// buildScript is prepended to the e2e script (TestMain).
func buildScript() []fakellm.Response {
	var rs []fakellm.Response
	// The retried step of TestBuildFailsAFileAndRetriesTheStep, told what to do.
	rs = append(rs, fakellm.Response{Match: `(?s)RETRY-WITH-INT.*` + genMatch("bad/bad.go"), Text: content("package bad\n\n// Bad is an int now.\nfunc Bad() int { return 1 }\n")})
	rs = append(rs,
		fakellm.Response{Match: genMatch("bad/bad.go"), Text: content(brokenSource)},
		fakellm.Response{Match: fixMatch("bad/bad.go"), Text: fixed(brokenSource)},
		fakellm.Response{Match: genMatch("ok/ok.go"), Text: content("package ok\n\n// OK is fine.\nfunc OK() int { return 1 }\n")},
		fakellm.Response{Match: `(?s)` + fixMatch("format/format.go") + `.*fix attempt 2 for this file`, Text: fixed(calcFiles["format/format.go"])},
		fakellm.Response{Match: fixMatch("format/format.go"), Text: fixed(formatSource("%d + %d = %s", "a, b, calc.Add(a, b)"))},
		fakellm.Response{Match: genMatch("format/format.go"), Text: content(formatSource("%d + %d = %d", "a, b, calc.Add(a, b), a"))},
	)
	for _, p := range []string{"calc/add.go", "calc/mul.go", "calc/mul_test.go", "cmd/calc/main.go"} {
		rs = append(rs, fakellm.Response{Match: genMatch(p), Text: content(calcFiles[p])})
	}
	// The resumed build: six files, each answered slowly enough to kill the builder midway.
	for i := 1; i <= 6; i++ {
		rs = append(rs, fakellm.Response{Match: genMatch(fmt.Sprintf("resume/r%d.go", i)), Latency: fakellm.Duration(400 * time.Millisecond),
			Text: content(fmt.Sprintf("package resume\n\n// F%d is %d.\nfunc F%d() int { return %d }\n", i, i, i, i))})
	}
	// The cancelled build: a slow first file.
	rs = append(rs, fakellm.Response{Match: `File to create: "?slow/`, Latency: fakellm.Duration(3 * time.Second), Text: content("package slow\n")})
	// The new project: two files, then an edit of its go.mod and of one file.
	for p, c := range freshFiles {
		rs = append(rs, fakellm.Response{Match: genMatch(p), Text: content(c)})
	}
	rs = append(rs,
		fakellm.Response{Match: `File to modify: "?go\.mod"?\n`, Text: content(freshGoMod)},
		fakellm.Response{Match: `File to modify: "?greet/greet\.go"?\n`, Text: content(strings.Replace(freshFiles["greet/greet.go"], "Hello", "Hi", 1))},
	)
	// The benchmark's files: answered at once.
	rs = append(rs, fakellm.Response{Match: `File to create: "?bench/`, Text: content("benchmark file\n")})
	return rs
}

// The files of TestBuildScaffoldsANewProjectThenSyncsItsManifest.
var freshFiles = map[string]string{
	"greet/greet.go": "package greet\n\n// Hello greets name.\nfunc Hello(name string) string { return \"Hello, \" + name }\n",
	"main.go":        "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/e2e/fresh/greet\"\n)\n\nfunc main() { fmt.Println(greet.Hello(\"world\")) }\n",
}

const freshGoMod = "module example.com/e2e/fresh\n\ngo 1.22\n"

// goSandbox creates a sandbox holding a Go module with files.
func goSandbox(t testing.TB, ctx context.Context, repo string, files map[string]string) string {
	t.Helper()
	sb := sandboxv1.NewSandboxServiceClient(dial(t, "sandbox"))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, c := range files {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(c))})
		_, _ = tw.Write([]byte(c))
	}
	_ = tw.Close()
	created, err := sb.CreateSandbox(ctx, &sandboxv1.CreateSandboxRequest{Repo: repo, Archive: buf.Bytes()})
	if err != nil {
		t.Fatal(err)
	}
	id := created.Sandbox.Id
	t.Cleanup(func() {
		_, _ = sb.DestroySandbox(authed(context.Background()), &sandboxv1.DestroySandboxRequest{Id: id})
	})
	return id
}

func fileStep(id, path string, deps ...string) *typev1.PlanStep {
	return &typev1.PlanStep{Id: id, Action: typev1.FileAction_FILE_ACTION_CREATE, Path: path, Description: "write " + path, DependsOn: deps}
}

// waitBuild polls until the build is finished.
func waitBuild(t testing.TB, ctx context.Context, bc builderv1.BuilderServiceClient, id string) *builderv1.GetBuildResponse {
	t.Helper()
	for {
		got, err := bc.GetBuild(ctx, &builderv1.GetBuildRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		switch got.Build.Status {
		case builderv1.BuildStatus_BUILD_STATUS_COMPLETED, builderv1.BuildStatus_BUILD_STATUS_FAILED, builderv1.BuildStatus_BUILD_STATUS_CANCELLED:
			return got
		}
		select {
		case <-ctx.Done():
			t.Fatalf("build %s not finished: %v (phase %v, step %d)", id, got.Build.Status, got.Build.Phase, got.Build.CurrentStep)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// followBuild follows build id's events (as the agent does, instead of polling GetBuild:
// a GetBuild of a 200-file build costs the builder milliseconds of CPU, which a benchmark
// polling it every 100 ms would count as the builder's own) until it ends, then reads it.
func followBuild(t testing.TB, ctx context.Context, bc builderv1.BuilderServiceClient, id string) *builderv1.GetBuildResponse {
	t.Helper()
	stream, err := bc.WatchBuild(ctx, &builderv1.WatchBuildRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("watch build %s: %v", id, err)
		}
		if sc := ev.GetStatusChange(); sc != nil {
			switch sc.Status {
			case builderv1.BuildStatus_BUILD_STATUS_COMPLETED, builderv1.BuildStatus_BUILD_STATUS_FAILED, builderv1.BuildStatus_BUILD_STATUS_CANCELLED:
				return waitBuild(t, ctx, bc, id)
			}
		}
	}
	return waitBuild(t, ctx, bc, id)
}

// history reads a finished build's events from the start.
func history(t testing.TB, ctx context.Context, bc builderv1.BuilderServiceClient, id string) []*builderv1.WatchBuildResponse {
	t.Helper()
	stream, err := bc.WatchBuild(ctx, &builderv1.WatchBuildRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	var out []*builderv1.WatchBuildResponse
	for {
		e, err := stream.Recv()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Id != 0 {
			out = append(out, e)
		}
	}
}

// checkHistory checks that no event is repeated: ids increase, each step starts and ends
// once, each (step, round) is validated once.
func checkHistory(t testing.TB, evs []*builderv1.WatchBuildResponse) {
	t.Helper()
	seen := map[string]int{}
	var last int64
	for _, e := range evs {
		if e.Id <= last {
			t.Errorf("event %d after %d", e.Id, last)
		}
		last = e.Id
		var key string
		switch {
		case e.GetStep() != nil:
			key = fmt.Sprintf("%v/%d", e.Type, e.GetStep().StepNumber)
		case e.GetFileValidated() != nil:
			key = fmt.Sprintf("validated/%d/%d", e.GetFileValidated().StepNumber, e.GetFileValidated().Round)
		case e.GetFixRound() != nil:
			key = fmt.Sprintf("fix/%d/%d", e.GetFixRound().StepNumber, e.GetFixRound().Round)
		case e.GetStatusChange() != nil:
			key = fmt.Sprintf("status/%v->%v", e.GetStatusChange().PreviousStatus, e.GetStatusChange().Status)
		}
		if key != "" {
			seen[key]++
			if seen[key] > 1 {
				t.Errorf("event %s repeated (id %d)", key, e.Id)
			}
		}
	}
}

// generations counts fakellm's answered (200) generation requests per file path.
func generations(paths ...string) map[string]int {
	out := map[string]int{}
	for _, r := range llm.Requests() {
		if r.Status != http.StatusOK {
			continue
		}
		body := string(r.Body)
		for _, p := range paths {
			if regexp.MustCompile(`File to create: (\\")?` + regexp.QuoteMeta(p) + `(\\")?\\n`).MatchString(body) {
				out[p]++
			}
		}
	}
	return out
}

// TestBuildOverRESTProducesAModuleGoAccepts is the acceptance: StartBuild over REST
// on a plan of five Go files, WatchBuild streaming every phase and step live, GetBuild with
// per-step tokens, cost and validation, and a module that go build and go vet accept.
func TestBuildOverRESTProducesAModuleGoAccepts(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(authed(context.Background()), liveness(6*time.Minute))
	defer cancel()
	sbID := goSandbox(t, ctx, "e2e/calc", map[string]string{"go.mod": "module example.com/calc\n\ngo 1.22\n"})
	plan := &typev1.Plan{Summary: "e2e-calc: a calculator module", Steps: []*typev1.PlanStep{
		fileStep("main", "cmd/calc/main.go", "format", "mul"),
		fileStep("format", "format/format.go", "add"),
		fileStep("test", "calc/mul_test.go", "mul"),
		fileStep("mul", "calc/mul.go", "add"),
		fileStep("add", "calc/add.go"),
	}}
	planJSON, _ := protojson.Marshal(plan)
	var planBody map[string]any
	_ = json.Unmarshal(planJSON, &planBody)

	// Watch every build of the caller from now, over REST, while the build runs.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	req, _ := http.NewRequestWithContext(wctx, "GET", mesh.GatewayURL()+"/v1/builds:watch?from_now=true", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 1<<20), 1<<22)
	lines.Scan() // the first heartbeat: the stream is open

	startBody := map[string]any{"request_id": "e2e-calc-1", "sandbox_id": sbID, "repo": "e2e/calc", "plan": planBody,
		"memory_hints": []string{"E2E-MEMORY-HINT: calc functions stay pure"}}
	code, body := rest(t, "POST", "/v1/builds", token, startBody)
	if code != http.StatusOK {
		t.Fatalf("StartBuild = %d %v", code, body)
	}
	defer func() {
		// Every generation of the build carried the caller's memory hint.
		for _, r := range llm.Requests() {
			if b := string(r.Body); strings.Contains(b, "File to create: ") && strings.Contains(b, "e2e-calc") && !strings.Contains(b, "E2E-MEMORY-HINT") {
				t.Errorf("a generation of the calc build without the memory hint:\n%.400s", b)
			}
		}
	}()
	build := body["build"].(map[string]any)
	id := build["id"].(string)
	if build["status"] != "BUILD_STATUS_PENDING" {
		t.Fatalf("StartBuild returned %v, want PENDING at once", build["status"])
	}
	// A retry with the same request_id is the same build.
	if code, again := rest(t, "POST", "/v1/builds", token, startBody); code != http.StatusOK || again["build"].(map[string]any)["id"] != id {
		t.Fatalf("retry = %d %v", code, again)
	}

	var live []*builderv1.WatchBuildResponse
	for lines.Scan() {
		var msg struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(lines.Bytes(), &msg); err != nil {
			t.Fatalf("stream line %q: %v", lines.Text(), err)
		}
		e := &builderv1.WatchBuildResponse{}
		if err := protojson.Unmarshal(msg.Result, e); err != nil {
			t.Fatal(err)
		}
		if e.BuildId != id {
			continue
		}
		live = append(live, e)
		if e.GetStatusChange().GetStatus() == builderv1.BuildStatus_BUILD_STATUS_COMPLETED || e.GetStatusChange().GetStatus() == builderv1.BuildStatus_BUILD_STATUS_FAILED {
			break
		}
	}
	wcancel()
	bc := builderv1.NewBuilderServiceClient(dial(t, "builder"))
	got := waitBuild(t, ctx, bc, id)
	if got.Build.Status != builderv1.BuildStatus_BUILD_STATUS_COMPLETED {
		t.Fatalf("build %v: %s\nreport %v", got.Build.Status, got.Build.Error, got.Build.Report)
	}

	// Every phase that ran and every step, live.
	phases := map[builderv1.BuildPhase]bool{}
	started, ended := map[int32]bool{}, map[int32]bool{}
	for _, e := range live {
		if pc := e.GetPhaseChange(); pc != nil {
			phases[pc.Phase] = true
		}
		if s := e.GetStep(); s != nil {
			switch e.Type {
			case builderv1.BuildEventType_BUILD_EVENT_TYPE_STEP_STARTED:
				started[s.StepNumber] = true
			case builderv1.BuildEventType_BUILD_EVENT_TYPE_STEP_SUCCEEDED, builderv1.BuildEventType_BUILD_EVENT_TYPE_STEP_FAILED:
				ended[s.StepNumber] = true
			}
		}
	}
	// The skills service's built-in Go skills were resolved and injected.
	injected := false
	for _, e := range live {
		injected = injected || strings.HasPrefix(e.GetLog().GetMessage(), "skills injected: ")
	}
	if !injected {
		t.Errorf("no skills injected (log events: %v)", logs(live))
	}
	for _, p := range []builderv1.BuildPhase{builderv1.BuildPhase_BUILD_PHASE_INIT, builderv1.BuildPhase_BUILD_PHASE_IMPLEMENT, builderv1.BuildPhase_BUILD_PHASE_INTEGRATE, builderv1.BuildPhase_BUILD_PHASE_FINALIZE} {
		if !phases[p] {
			t.Errorf("no live PHASE_CHANGED to %v", p)
		}
	}
	for _, s := range got.Steps {
		if !started[s.StepNumber] || !ended[s.StepNumber] {
			t.Errorf("step %d (%v %s): started %v ended %v live", s.StepNumber, s.Kind, s.Path, started[s.StepNumber], ended[s.StepNumber])
		}
	}
	checkHistory(t, history(t, ctx, bc, id))

	// Files in import order: each after the files it imports, as the graph orders them.
	var order []string
	for _, s := range got.Steps {
		if s.Kind == builderv1.StepKind_STEP_KIND_FILE {
			order = append(order, s.Path)
		}
	}
	if !slices.Equal(order, got.Build.Graph.Order) {
		t.Errorf("files built in %v, graph order %v", order, got.Build.Graph.Order)
	}
	pos := func(p string) int { return slices.Index(order, p) }
	for _, dep := range [][2]string{{"calc/add.go", "calc/mul.go"}, {"calc/add.go", "format/format.go"}, {"format/format.go", "cmd/calc/main.go"}, {"calc/mul.go", "calc/mul_test.go"}} {
		if pos(dep[0]) > pos(dep[1]) {
			t.Errorf("%s built after %s, which imports it", dep[0], dep[1])
		}
	}
	for _, s := range got.Steps {
		if s.Kind != builderv1.StepKind_STEP_KIND_FILE {
			continue
		}
		if s.Usage.GetInputTokens() == 0 || s.Usage.GetOutputTokens() == 0 || s.Usage.GetCostMicros() <= 0 || s.Validation == nil || s.Model == "" {
			t.Errorf("step %d %s: usage %v model %q validation %v", s.StepNumber, s.Path, s.Usage, s.Model, s.Validation)
		}
		// The finished dependencies are the step's context.
		switch s.Path {
		case "cmd/calc/main.go":
			for _, d := range []string{"format/format.go", "calc/mul.go", "calc/add.go"} {
				if !slices.Contains(s.ContextFiles, d) {
					t.Errorf("main.go context %v lacks %s", s.ContextFiles, d)
				}
			}
		case "format/format.go":
			if !slices.Equal(s.ContextFiles, []string{"calc/add.go"}) {
				t.Errorf("format.go context %v", s.ContextFiles)
			}
			// Failed go vet, fixed wrong once, fixed on the second round.
			if s.Status != builderv1.BuildStepStatus_BUILD_STEP_STATUS_SUCCEEDED || len(s.FixRounds) != 2 || s.FixRounds[0].Resolved || !s.FixRounds[1].Resolved {
				t.Errorf("format.go: %v with fix rounds %v", s.Status, s.FixRounds)
			}
			if len(s.FixRounds) > 0 && !strings.Contains(fmt.Sprint(s.FixRounds[0].DiagnosticsBefore), "Sprintf") {
				t.Errorf("format.go's first round fixed %v, want go vet's printf finding", s.FixRounds[0].DiagnosticsBefore)
			}
		case "calc/add.go":
			if len(s.ContextFiles) != 0 {
				t.Errorf("add.go context %v", s.ContextFiles)
			}
		}
	}
	if u := got.Build.Usage; u.GetInputTokens() == 0 || u.GetCalls() < 7 || u.GetCostMicros() <= 0 {
		t.Errorf("build usage %v", u)
	}

	// The module builds and vets, and the report's diff is the sandbox's.
	sb := sandboxv1.NewSandboxServiceClient(dial(t, "sandbox"))
	for _, argv := range [][]string{{"go", "build", "./..."}, {"go", "vet", "./..."}} {
		if out, code := run(t, ctx, sb, sbID, argv...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", argv, code, out)
		}
	}
	diff, err := sb.Diff(ctx, &sandboxv1.DiffRequest{Id: sbID, StatsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var diffPaths, reportPaths []string
	for _, f := range diff.Files {
		diffPaths = append(diffPaths, f.Path)
	}
	for _, f := range got.Build.Report.FilesChanged {
		reportPaths = append(reportPaths, f.Path)
	}
	if !slices.Equal(diffPaths, reportPaths) || len(reportPaths) != 5 || !got.Build.Report.ValidationPassed {
		t.Errorf("report files %v, sandbox diff %v, validation passed %v", reportPaths, diffPaths, got.Build.Report.ValidationPassed)
	}
	for p, want := range calcFiles {
		rf, err := sb.ReadFile(ctx, &sandboxv1.ReadFileRequest{SandboxId: sbID, Path: p})
		if err != nil || string(rf.Content) != want {
			t.Errorf("%s in the sandbox: %v\n%s", p, err, rf.GetContent())
		}
	}
	if code, body := rest(t, "GET", "/v1/builds/"+id, token, nil); code != http.StatusOK || len(body["steps"].([]any)) != len(got.Steps) {
		t.Errorf("GetBuild over REST = %d %v", code, body)
	}
}

func run(t testing.TB, ctx context.Context, sb sandboxv1.SandboxServiceClient, id string, argv ...string) (string, int32) {
	t.Helper()
	stream, err := sb.RunCommand(ctx, &sandboxv1.RunCommandRequest{SandboxId: id, Command: argv})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	code := int32(-1)
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return out.String(), code
		}
		if err != nil {
			t.Fatal(err)
		}
		out.Write(m.GetOutput().GetData())
		if r := m.GetResult(); r != nil {
			code = r.ExitCode
		}
	}
}

// TestBuildFailsAFileAndRetriesTheStep: a file that fails its three fix rounds fails the
// build with the file reported; RetryStep with guidance runs it again and the build
// completes.
func TestBuildFailsAFileAndRetriesTheStep(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(authed(context.Background()), liveness(6*time.Minute)) // a first build, a failed step retried and rebuilt, beside the whole parallel shard
	defer cancel()
	sbID := goSandbox(t, ctx, "e2e/broken-build", map[string]string{"go.mod": "module example.com/broken\n\ngo 1.22\n"})
	bc := builderv1.NewBuilderServiceClient(dial(t, "builder"))
	started, err := bc.StartBuild(ctx, &builderv1.StartBuildRequest{RequestId: "e2e-broken-1", SandboxId: sbID, Plan: &typev1.Plan{
		Summary: "e2e-broken: one good file, one that never compiles",
		Steps:   []*typev1.PlanStep{fileStep("ok", "ok/ok.go"), fileStep("bad", "bad/bad.go")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := waitBuild(t, ctx, bc, started.Build.Id)
	if got.Build.Status != builderv1.BuildStatus_BUILD_STATUS_FAILED || !slices.Equal(got.Build.Report.GetFailedPaths(), []string{"bad/bad.go"}) {
		t.Fatalf("build %v (%s), failed paths %v", got.Build.Status, got.Build.Error, got.Build.Report.GetFailedPaths())
	}
	var bad *builderv1.BuildStep
	for _, s := range got.Steps {
		if s.Path == "bad/bad.go" && s.Kind == builderv1.StepKind_STEP_KIND_FILE {
			bad = s
		}
	}
	if bad == nil || bad.Status != builderv1.BuildStepStatus_BUILD_STEP_STATUS_FAILED || len(bad.FixRounds) != 3 || !strings.Contains(bad.Error, "bad/bad.go") {
		t.Fatalf("bad step %v", bad)
	}
	if got.Build.Iterations != 3 || got.Build.Report.FixRounds != 6 || got.Build.Report.FixRoundsResolved != 0 {
		t.Errorf("iterations %d, fix rounds %d (%d resolved), want 3 integrate iterations and 3+3 rounds", got.Build.Iterations, got.Build.Report.FixRounds, got.Build.Report.FixRoundsResolved)
	}
	checkHistory(t, history(t, ctx, bc, started.Build.Id))

	// Retrying a step that did not fail, or of another state, is refused.
	var okStep int32
	for _, s := range got.Steps {
		if s.Path == "ok/ok.go" {
			okStep = s.StepNumber
		}
	}
	if _, err := bc.RetryStep(ctx, &builderv1.RetryStepRequest{BuildId: started.Build.Id, StepNumber: okStep}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("retry of a succeeded step: %v", err)
	}
	retried, err := bc.RetryStep(ctx, &builderv1.RetryStepRequest{BuildId: started.Build.Id, StepNumber: bad.StepNumber, Guidance: "RETRY-WITH-INT: return an int"})
	if err != nil {
		t.Fatal(err)
	}
	if retried.Build.Status != builderv1.BuildStatus_BUILD_STATUS_PENDING {
		t.Fatalf("retry returned %v", retried.Build.Status)
	}
	got = waitBuild(t, ctx, bc, started.Build.Id)
	if got.Build.Status != builderv1.BuildStatus_BUILD_STATUS_COMPLETED || len(got.Build.Report.FailedPaths) != 0 {
		t.Fatalf("after retry: %v (%s) %v", got.Build.Status, got.Build.Error, got.Build.Report)
	}
	if _, err := bc.RetryStep(ctx, &builderv1.RetryStepRequest{BuildId: started.Build.Id, StepNumber: bad.StepNumber}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("retry in a completed build: %v", err)
	}
	// The history from the start holds both endings and runs to the last.
	evs := history(t, ctx, bc, started.Build.Id)
	if last := evs[len(evs)-1]; last.GetStatusChange().GetStatus() != builderv1.BuildStatus_BUILD_STATUS_COMPLETED {
		t.Errorf("the watch of the retried build ended at %v", last)
	}
}

// TestBuildResumesAfterTheBuilderIsKilled kills the builder with SIGKILL midway and starts
// it again: the build finishes, no file is generated twice, no event is lost or repeated.
func TestBuildResumesAfterTheBuilderIsKilled(t *testing.T) {
	alone(t)
	ctx, cancel := context.WithTimeout(authed(context.Background()), liveness(6*time.Minute))
	defer cancel()
	sbID := goSandbox(t, ctx, "e2e/resume", map[string]string{"go.mod": "module example.com/resume\n\ngo 1.22\n"})
	bc := builderv1.NewBuilderServiceClient(dial(t, "builder"))
	plan := &typev1.Plan{Summary: "e2e-resume: six files in a chain"}
	var paths []string
	for i := 1; i <= 6; i++ {
		p := fmt.Sprintf("resume/r%d.go", i)
		paths = append(paths, p)
		st := fileStep(fmt.Sprintf("r%d", i), p)
		if i > 1 {
			st.DependsOn = []string{fmt.Sprintf("r%d", i-1)}
		}
		plan.Steps = append(plan.Steps, st)
	}
	started, err := bc.StartBuild(ctx, &builderv1.StartBuildRequest{RequestId: "e2e-resume-1", SandboxId: sbID, Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	id := started.Build.Id
	for {
		got, err := bc.GetBuild(ctx, &builderv1.GetBuildRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		if got.Build.CurrentStep >= 3 {
			break
		}
		if got.Build.Status != builderv1.BuildStatus_BUILD_STATUS_PENDING && got.Build.Status != builderv1.BuildStatus_BUILD_STATUS_RUNNING {
			t.Fatalf("build ended before the kill: %v %s", got.Build.Status, got.Build.Error)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := mesh.Kill("builder"); err != nil {
		t.Fatal(err)
	}
	if err := mesh.Start(); err != nil {
		t.Fatal(err)
	}
	if err := mesh.WaitReady(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	got := waitBuild(t, ctx, bc, id)
	if got.Build.Status != builderv1.BuildStatus_BUILD_STATUS_COMPLETED {
		t.Fatalf("resumed build: %v %s", got.Build.Status, got.Build.Error)
	}
	for p, n := range generations(paths...) {
		if n != 1 {
			t.Errorf("%s generated %d times by the model, want once", p, n)
		}
	}
	if n := len(generations(paths...)); n != 6 {
		t.Errorf("%d files generated, want 6", n)
	}
	checkHistory(t, history(t, ctx, bc, id))
}

// TestBuildCancelStopsAtOnce cancels a build during a slow generation.
func TestBuildCancelStopsAtOnce(t *testing.T) {
	alone(t)
	ctx, cancel := context.WithTimeout(authed(context.Background()), liveness(time.Minute))
	defer cancel()
	sbID := goSandbox(t, ctx, "e2e/slow", map[string]string{"go.mod": "module example.com/slow\n\ngo 1.22\n"})
	bc := builderv1.NewBuilderServiceClient(dial(t, "builder"))
	started, err := bc.StartBuild(ctx, &builderv1.StartBuildRequest{RequestId: "e2e-slow-1", SandboxId: sbID, Plan: &typev1.Plan{
		Summary: "e2e-slow", Steps: []*typev1.PlanStep{fileStep("a", "slow/a.go"), fileStep("b", "slow/b.go", "a")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	id := started.Build.Id
	for {
		got, _ := bc.GetBuild(ctx, &builderv1.GetBuildRequest{Id: id})
		if got.GetBuild().GetCurrentStep() >= 1 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := len(llm.Requests())
	cancelled, err := bc.CancelBuild(ctx, &builderv1.CancelBuildRequest{Id: id, Reason: "e2e: stop"})
	if err != nil {
		t.Fatal(err)
	}
	if cancelled.Build.Status != builderv1.BuildStatus_BUILD_STATUS_CANCELLED || cancelled.Build.Error != "e2e: stop" {
		t.Fatalf("cancel returned %v %q", cancelled.Build.Status, cancelled.Build.Error)
	}
	again, err := bc.CancelBuild(ctx, &builderv1.CancelBuildRequest{Id: id})
	if err != nil || again.Build.Status != builderv1.BuildStatus_BUILD_STATUS_CANCELLED {
		t.Fatalf("second cancel: %v %v", again, err)
	}
	time.Sleep(4 * time.Second) // longer than the slow answer: nothing more may happen
	got, _ := bc.GetBuild(ctx, &builderv1.GetBuildRequest{Id: id})
	for _, s := range got.Steps {
		if s.Status != builderv1.BuildStepStatus_BUILD_STEP_STATUS_SKIPPED {
			t.Errorf("step %d %s after cancel: %v", s.StepNumber, s.Path, s.Status)
		}
	}
	if n := generations("slow/b.go")["slow/b.go"]; n != 0 || len(llm.Requests()) > before+1 {
		t.Errorf("the cancelled build went on: b.go generated %d times", n)
	}
	if _, err := bc.RetryStep(ctx, &builderv1.RetryStepRequest{BuildId: id, StepNumber: 1}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("retry in a cancelled build: %v", err)
	}
}

// TestBuildBadInput: the errors a caller gets for what cannot be built.
func TestBuildBadInput(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(authed(context.Background()), liveness(time.Minute))
	defer cancel()
	bc := builderv1.NewBuilderServiceClient(dial(t, "builder"))
	sbID := goSandbox(t, ctx, "e2e/bad-input", map[string]string{"go.mod": "module example.com/bad\n\ngo 1.22\n"})
	plan := &typev1.Plan{Summary: "x", Steps: []*typev1.PlanStep{fileStep("a", "a.go")}}
	for _, c := range []struct {
		name  string
		req   *builderv1.StartBuildRequest
		code  codes.Code
		field string
	}{
		{"unknown sandbox", &builderv1.StartBuildRequest{RequestId: "bad-1", SandboxId: "00000000-0000-4000-8000-000000000000", Plan: plan}, codes.NotFound, "sandbox"},
		{"empty plan", &builderv1.StartBuildRequest{RequestId: "bad-2", SandboxId: sbID, Plan: &typev1.Plan{}}, codes.InvalidArgument, "plan.steps"},
		{"path with ..", &builderv1.StartBuildRequest{RequestId: "bad-3", SandboxId: sbID, Plan: &typev1.Plan{Steps: []*typev1.PlanStep{fileStep("a", "../a.go")}}}, codes.InvalidArgument, "plan.steps[0].path"},
		{"no request id", &builderv1.StartBuildRequest{SandboxId: sbID, Plan: plan}, codes.InvalidArgument, "request_id"},
	} {
		_, err := bc.StartBuild(ctx, c.req)
		if status.Code(err) != c.code || !strings.Contains(status.Convert(err).Message(), c.field) {
			t.Errorf("%s: %v, want %v naming %s", c.name, err, c.code, c.field)
		}
	}
	if code, body := rest(t, "POST", "/v1/builds", token, map[string]any{"request_id": "bad-4", "sandbox_id": sbID, "plan": map[string]any{"steps": []any{map[string]any{"id": "a", "path": "../x.go", "action": "FILE_ACTION_CREATE"}}}}); code != http.StatusBadRequest {
		t.Errorf("REST with a .. path = %d %v", code, body)
	}
}

// BenchmarkBuildOrchestration measures the builder's cost per file: a 200-file plan whose
// files the fakellm answers at once and whose validation has no toolchain to run (plain
// text files), so what remains is the builder's own work and its calls.
func BenchmarkBuildOrchestration(b *testing.B) {
	ctx, cancel := context.WithTimeout(authed(context.Background()), liveness(10*time.Minute))
	defer cancel()
	bc := builderv1.NewBuilderServiceClient(dial(b, "builder"))
	const files = 200
	// The first build of this size after the mesh starts is about 1.5 ms per file slower
	// in the builder's own share than every later one (measured 2026-12-01: 5.6-6.2 ms
	// against 4.0-4.7; a 20-file build first did not remove it, a 200-file one did; the
	// cause is not pinned down). One build of the same size first, not timed, so the
	// figure is the builder's steady state whatever -benchtime is.
	warm := &typev1.Plan{Summary: "e2e-bench warm-up"}
	for f := 0; f < files; f++ {
		warm.Steps = append(warm.Steps, fileStep(fmt.Sprintf("w%d", f), fmt.Sprintf("warm/w%03d.txt", f)))
	}
	warmed, err := bc.StartBuild(ctx, &builderv1.StartBuildRequest{RequestId: fmt.Sprintf("bench-warm-%d", time.Now().UnixNano()),
		SandboxId: goSandbox(b, ctx, "e2e/bench", map[string]string{"README.txt": "bench\n"}), Plan: warm})
	if err != nil {
		b.Fatal(err)
	}
	if got := followBuild(b, ctx, bc, warmed.Build.Id); got.Build.Status != builderv1.BuildStatus_BUILD_STATUS_COMPLETED {
		b.Fatalf("warm-up build %v: %s", got.Build.Status, got.Build.Error)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sbID := goSandbox(b, ctx, "e2e/bench", map[string]string{"README.txt": "bench\n"})
		plan := &typev1.Plan{Summary: "e2e-bench"}
		for f := 0; f < files; f++ {
			st := fileStep(fmt.Sprintf("f%d", f), fmt.Sprintf("bench/f%03d.txt", f))
			if f%10 > 0 { // chains of ten: each file has up to nine finished dependencies as context
				st.DependsOn = []string{fmt.Sprintf("f%d", f-1)}
			}
			plan.Steps = append(plan.Steps, st)
		}
		before := builderMetrics(b)
		start := time.Now()
		started, err := bc.StartBuild(ctx, &builderv1.StartBuildRequest{RequestId: fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i), SandboxId: sbID, Plan: plan})
		if err != nil {
			b.Fatal(err)
		}
		got := followBuild(b, ctx, bc, started.Build.Id)
		elapsed := time.Since(start)
		if got.Build.Status != builderv1.BuildStatus_BUILD_STATUS_COMPLETED {
			b.Fatalf("bench build %v: %s", got.Build.Status, got.Build.Error)
		}
		after := builderMetrics(b)
		calls := after["thefold_builder_call_seconds_total"] - before["thefold_builder_call_seconds_total"]
		ai := after[`thefold_builder_call_seconds_total{service="ai"}`] - before[`thefold_builder_call_seconds_total{service="ai"}`]
		own := elapsed.Seconds() - calls
		stored := after["thefold_builder_store_seconds_total"] - before["thefold_builder_store_seconds_total"]
		perFile := func(sec float64) float64 { return sec * 1000 / files }
		b.ReportMetric(perFile(elapsed.Seconds()), "ms/file")
		b.ReportMetric(perFile(own), "own-ms/file")
		fmt.Printf("builder orchestration: %d files in %s: %.2f ms per file in all; waiting on ai %.2f ms and sandbox %.2f ms; the builder's own overhead %.2f ms per file (target ≤ 5 ms), of which %.2f ms writing its progress to its database\n",
			files, elapsed.Round(time.Millisecond), perFile(elapsed.Seconds()), perFile(ai), perFile(calls-ai), perFile(own), perFile(stored))
	}
}

// builderMetrics reads the builder's counters from its /metrics; the key without labels is
// the sum over them.
func builderMetrics(t testing.TB) map[string]float64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", mesh.Ports.Admin["builder"]))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "thefold_builder_") {
			continue
		}
		key, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(val, &v); err != nil {
			continue
		}
		out[key] += v
		if name, _, ok := strings.Cut(key, "{"); ok {
			out[name] += v
		}
	}
	return out
}

func logs(evs []*builderv1.WatchBuildResponse) []string {
	var out []string
	for _, e := range evs {
		if l := e.GetLog(); l != nil {
			out = append(out, l.Message)
		}
	}
	return out
}

// stepSummary renders a build's steps as "PHASE KIND path-or-argv STATUS".
func stepSummary(steps []*builderv1.BuildStep) []string {
	var out []string
	for _, s := range steps {
		what := s.Path
		if what == "" {
			what = strings.Join(s.Command, " ")
		}
		out = append(out, strings.Join([]string{
			strings.TrimPrefix(s.Phase.String(), "BUILD_PHASE_"), strings.TrimPrefix(s.Kind.String(), "STEP_KIND_"),
			what, strings.TrimPrefix(s.Status.String(), "BUILD_STEP_STATUS_")}, " "))
	}
	return out
}

// failures lists the failed steps' errors and output, for a test's message.
func failures(steps []*builderv1.BuildStep) string {
	var b strings.Builder
	for _, s := range steps {
		if s.Status == builderv1.BuildStepStatus_BUILD_STEP_STATUS_FAILED {
			fmt.Fprintf(&b, "\nstep %d: %s\n%s", s.StepNumber, s.Error, s.Output)
		}
	}
	return b.String()
}

// TestBuildScaffoldsANewProjectThenSyncsItsManifest: a build in an empty workspace runs
// `go mod init` in the scaffold phase before its Go files; a later build whose plan edits
// go.mod writes it in the dependencies phase and runs `go mod download` before the
// implement phase.
func TestBuildScaffoldsANewProjectThenSyncsItsManifest(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(authed(context.Background()), liveness(6*time.Minute))
	defer cancel()
	sbID := goSandbox(t, ctx, "e2e/fresh", nil)
	sb := sandboxv1.NewSandboxServiceClient(dial(t, "sandbox"))
	bc := builderv1.NewBuilderServiceClient(dial(t, "builder"))
	started, err := bc.StartBuild(ctx, &builderv1.StartBuildRequest{RequestId: "e2e-fresh-1", SandboxId: sbID, Repo: "e2e/fresh", Plan: &typev1.Plan{
		Summary: "e2e-fresh: a greeting program",
		Steps:   []*typev1.PlanStep{fileStep("main", "main.go", "greet"), fileStep("greet", "greet/greet.go")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := waitBuild(t, ctx, bc, started.Build.Id)
	want := []string{
		"SCAFFOLD COMMAND go mod init example.com/e2e/fresh SUCCEEDED",
		"IMPLEMENT FILE greet/greet.go SUCCEEDED",
		"IMPLEMENT FILE main.go SUCCEEDED",
		"INTEGRATE VALIDATE  SUCCEEDED",
	}
	if s := stepSummary(got.Steps); got.Build.Status != builderv1.BuildStatus_BUILD_STATUS_COMPLETED || !slices.Equal(s, want) {
		t.Fatalf("new project: %v (%s)\nsteps %q\nwant  %q%s", got.Build.Status, got.Build.Error, s, want, failures(got.Steps))
	}
	if out, code := run(t, ctx, sb, sbID, "go", "build", "./..."); code != 0 {
		t.Fatalf("go build in the new project: exit %d\n%s", code, out)
	}
	checkHistory(t, history(t, ctx, bc, started.Build.Id))

	modify := func(id, path string) *typev1.PlanStep {
		return &typev1.PlanStep{Id: id, Action: typev1.FileAction_FILE_ACTION_MODIFY, Path: path, Description: "change " + path}
	}
	started, err = bc.StartBuild(ctx, &builderv1.StartBuildRequest{RequestId: "e2e-fresh-2", SandboxId: sbID, Repo: "e2e/fresh", Plan: &typev1.Plan{
		Summary: "e2e-fresh: pin the go version, greet shorter",
		Steps:   []*typev1.PlanStep{modify("greet", "greet/greet.go"), modify("mod", "go.mod")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got = waitBuild(t, ctx, bc, started.Build.Id)
	want = []string{
		"DEPENDENCIES FILE go.mod SUCCEEDED",
		"DEPENDENCIES INSTALL_PACKAGES go mod download SUCCEEDED",
		"IMPLEMENT FILE greet/greet.go SUCCEEDED",
		"INTEGRATE VALIDATE  SUCCEEDED",
	}
	if s := stepSummary(got.Steps); got.Build.Status != builderv1.BuildStatus_BUILD_STATUS_COMPLETED || !slices.Equal(s, want) {
		t.Fatalf("manifest change: %v (%s)\nsteps %q\nwant  %q%s", got.Build.Status, got.Build.Error, s, want, failures(got.Steps))
	}
	// With the docker backend (no network in its containers) the install ran offline and
	// says so; with bwrap, through THEFOLD_SANDBOX_GOPROXY.
	if ls := logs(history(t, ctx, bc, started.Build.Id)); !slices.ContainsFunc(ls, func(l string) bool {
		return strings.HasPrefix(l, "ran go mod download")
	}) {
		t.Errorf("no log of the install among %q", ls)
	}
	rf, err := sb.ReadFile(ctx, &sandboxv1.ReadFileRequest{SandboxId: sbID, Path: "go.mod"})
	if err != nil || string(rf.Content) != freshGoMod {
		t.Fatalf("go.mod after the build: %q, %v", rf.GetContent(), err)
	}
}
