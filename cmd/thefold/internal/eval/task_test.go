package eval

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/fakellm"
)

// tasksDir is the repository's eval/tasks.
const tasksDir = "../../../../eval/tasks"

func TestTheRepositorysTasksLoad(t *testing.T) {
	t.Parallel()
	tasks, err := LoadTasks(tasksDir, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) < 15 {
		t.Errorf("%d tasks, want at least 15", len(tasks))
	}
	perLanguage := map[string]int{}
	kinds := map[string]int{}
	for _, tk := range tasks {
		perLanguage[tk.Language]++
		kinds[tk.Kind]++
		// The hidden tests are not in the repository the job sees, nor named by the task.
		for _, h := range tk.Hidden {
			if slices.ContainsFunc(tk.Repo, func(f File) bool { return f.Path == h.Path }) {
				t.Errorf("%s: hidden %s is also in repo/", tk.ID, h.Path)
			}
			if strings.Contains(tk.Description, filepath.Base(h.Path)) {
				t.Errorf("%s: the description names the hidden test %s", tk.ID, h.Path)
			}
		}
	}
	for _, l := range Languages {
		if perLanguage[l] < 5 {
			t.Errorf("%d %s tasks, want at least 5", perLanguage[l], l)
		}
	}
	for _, k := range Kinds {
		if kinds[k] == 0 {
			t.Errorf("no %s task", k)
		}
	}
	common, err := LoadCommon(tasksDir)
	if err != nil {
		t.Fatal(err)
	}
	script, err := Script(tasks, common)
	if err != nil {
		t.Fatal(err)
	}
	faulty := 0
	for _, tk := range tasks {
		if slices.ContainsFunc(tk.Script, func(r fakellm.Response) bool { return len(r.Faults) > 0 }) {
			faulty++
		}
	}
	if faulty < 3 {
		t.Errorf("%d tasks' scripts use fakellm's faults, want at least 3", faulty)
	}
	if n := len(script.Anthropic); n < len(tasks)*2 {
		t.Errorf("merged script has %d answers for %d tasks", n, len(tasks))
	}
}

func TestLoadTasksSelects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		selection string
		want      []string
		wantErr   string
	}{
		{selection: "go-slugify", want: []string{"go-slugify"}},
		{selection: "ts-chunk, py-csv-totals", want: []string{"py-csv-totals", "ts-chunk"}},
		{selection: "go-*", want: []string{"go-lru-recency", "go-median-even", "go-money-negative", "go-slugify", "go-wordfreq-top"}},
		{selection: "go-s*,go-slugify", want: []string{"go-slugify"}},
		{selection: "rust-*", wantErr: `"rust-*" matches no task`},
		{selection: "[", wantErr: "syntax error in pattern"},
	}
	for _, c := range cases {
		tasks, err := LoadTasks(tasksDir, c.selection)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("LoadTasks(%q) err = %v, want %q", c.selection, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("LoadTasks(%q): %v", c.selection, err)
		}
		var ids []string
		for _, tk := range tasks {
			ids = append(ids, tk.ID)
		}
		if !slices.Equal(ids, c.want) {
			t.Errorf("LoadTasks(%q) = %v, want %v", c.selection, ids, c.want)
		}
	}
}

// goodTask is a well-formed task with id demo-task; each case breaks one thing.
func goodTask() map[string]string {
	return map[string]string{
		"task.json": `{
  "id": "demo-task",
  "language": "go",
  "kind": "bugfix",
  "title": "Fix it",
  "description": "It is broken; make it work.",
  "test": [["go", "test", "./..."]]
}`,
		"repo/go.mod":            "module example.com/x\n\ngo 1.22\n",
		"hidden/x_test.go":       "package x\n",
		"fakellm.json":           `{"anthropic": [{"match": "(?s)# Job: plan a task.*\\[eval:demo-task\\]", "text": "{}"}]}`,
		"../fakellm.json":        `{"anthropic": [{"match": "# Job: review code", "text": "{}"}]}`,
		"../not-a-task/notes.md": "a directory without task.json is not a task\n",
	}
}

func writeTask(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "demo-task")
	for p, c := range files {
		fp := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(fp), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fp, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadTaskNamesTheFileAndField(t *testing.T) {
	t.Parallel()
	replace := func(old, new string) func(map[string]string) {
		return func(f map[string]string) { f["task.json"] = strings.Replace(f["task.json"], old, new, 1) }
	}
	cases := []struct {
		name  string
		edit  func(map[string]string)
		file  string // the file the error must name, relative to the task's directory
		wants []string
	}{
		{"valid", func(map[string]string) {}, "", nil},
		{"not JSON", replace(`"kind": "bugfix",`, `"kind": "bugfix"`), "task.json", []string{"invalid JSON at line 5, column 3"}},
		{"unknown field", replace(`"kind"`, `"difficulty": 3, "kind"`), "task.json", []string{`unknown field "difficulty"`}},
		{"wrong type", replace(`"test": [["go", "test", "./..."]]`, `"test": ["go", "test", "./..."]`), "task.json", []string{"test: want []string, got string"}},
		{"missing language", replace(`"language": "go",`, ``), "task.json", []string{`language: "": want one of go, typescript, python`}},
		{"unknown language", replace(`"go",`, `"rust",`), "task.json", []string{`language: "rust"`}},
		{"unknown kind", replace(`"bugfix"`, `"refactor"`), "task.json", []string{`kind: "refactor": want one of bugfix, feature`}},
		{"id differs from the directory", replace(`"demo-task"`, `"other-task"`), "task.json", []string{`id: "other-task" differs from the directory's name "demo-task"`}},
		{"bad id", replace(`"demo-task"`, `"Demo Task"`), "task.json", []string{`id: "Demo Task": want lower-case`}},
		{"no title", replace(`"Fix it"`, `""`), "task.json", []string{"title: required"}},
		{"no description", replace(`"It is broken; make it work."`, `" "`), "task.json", []string{"description: required"}},
		{"no test", replace(`[["go", "test", "./..."]]`, `[]`), "task.json", []string{"test: required"}},
		{"a shell string", replace(`["go", "test", "./..."]`, `["go test ./..."]`), "task.json", []string{"test[0]: want an argv"}},
		{"no repo", func(f map[string]string) { delete(f, "repo/go.mod") }, "repo", []string{"missing"}},
		{"no hidden tests", func(f map[string]string) { delete(f, "hidden/x_test.go") }, "hidden", []string{"missing"}},
		{"an answer for any task", func(f map[string]string) {
			f["fakellm.json"] = `{"anthropic": [{"match": "# Job: plan a task", "text": "{}"}]}`
		}, "fakellm.json", []string{`anthropic[0].match: must contain the task's marker \[eval:demo-task\]`}},
		{"an unknown fault", func(f map[string]string) {
			f["fakellm.json"] = `{"anthropic": [{"match": "\\[eval:demo-task\\]", "text": "{}", "faults": ["gremlins"]}]}`
		}, "fakellm.json", []string{`anthropic[0].faults[0]: unknown fault "gremlins"`}},
		{"another provider's answers", func(f map[string]string) {
			f["fakellm.json"] = `{"anthropic": [{"match": "\\[eval:demo-task\\]", "text": "{}"}], "openai": [{"match": "\\[eval:demo-task\\]", "text": "{}"}]}`
		}, "fakellm.json", []string{"only anthropic entries"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			files := goodTask()
			c.edit(files)
			dir := writeTask(t, files)
			task, err := LoadTask(dir)
			if c.wants == nil {
				if err != nil {
					t.Fatal(err)
				}
				if task.TitleWithMarker() != "Fix it [eval:demo-task]" || len(task.Repo) != 1 || len(task.Hidden) != 1 || len(task.Script) != 1 {
					t.Errorf("loaded %+v", task)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range append([]string{filepath.Join(dir, c.file) + ":"}, c.wants...) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

func TestLoadCommonRefusesAnAnswerForAnyPrompt(t *testing.T) {
	t.Parallel()
	files := goodTask()
	files["../fakellm.json"] = `{"anthropic": [{"text": "{}"}]}`
	dir := writeTask(t, files)
	_, err := LoadCommon(filepath.Dir(dir))
	if err == nil || !strings.Contains(err.Error(), "fakellm.json: anthropic[0].match: required") {
		t.Fatalf("err = %v", err)
	}
	tasks, err := LoadTasks(filepath.Dir(dir), "")
	if err != nil || len(tasks) != 1 {
		t.Fatalf("LoadTasks = %v, %v (a directory without task.json is not a task)", tasks, err)
	}
}
