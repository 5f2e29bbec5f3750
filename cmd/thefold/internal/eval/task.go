// Package eval is TheFold's eval: a fixed set of small tasks on local repositories, each with
// hidden tests the task does not show, run through the whole mesh (task → job → plan →
// sandboxed build → review gate), the hidden tests then run in a fresh sandbox on what the
// review holds, and a report of what passed and what it cost.
//
// A task is a directory (eval/tasks/<id>/): task.json says what it is and how its hidden
// tests run, repo/ holds the repository's starting files, hidden/ the hidden test files, and
// fakellm.json the scripted model's answers for it (used only when no provider key is set).
package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/thefold/thefold/pkg/fakellm"
)

// Languages are the languages a task may be in: the sandbox's names for its toolchains.
var Languages = []string{"go", "typescript", "python"}

// Kinds are what a task asks for.
var Kinds = []string{"bugfix", "feature"}

// File is a file of a task: a path relative to its directory ('/'-separated) and content.
type File struct {
	Path, Content string
}

// Task is one eval task as loaded from its directory.
type Task struct {
	// ID is the directory's name: lower-case letters, digits and hyphens.
	ID string `json:"id"`
	// Language is go, typescript or python: the sandbox toolchain the hidden tests need.
	Language string `json:"language"`
	// Kind is bugfix or feature.
	Kind string `json:"kind"`
	// Title and Description are the task as a person would write it; they do not reveal the
	// hidden tests.
	Title       string `json:"title"`
	Description string `json:"description"`
	// Test is the commands that run the hidden tests, in order, each an argv (no shell) run
	// at the repository's root; the task passes when every one exits 0.
	Test [][]string `json:"test"`

	// Dir is the task's directory.
	Dir string `json:"-"`
	// Repo holds the repository's starting files, Hidden the hidden test files (paths
	// relative to the repository's root).
	Repo   []File `json:"-"`
	Hidden []File `json:"-"`
	// Script is the scripted model's answers for this task (fakellm.json's anthropic
	// entries); every one matches only prompts holding the task's Marker.
	Script []fakellm.Response `json:"-"`
}

// Marker is the tag a task's title carries in the platform, so that the scripted model's
// answers for it match only its prompts.
func (t *Task) Marker() string { return "[eval:" + t.ID + "]" }

// TitleWithMarker is the title the task is created with.
func (t *Task) TitleWithMarker() string { return t.Title + " " + t.Marker() }

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)

// FieldError is a problem with one field of one file.
type FieldError struct {
	File, Field, Problem string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.File + ": " + e.Problem
	}
	return e.File + ": " + e.Field + ": " + e.Problem
}

// LoadTask reads and checks the task in dir; every problem is reported, each naming its file
// and field.
func LoadTask(dir string) (*Task, error) {
	t := &Task{Dir: dir}
	meta := filepath.Join(dir, "task.json")
	b, err := os.ReadFile(meta)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(t); err != nil {
		return nil, &FieldError{File: meta, Problem: jsonProblem(b, err)}
	}
	var problems []error
	bad := func(field, format string, args ...any) {
		problems = append(problems, &FieldError{File: meta, Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	switch {
	case t.ID == "":
		bad("id", "required")
	case !idPattern.MatchString(t.ID):
		bad("id", "%q: want lower-case letters, digits and hyphens (at most 40)", t.ID)
	case t.ID != filepath.Base(dir):
		bad("id", "%q differs from the directory's name %q", t.ID, filepath.Base(dir))
	}
	if !slices.Contains(Languages, t.Language) {
		bad("language", "%q: want one of %s", t.Language, strings.Join(Languages, ", "))
	}
	if !slices.Contains(Kinds, t.Kind) {
		bad("kind", "%q: want one of %s", t.Kind, strings.Join(Kinds, ", "))
	}
	if strings.TrimSpace(t.Title) == "" {
		bad("title", "required")
	} else if strings.ContainsAny(t.Title, "\n\r") {
		bad("title", "one line")
	}
	if strings.TrimSpace(t.Description) == "" {
		bad("description", "required: the task as a person would write it")
	}
	if len(t.Test) == 0 {
		bad("test", `required: the commands that run the hidden tests, e.g. [["go", "test", "./..."]]`)
	}
	for i, argv := range t.Test {
		if len(argv) == 0 || strings.TrimSpace(argv[0]) == "" || strings.ContainsAny(argv[0], "/ ") {
			bad(fmt.Sprintf("test[%d]", i), "want an argv whose first element is a program name, e.g. [\"go\", \"test\", \"./...\"]")
		}
	}
	var ferr error
	if t.Repo, ferr = readTree(filepath.Join(dir, "repo")); ferr != nil {
		problems = append(problems, ferr)
	}
	if t.Hidden, ferr = readTree(filepath.Join(dir, "hidden")); ferr != nil {
		problems = append(problems, ferr)
	}
	if t.ID != "" && idPattern.MatchString(t.ID) {
		if t.Script, ferr = loadTaskScript(filepath.Join(dir, "fakellm.json"), regexp.QuoteMeta(t.Marker())); ferr != nil {
			problems = append(problems, ferr)
		}
	}
	if err := errors.Join(problems...); err != nil {
		return nil, err
	}
	return t, nil
}

// jsonProblem says where a JSON decoding error is, by line and column where it can.
func jsonProblem(b []byte, err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := position(b, syn.Offset-1) // Offset is just past the bad character
		return fmt.Sprintf("invalid JSON at line %d, column %d: %s", line, col, syn.Error())
	case errors.As(err, &typ):
		return fmt.Sprintf("%s: want %s, got %s", typ.Field, typ.Type, typ.Value)
	}
	return err.Error()
}

func position(b []byte, off int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < off && i < int64(len(b)); i++ {
		if b[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// readTree reads every regular file under root, paths relative to it, sorted.
func readTree(root string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			if d.IsDir() {
				return nil
			}
			return fmt.Errorf("%s: not a regular file", p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files = append(files, File{Path: filepath.ToSlash(rel), Content: string(b)})
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &FieldError{File: root, Problem: "missing: the task needs this directory"}
	}
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, &FieldError{File: root, Problem: "empty"}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// loadTaskScript reads a task's fakellm.json: a fakellm script of anthropic entries, each
// with a match holding marker (the task's marker, quoted as a regular expression), so that
// the tasks' scripts can be merged into one.
func loadTaskScript(p, marker string) ([]fakellm.Response, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	s, err := fakellm.ParseScript(b)
	if err != nil {
		return nil, &FieldError{File: p, Problem: err.Error()}
	}
	var problems []error
	if len(s.OpenAI) > 0 || len(s.Gemini) > 0 || len(s.Embeddings) > 0 {
		problems = append(problems, &FieldError{File: p, Problem: "only anthropic entries (the scripted model speaks the Anthropic wire format)"})
	}
	if len(s.Anthropic) == 0 {
		problems = append(problems, &FieldError{File: p, Field: "anthropic", Problem: "no answers"})
	}
	for i, r := range s.Anthropic {
		if !strings.Contains(r.Match, marker) {
			problems = append(problems, &FieldError{File: p, Field: fmt.Sprintf("anthropic[%d].match", i),
				Problem: fmt.Sprintf("must contain the task's marker %s, so that only this task's prompts select it", marker)})
		}
	}
	return s.Anthropic, errors.Join(problems...)
}

// LoadCommon reads the answers every task's job needs whatever its task (assessments,
// review, diagnosis): dir/fakellm.json, anthropic entries that all have a match.
func LoadCommon(dir string) ([]fakellm.Response, error) {
	p := filepath.Join(dir, "fakellm.json")
	s, err := fakellm.LoadScript(p)
	if err != nil {
		return nil, err
	}
	for i, r := range s.Anthropic {
		if r.Match == "" {
			return nil, &FieldError{File: p, Field: fmt.Sprintf("anthropic[%d].match", i), Problem: "required: an answer without one would be served to any prompt"}
		}
	}
	return s.Anthropic, nil
}

// Script merges the tasks' answers, then common: a task's answers come first since only its
// own prompts match them.
func Script(tasks []*Task, common []fakellm.Response) (*fakellm.Script, error) {
	s := &fakellm.Script{}
	for _, t := range tasks {
		s.Anthropic = append(s.Anthropic, t.Script...)
	}
	s.Anthropic = append(s.Anthropic, common...)
	return s, s.Validate()
}

// LoadTasks loads the tasks under dir (each subdirectory holding a task.json) whose ids
// match selection: comma-separated ids or glob patterns (path.Match), empty for all. A
// selection element that matches no task is an error.
func LoadTasks(dir, selection string) ([]*Task, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(dir, e.Name(), "task.json")); err == nil {
				ids = append(ids, e.Name())
			}
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%s: no tasks (directories with a task.json)", dir)
	}
	chosen := ids
	if strings.TrimSpace(selection) != "" {
		chosen = nil
		for _, pat := range strings.Split(selection, ",") {
			pat = strings.TrimSpace(pat)
			if pat == "" {
				continue
			}
			n := 0
			for _, id := range ids {
				ok, err := path.Match(pat, id)
				if err != nil {
					return nil, fmt.Errorf("-tasks: %q: %w", pat, err)
				}
				if ok {
					n++
					if !slices.Contains(chosen, id) {
						chosen = append(chosen, id)
					}
				}
			}
			if n == 0 {
				return nil, fmt.Errorf("-tasks: %q matches no task in %s (tasks: %s)", pat, dir, strings.Join(ids, ", "))
			}
		}
		slices.Sort(chosen)
	}
	var tasks []*Task
	var problems []error
	for _, id := range chosen {
		t, err := LoadTask(filepath.Join(dir, id))
		if err != nil {
			problems = append(problems, err)
			continue
		}
		tasks = append(tasks, t)
	}
	return tasks, errors.Join(problems...)
}
