package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/fakellm"
)

// The model-fault scenarios: the task loop, through the whole mesh, against answers that are
// right but delivered the way real models botch them (fakellm's faults) — and against the
// mistakes real models make with the code itself (an invented function, a change that breaks
// a caller a later step rewrites). Each job must reach review with the right file.

// faultRepo creates a local-forge repository holding files on main, and a Go module unless
// it is a Node project.
func faultRepo(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	repo := "local/" + name
	if code, body := rest(t, http.MethodPost, "/v1/repos", token, map[string]any{"repo": repo, "auto_init": true}); code != http.StatusOK {
		t.Fatalf("create repo: %d %v", code, body)
	}
	var fs []map[string]any
	if _, node := files["package.json"]; !node {
		fs = append(fs, map[string]any{"path": "go.mod", "action": "FILE_ACTION_CREATE", "content": "module example.com/faults\n\ngo 1.22\n"})
	}
	for p, c := range files {
		fs = append(fs, map[string]any{"path": p, "action": "FILE_ACTION_CREATE", "content": c})
	}
	if code, body := rest(t, http.MethodPost, "/v1/repos/"+repo+"/commits", token, map[string]any{"branch": "main", "message": "module", "files": fs}); code != http.StatusOK {
		t.Fatalf("commit: %d %v", code, body)
	}
	return repo
}

// planSteps is a PlanTask answer of file steps, each "action path" (create or modify), each
// depending on the one before.
func planSteps(summary string, steps ...string) string {
	var out []map[string]any
	for i, s := range steps {
		action, path, _ := strings.Cut(s, " ")
		st := map[string]any{"id": fmt.Sprintf("s%d", i+1), "action": action, "path": path, "description": action + " " + path, "depends_on": []string{}}
		if i > 0 {
			st["depends_on"] = []string{fmt.Sprintf("s%d", i)}
		}
		out = append(out, st)
	}
	b, _ := json.Marshal(map[string]any{"summary": summary, "steps": out})
	return string(b)
}

func modMatch(path string) string { return `File to modify: "?` + regexp.QuoteMeta(path) + `"?\n` }

// block is a whole-file answer in a code block.
func block(path, s string) string { return "```" + path + "\n" + s + "```\n" }

const (
	longGo = "package elide\n\n// Sum adds the numbers.\nfunc Sum(xs []int) int {\n\tt := 0\n\tfor _, x := range xs {\n\t\tt += x\n\t}\n\treturn t\n}\n\n" +
		"// Max is the largest number, 0 for none.\nfunc Max(xs []int) int {\n\tm := 0\n\tfor i, x := range xs {\n\t\tif i == 0 || x > m {\n\t\t\tm = x\n\t\t}\n\t}\n\treturn m\n}\n"
	longGoNew = "package elide\n\n// Sum adds the numbers.\nfunc Sum(xs []int) int {\n\tt := 0\n\tfor _, x := range xs {\n\t\tt += x\n\t}\n\treturn t\n}\n\n" +
		"// Max is the largest number, 0 for none.\nfunc Max(xs []int) int {\n\tm := 0\n\tfor i, x := range xs {\n\t\tif i == 0 || x > m {\n\t\t\tm = x\n\t\t}\n\t}\n\treturn m\n}\n\n" +
		"// Min is the smallest number, 0 for none.\nfunc Min(xs []int) int {\n\tm := 0\n\tfor i, x := range xs {\n\t\tif i == 0 || x < m {\n\t\t\tm = x\n\t\t}\n\t}\n\treturn m\n}\n"
	driftGo    = "package drift\n\n// Greet greets name.\nfunc Greet(name string) string {\n\tif name == \"\" {\n\t\treturn \"Hello!\"\n\t}\n\treturn \"Hello, \" + name\n}\n"
	driftGoNew = "package drift\n\n// Greet greets name.\nfunc Greet(name string) string {\n\tif name == \"\" {\n\t\treturn \"Good day!\"\n\t}\n\treturn \"Good day, \" + name\n}\n"
	tabsGo     = "package tabs\n\nimport \"regexp\"\n\n// Digits matches runs of digits.\nvar Digits = regexp.MustCompile(`\\d+`)\n\n// Count counts them in s.\nfunc Count(s string) int {\n\treturn len(Digits.FindAllString(s, -1))\n}\n"
	truncGo    = "package trunc\n\n// Words are the words of the demo.\nvar Words = []string{\"alpha\", \"beta\", \"gamma\", \"delta\", \"epsilon\", \"zeta\", \"eta\", \"theta\"}\n\n// N is how many.\nfunc N() int { return len(Words) }\n"
	inventLib  = "package greet\n\n// Hello greets name.\nfunc Hello(name string) string { return \"Hello, \" + name }\n"
	inventBad  = "package app\n\nimport \"example.com/faults/greet\"\n\n// Welcome welcomes name.\nfunc Welcome(name string) string { return greet.Hi(name) }\n"
	inventGood = "package app\n\nimport \"example.com/faults/greet\"\n\n// Welcome welcomes name.\nfunc Welcome(name string) string { return greet.Hello(name) }\n"
	depLib     = "package lib\n\n// Greet greets name.\nfunc Greet(name string) string { return \"Hello, \" + name }\n"
	depApp     = "package app\n\nimport \"example.com/faults/lib\"\n\n// Run greets the world.\nfunc Run() string { return lib.Greet(\"world\") }\n"
	depLibBad  = "package lib\n\nimport \"strings\"\n\n// Greet greets name with greeting.\nfunc Greet(greeting, name string) string { return greeting + \", \" + name }\n"
	depLibNew  = "package lib\n\n// Greet greets name with greeting.\nfunc Greet(greeting, name string) string { return greeting + \", \" + name }\n"
	depAppNew  = "package app\n\nimport \"example.com/faults/lib\"\n\n// Run greets the world.\nfunc Run() string { return lib.Greet(\"Hello\", \"world\") }\n"

	depTSPackage = `{"name": "greeter", "version": "1.0.0", "private": true}` + "\n"
	depTSConfig  = `{"compilerOptions": {"target": "ES2020", "module": "commonjs", "strict": true, "rootDir": ".", "outDir": "dist", "types": []}, "include": ["src"]}` + "\n"
	tsLib        = "export function greet(name: string): string {\n  return \"Hello, \" + name;\n}\n"
	tsApp        = "import { greet } from \"./lib\";\n\nexport function run(): string {\n  return greet(\"world\");\n}\n"
	tsLibBad     = "export function greet(greeting: string, name: string): string {\n  const n: number = name;\n  return greeting + \", \" + name;\n}\n"
	tsLibNew     = "export function greet(greeting: string, name: string): string {\n  return greeting + \", \" + name;\n}\n"
	tsAppNew     = "import { greet } from \"./lib\";\n\nexport function run(): string {\n  return greet(\"Hello\", \"world\");\n}\n"
)

// faultScript holds the scenarios' answers, prepended to the e2e script (TestMain).
func faultScript() []fakellm.Response {
	drift := "<<<<<<< SEARCH\n\t\treturn \"Hello!\"\n\t}\n\treturn \"Hello, \" + name\n=======\n\t\treturn \"Good day!\"\n\t}\n\treturn \"Good day, \" + name\n>>>>>>> REPLACE\n"
	tabsJSON, _ := json.Marshal(map[string]string{"content": tabsGo})
	return []fakellm.Response{
		// Code in JSON with raw tabs and a regexp's backslash: repaired, not refused.
		{Match: planMatch("[FAULT-TABS]"), Text: planSteps("Count digit runs.", "create tabs/tabs.go")},
		{Match: genMatch("tabs/tabs.go"), Text: string(tabsJSON), Faults: []string{"json_raw_control"}},
		// JSON in a markdown fence with prose around it.
		{Match: planMatch("[FAULT-FENCE]"), Text: planSteps("Count digit runs.", "create fence/tabs.go")},
		{Match: genMatch("fence/tabs.go"), Text: strings.ReplaceAll(string(tabsJSON), "package tabs", "package fence"), Faults: []string{"json_in_fence"}},
		// A whole file with code left out: asked again, the full file used.
		{Match: planMatch("[FAULT-ELIDE]"), Text: planSteps("Add Min.", "modify elide/elide.go")},
		{Match: modMatch("elide/elide.go"), Text: block("elide/elide.go", longGoNew), Faults: []string{"elide"}, Times: 1},
		{Match: both(modMatch("elide/elide.go"), `leaves code out`), Text: block("elide/elide.go", longGoNew)},
		// SEARCH text re-indented with spaces: matched and re-indented with tabs.
		{Match: planMatch("[FAULT-DRIFT]"), Text: planSteps("Greet politely.", "modify drift/drift.go")},
		{Match: modMatch("drift/drift.go"), Text: drift, Faults: []string{"search_whitespace_drift"}},
		// A reply cut off at max_tokens: asked again with twice the room.
		{Match: planMatch("[FAULT-TRUNC]"), Text: planSteps("List the words.", "create trunc/trunc.go")},
		{Match: genMatch("trunc/trunc.go"), Text: block("trunc/trunc.go", truncGo), Faults: []string{"truncate"}, Times: 1},
		{Match: genMatch("trunc/trunc.go"), Text: block("trunc/trunc.go", truncGo)},
		// An invented function: the fix round sees the real one in the repository's outline.
		{Match: planMatch("[FAULT-INVENT]"), Text: planSteps("Welcome with greet.Hello.", "create app/welcome.go")},
		{Match: genMatch("app/welcome.go"), Text: block("app/welcome.go", inventBad)},
		{Match: both(`<data kind="outline" path="greet/greet.go">`, `func Hello\(name string\) string`) + `.*` + fixMatch("app/welcome.go"),
			Text: `{"explanation": "greet has Hello, not Hi"}` + "\n" + block("app/welcome.go", inventGood)},
		// A signature change whose caller a later step rewrites: the file's own error (an
		// unused import) is its fix round's to resolve, the caller's is not (the test checks
		// what the round was asked).
		{Match: planMatch("[FAULT-DEPENDENT]"), Text: planSteps("Greet with a greeting.", "modify lib/lib.go", "modify app/app.go")},
		{Match: modMatch("lib/lib.go"), Text: block("lib/lib.go", depLibBad)},
		{Match: fixMatch("lib/lib.go"),
			Text: `{"explanation": "removed the unused import"}` + "\n" + block("lib/lib.go", depLibNew)},
		{Match: modMatch("app/app.go"), Text: block("app/app.go", depAppNew)},
		// The same in TypeScript, where the check (tsc over the project) reports the callers'
		// errors with the file's own: its fix round must be shown them as expected, and
		// answers only then (the code before would show them as errors to fix).
		{Match: planMatch("[FAULT-DEPENDENT-TS]"), Text: planSteps("Greet with a greeting.", "modify src/lib.ts", "modify src/app.ts")},
		{Match: modMatch("src/lib.ts"), Text: block("src/lib.ts", tsLibBad)},
		{Match: both(fixMatch("src/lib.ts"), `# Expected errors in other files[^#]*src/app\.ts`),
			Text: `{"explanation": "removed the stray assignment"}` + "\n" + block("src/lib.ts", tsLibNew)},
		{Match: modMatch("src/app.ts"), Text: block("src/app.ts", tsAppNew)},
		// Diagnoses for these tasks, should an attempt fail (the test then fails on the
		// attempt count).
		{Match: both(`# Job: diagnose a failed attempt`, `\[FAULT-`), Text: diagnosisAnswer("implementation_error", "scripted")},
	}
}

// reviewFile is the content of path in the job's review.
func reviewFile(t *testing.T, job map[string]any, path string) string {
	t.Helper()
	code, got := rest(t, http.MethodGet, "/v1/reviews/"+job["review_id"].(string), token, nil)
	if code != http.StatusOK {
		t.Fatalf("get review: %d %v", code, got)
	}
	files, _ := got["review"].(map[string]any)["files"].([]any)
	for _, f := range files {
		fm := f.(map[string]any)
		if fm["diff"].(map[string]any)["path"] == path {
			c, _ := fm["content"].(string)
			return c
		}
	}
	t.Fatalf("the review has no %s: %v", path, files)
	return ""
}

// TestModelFaults runs each scenario as a task to review on its first attempt, with the
// file as it should be.
func TestModelFaults(t *testing.T) {
	parallel(t)
	cases := []struct {
		marker, repo string
		files        map[string]string
		want         map[string]string
		// check looks at what the model was asked.
		check func(t *testing.T)
	}{
		{marker: "[FAULT-TABS]", repo: "fault-tabs", want: map[string]string{"tabs/tabs.go": tabsGo}},
		{marker: "[FAULT-FENCE]", repo: "fault-fence", want: map[string]string{"fence/tabs.go": strings.ReplaceAll(tabsGo, "package tabs", "package fence")}},
		{marker: "[FAULT-ELIDE]", repo: "fault-elide", files: map[string]string{"elide/elide.go": longGo}, want: map[string]string{"elide/elide.go": longGoNew}},
		{marker: "[FAULT-DRIFT]", repo: "fault-drift", files: map[string]string{"drift/drift.go": driftGo}, want: map[string]string{"drift/drift.go": driftGoNew}},
		{marker: "[FAULT-TRUNC]", repo: "fault-trunc", want: map[string]string{"trunc/trunc.go": truncGo}, check: func(t *testing.T) {
			var limits []int
			for _, r := range llm.Requests() {
				if b := string(r.Body); strings.Contains(b, `File to create: trunc/trunc.go`) {
					var req struct {
						MaxTokens int `json:"max_tokens"`
					}
					_ = json.Unmarshal(r.Body, &req)
					limits = append(limits, req.MaxTokens)
				}
			}
			if len(limits) != 2 || limits[1] <= limits[0] {
				t.Errorf("trunc/trunc.go was asked with max_tokens %v, want a second call with more room than the first", limits)
			}
		}},
		{marker: "[FAULT-INVENT]", repo: "fault-invent", files: map[string]string{"greet/greet.go": inventLib}, want: map[string]string{"app/welcome.go": inventGood}},
		{marker: "[FAULT-DEPENDENT]", repo: "fault-dependent", files: map[string]string{"lib/lib.go": depLib, "app/app.go": depApp},
			want: map[string]string{"lib/lib.go": depLibNew, "app/app.go": depAppNew}, check: func(t *testing.T) {
				for _, r := range llm.Requests() {
					b := string(r.Body)
					i := strings.Index(b, `# Mode: fix
File: lib/lib.go`)
					if i < 0 {
						continue
					}
					// The errors to fix are lib/lib.go's; app/app.go's may appear only as
					// expected ones, which a later step resolves.
					spec := b[i:]
					if j := strings.Index(spec, `# Expected errors`); j >= 0 {
						spec = spec[:j]
					}
					if strings.Contains(spec, "app/app.go:") {
						t.Errorf("lib/lib.go's fix round was asked to fix app/app.go's errors")
					}
				}
			}},
		{marker: "[FAULT-DEPENDENT-TS]", repo: "fault-dependent-ts",
			files: map[string]string{"package.json": depTSPackage, "tsconfig.json": depTSConfig, "src/lib.ts": tsLib, "src/app.ts": tsApp},
			want:  map[string]string{"src/lib.ts": tsLibNew, "src/app.ts": tsAppNew}},
	}
	for _, c := range cases {
		t.Run(c.marker, func(t *testing.T) {
			t.Parallel()
			repo := faultRepo(t, c.repo, c.files)
			_, jobID := startJob(t, repo, "Scenario "+c.marker, "Do as the plan says.")
			job := waitJob(t, jobID, 4*time.Minute, "JOB_STATUS_PENDING_REVIEW")
			if job["attempt"].(float64) != 1 {
				t.Errorf("%s took %v attempts (diagnosis %v), want 1", c.marker, job["attempt"], job["last_diagnosis"])
			}
			for p, want := range c.want {
				if got := reviewFile(t, job, p); got != want {
					t.Errorf("%s: %s is\n%s\nwant\n%s", c.marker, p, got, want)
				}
			}
			if c.check != nil {
				c.check(t)
			}
		})
	}
}
