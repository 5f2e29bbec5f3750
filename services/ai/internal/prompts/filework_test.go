package prompts

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/ai/internal/llm"
)

const goSrc = "package a\n\nfunc F(x int) int {\n\tif x > 0 {\n\t\treturn g(x)\n\t}\n\treturn 0\n}\n\nfunc Old() {}\n"

func createReq(p string) *aiv1.GenerateFileRequest {
	return &aiv1.GenerateFileRequest{Task: task(), File: &aiv1.FileSpec{Path: p, Action: typev1.FileAction_FILE_ACTION_CREATE}}
}

func modifyReq(p, existing string) *aiv1.GenerateFileRequest {
	return &aiv1.GenerateFileRequest{Task: task(), File: &aiv1.FileSpec{Path: p, Action: typev1.FileAction_FILE_ACTION_MODIFY, ExistingContent: existing}}
}

func sr(old, new string) string {
	return "<<<<<<< SEARCH\n" + old + "=======\n" + new + ">>>>>>> REPLACE\n"
}

// TestReadFileAnswers: code comes back outside JSON, in whichever form, and the JSON form of
// earlier versions still reads.
func TestReadFileAnswers(t *testing.T) {
	t.Parallel()
	mdFile := "# Title\n\n```go\nfmt.Println()\n```\n\nEnd.\n"
	cases := []struct {
		name    string
		req     *aiv1.GenerateFileRequest
		raw     string
		content string
		edits   []*typev1.Edit
		errHas  []string
	}{
		{name: "whole file in a block named by its path", req: createReq("a/b.go"),
			raw: "```a/b.go\npackage b\n\nfunc B() {\n\treturn\n}\n```\n", content: "package b\n\nfunc B() {\n\treturn\n}\n"},
		{name: "prose and a language fence around the file", req: createReq("b.go"),
			raw: "Here is the file:\n\n```go\npackage b\n\nvar re = `\\d+`\n```\n\nIt compiles.", content: "package b\n\nvar re = `\\d+`\n"},
		{name: "the block naming the file wins over an example before it", req: createReq("b.go"),
			raw: "Usage:\n```sh\ngo run .\n```\n```go b.go\npackage b\n```", content: "package b\n"},
		{name: "a Markdown file keeps its own fences", req: createReq("README.md"),
			raw: "```README.md\n" + mdFile + "```\n", content: mdFile},
		{name: "four-backtick fence", req: createReq("doc.txt"),
			raw: "````doc.txt\nsee ```x```\n```\ninside\n````\n", content: "see ```x```\n```\ninside\n"},
		{name: "legacy JSON whole file", req: createReq("a.go"), raw: `{"content":"package a\n"}`, content: "package a\n"},
		{name: "legacy JSON with raw tabs is repaired", req: createReq("a.go"),
			raw: "{\"content\": \"package a\n\nfunc A() {\n\treturn\n}\n\"}", content: "package a\n\nfunc A() {\n\treturn\n}\n"},
		{name: "no code at all", req: createReq("a.go"), raw: "I would write a function A.", errHas: []string{"no code", "```a.go"}},
		{name: "unclosed block", req: createReq("a.go"), raw: "```a.go\npackage a\n\nfunc", errHas: []string{"not closed", "cut off"}},
		{name: "new file answered with edits", req: createReq("a.go"), raw: sr("x\n", "y\n"), errHas: []string{"file is new"}},
		{name: "NUL in the file", req: createReq("a.go"), raw: "```a.go\na\x00b\n```", errHas: []string{"NUL"}},
		{name: "elided code", req: modifyReq("a.go", goSrc), raw: "```a.go\npackage a\n\n// ... existing code ...\n\nfunc New() {}\n```",
			errHas: []string{"leaves code out", "line 3", "existing code"}},
		{name: "a file's own ellipsis comment is not elision", req: modifyReq("a.go", "package a\n// ... rest of the file ...\n"),
			raw: "```a.go\npackage a\n// ... rest of the file ...\nvar X = 1\n```", content: "package a\n// ... rest of the file ...\nvar X = 1\n"},
		{name: "sharp shrink of a MODIFY", req: modifyReq("a.go", longFile(100)), raw: "```a.go\npackage a\n```",
			errHas: []string{"from 100 lines to 1", "SEARCH/REPLACE edits that delete"}},
		{name: "edits, exact", req: modifyReq("a.go", goSrc), raw: "I rename Old.\n\n" + sr("func Old() {}\n", "func New() {}\n"),
			content: strings.Replace(goSrc, "Old", "New", 1), edits: []*typev1.Edit{{OldText: "func Old() {}\n", NewText: "func New() {}\n"}}},
		{name: "edits inside a fence, spaces typed for tabs", req: modifyReq("a.go", goSrc),
			raw:     "```go\n" + sr("    if x > 0 {\n        return g(x)\n    }\n", "    if x > 1 {\n        return g(x)\n    }\n") + "```",
			content: strings.Replace(goSrc, "x > 0", "x > 1", 1),
			edits:   []*typev1.Edit{{OldText: "\tif x > 0 {\n\t\treturn g(x)\n\t}", NewText: "\tif x > 1 {\n\t\treturn g(x)\n\t}"}}},
		{name: "edit block without divider", req: modifyReq("a.go", goSrc), raw: "<<<<<<< SEARCH\nfunc Old() {}\n>>>>>>> REPLACE\n",
			errHas: []string{"edit block 1", "no ======= line"}},
		{name: "edit block cut off", req: modifyReq("a.go", goSrc), raw: "<<<<<<< SEARCH\nfunc Old() {}\n=======\nfunc N",
			errHas: []string{"not closed", "cut off"}},
		{name: "replacement that elides", req: modifyReq("a.go", goSrc), raw: sr("func Old() {}\n", "func New() {\n\t// ... rest of the implementation ...\n}\n"),
			errHas: []string{"edit 1's replacement leaves code out"}},
		{name: "legacy JSON edits", req: modifyReq("a.go", goSrc), raw: `{"edits":[{"old_text":"func Old() {}","new_text":"func New() {}"}]}`,
			content: strings.Replace(goSrc, "Old", "New", 1), edits: []*typev1.Edit{{OldText: "func Old() {}", NewText: "func New() {}"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseGenerateFile(c.raw, c.req)
			if c.errHas != nil {
				if _, ok := errors.AsType[*ParseError](err); !ok {
					t.Fatalf("got %v, want a *ParseError", err)
				}
				for _, w := range c.errHas {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Content != c.content {
				t.Errorf("content\n%q\nwant\n%q", got.Content, c.content)
			}
			if diff := cmp.Diff(c.edits, got.Change.GetEdits(), protocmp.Transform()); diff != "" {
				t.Errorf("edits (-want +got):\n%s", diff)
			}
			if (len(c.edits) == 0) != (got.Change.GetContent() != "") {
				t.Errorf("change has content %q and %d edits; want exactly one form", got.Change.GetContent(), len(got.Change.GetEdits()))
			}
		})
	}
}

func TestReadFixAnswers(t *testing.T) {
	t.Parallel()
	req := &aiv1.FixFileRequest{Path: "a.go", Content: goSrc}
	cases := []struct{ name, raw, content, explanation string }{
		{"JSON explanation, then the file", "{\"explanation\": \"g is undefined: call h\"}\n```a.go\npackage a\n```", "package a\n", "g is undefined: call h"},
		{"explanation in a json fence, then edits", "```json\n{\"explanation\": \"use h\"}\n```\n" + sr("\t\treturn g(x)\n", "\t\treturn h(x)\n"),
			strings.Replace(goSrc, "g(x)", "h(x)", 1), "use h"},
		{"prose explanation", "g does not exist; h does.\n\n" + sr("\t\treturn g(x)\n", "\t\treturn h(x)\n"), strings.Replace(goSrc, "g(x)", "h(x)", 1), "g does not exist; h does."},
		{"legacy JSON", `{"content":"package a\n","explanation":"e"}`, "package a\n", "e"},
	}
	for _, c := range cases {
		got, err := ParseFixFile(c.raw, req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got.Content != c.content || got.Explanation != c.explanation {
			t.Errorf("%s: got %q / %q, want %q / %q", c.name, got.Content, got.Explanation, c.content, c.explanation)
		}
	}
}

// next runs one repair round of a session problem.
func next(t *testing.T, err error, req llm.Request, reply string, n int) llm.Request {
	t.Helper()
	fp, ok := errors.AsType[*FileProblem](err)
	if !ok {
		t.Fatalf("got %v, want a *FileProblem", err)
	}
	r, ok := fp.Next(req, reply, n)
	if !ok {
		t.Fatalf("round %d: no repair round for %v", n, err)
	}
	return r
}

func lastUser(r llm.Request) string {
	m := r.Messages[len(r.Messages)-1]
	return m.Blocks[0].Text
}

// TestFileSessionRounds: edits that miss are asked for again against the file as it is, the
// second miss asks for the whole file, and a reply cut off is not asked for unchanged.
func TestFileSessionRounds(t *testing.T) {
	t.Parallel()
	req := llm.Request{Messages: []llm.Message{llm.UserText("write it")}, MaxTokens: 1000}

	s := NewGenerateSession(modifyReq("a.go", goSrc))
	reply := sr("func Old() {}\n", "func New() {}\n") + sr("func Missing() {}\n", "x\n")
	_, err := s.Read(reply, false)
	r1 := next(t, err, req, reply, 1)
	if u := lastUser(r1); !strings.Contains(u, "1 of 2 SEARCH/REPLACE blocks did not apply") || !strings.Contains(u, "func New() {}") ||
		!strings.Contains(u, "still to make only") {
		t.Fatalf("first miss asks:\n%s", u)
	}
	if len(r1.Messages) != 3 || r1.Messages[1].Role != llm.RoleAssistant {
		t.Fatalf("the repair round does not show the reply as the model's turn: %+v", r1.Messages)
	}
	_, err = s.Read(sr("func Nope() {}\n", "y\n"), false)
	r2 := next(t, err, r1, "…", 2)
	if u := lastUser(r2); !strings.Contains(u, "did not apply again") || !strings.Contains(u, "whole file instead") {
		t.Fatalf("second miss asks:\n%s", u)
	}
	res, err := s.Read("```a.go\n"+strings.Replace(goSrc, "g(x)", "h(x)", 1)+"```", false)
	if err != nil || res.Content != strings.Replace(goSrc, "g(x)", "h(x)", 1) || len(res.Edits) != 0 {
		t.Fatalf("whole file after two misses: %+v, %v", res, err)
	}

	// A partial answer completed by the next round: every edit, exact against the original.
	s = NewGenerateSession(modifyReq("a.go", goSrc))
	_, err = s.Read(sr("func Old() {}\n", "func New() {}\n")+sr("    return 0\n", "\treturn 1\n")+sr("no such line\n", "z\n"), false)
	if err == nil {
		t.Fatal("a missing block was accepted")
	}
	res, err = s.Read(sr("\t\treturn g(x)\n", "\t\treturn h(x)\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer("func Old() {}", "func New() {}", "\treturn 0\n", "\treturn 1\n", "g(x)", "h(x)").Replace(goSrc)
	if res.Content != want || len(res.Edits) != 3 {
		t.Fatalf("content %q with %d edits, want %q with 3", res.Content, len(res.Edits), want)
	}
	var e []*typev1.Edit
	for _, x := range res.Edits {
		e = append(e, x)
	}
	if got, err := applyExact(goSrc, e); err != nil || got != want {
		t.Fatalf("the edits do not reproduce the result exactly: %q, %v", got, err)
	}

	// Cut off: a MODIFY asks for edits, a CREATE gets twice the room, then no more.
	s = NewGenerateSession(modifyReq("a.go", goSrc))
	_, err = s.Read("```a.go\npackage a\n", true)
	if u := lastUser(next(t, err, req, "```a.go\npackage a\n", 1)); !strings.Contains(u, "cut off") || !strings.Contains(u, "SEARCH/REPLACE blocks for the changes instead") {
		t.Fatalf("a cut-off MODIFY asks:\n%s", u)
	}
	s = NewGenerateSession(createReq("a.go"))
	_, err = s.Read("```a.go\npackage a\n", true)
	r := next(t, err, req, "", 1)
	if r.MaxTokens != 2000 || len(r.Messages) != 1 {
		t.Fatalf("a cut-off CREATE retries with %d tokens and %d messages, want 2000 and the same 1", r.MaxTokens, len(r.Messages))
	}
	_, err = s.Read("x", true)
	_, err = s.Read("x", true)
	if fp, _ := errors.AsType[*FileProblem](err); fp == nil {
		t.Fatal("no problem")
	} else if _, ok := fp.Next(req, "", 3); ok {
		t.Fatal("a third cut-off reply gets another round")
	}
	// No limit set: the model's maximum already applied, so no round.
	s = NewGenerateSession(createReq("a.go"))
	_, err = s.Read("x", true)
	if fp, _ := errors.AsType[*FileProblem](err); fp == nil {
		t.Fatal("no problem")
	} else if _, ok := fp.Next(llm.Request{}, "", 1); ok {
		t.Fatal("a cut-off reply without a limit to raise is asked again unchanged")
	}
}

func applyExact(content string, edits []*typev1.Edit) (string, error) {
	for _, e := range edits {
		if strings.Count(content, e.OldText) != 1 {
			return "", errors.New("not exactly once: " + e.OldText)
		}
		content = strings.Replace(content, e.OldText, e.NewText, 1)
	}
	return content, nil
}

// TestFixPromptContext: FixFile shows numbered excerpts around the errors, the rounds before,
// the errors a later step fixes, and the plan and outlines it shares with GenerateFile.
func TestFixPromptContext(t *testing.T) {
	t.Parallel()
	plan := &typev1.Plan{Summary: "add h", Steps: []*typev1.PlanStep{
		{Id: "1", Action: typev1.FileAction_FILE_ACTION_MODIFY, Path: "a.go", Description: "call h"},
		{Id: "2", Action: typev1.FileAction_FILE_ACTION_MODIFY, Path: "b.go", Description: "update callers"}}}
	refs := []*aiv1.ContextFile{{Path: "h/h.go", Content: "package h\n\nfunc H(x int) int\n"}}
	req := &aiv1.FixFileRequest{Task: task(), Path: "a.go", Content: goSrc, Plan: plan, ReferenceFiles: refs,
		Errors:         []*typev1.Diagnostic{{Path: "a.go", Line: 5, Message: "undefined: g", Severity: typev1.Severity_SEVERITY_ERROR}},
		ExpectedErrors: []*typev1.Diagnostic{{Path: "b.go", Line: 3, Message: "not enough arguments in call to F", Severity: typev1.Severity_SEVERITY_ERROR}},
		PreviousRounds: []*aiv1.FixHistory{{Round: 1, Explanation: "defined g as a stub", ErrorsAfter: []*typev1.Diagnostic{{Path: "a.go", Line: 5, Message: "undefined: g"}}},
			{Round: 2, Error: "edit 1: old_text matches nothing"}},
		Attempt: 3}
	p, err := FixFile(req)
	if err != nil {
		t.Fatal(err)
	}
	spec := specificsText(p)
	for _, w := range []string{
		"  4| \tif x > 0 {\n> 5| \t\treturn g(x)\n   ^ undefined: g\n  6| \t}",
		"Round 1: changed: defined g as a stub", "Still failing after it:", "Round 2: its answer could not be used: edit 1: old_text matches nothing",
		"Expected errors in other files", "not enough arguments in call to F",
	} {
		if !strings.Contains(spec, w) {
			t.Errorf("the fix specifics lack %q:\n%s", w, spec)
		}
	}
	all := allText(p)
	for _, w := range []string{`"path":"b.go"`, "update callers", `<data kind="outline" path="h/h.go">`, "func H(x int) int"} {
		if !strings.Contains(all, w) {
			t.Errorf("the prompt lacks %q", w)
		}
	}
	// GenerateFile of the same file shares every context block (the cached prefix).
	g, err := GenerateFile(&aiv1.GenerateFileRequest{Task: task(), Plan: plan, ReferenceFiles: refs,
		File: &aiv1.FileSpec{Path: "a.go", Action: typev1.FileAction_FILE_ACTION_MODIFY, ExistingContent: goSrc, Description: "call h"}})
	if err != nil {
		t.Fatal(err)
	}
	gb, fb := g.Messages[0].Blocks, p.Messages[0].Blocks
	if len(gb) != len(fb) {
		t.Fatalf("%d blocks against %d", len(gb), len(fb))
	}
	for i := 0; i < len(gb)-1; i++ {
		if gb[i].Text != fb[i].Text {
			t.Errorf("context block %d differs between GenerateFile and FixFile", i)
		}
	}
	if !strings.Contains(specificsText(g), "# File to modify: a.go\nPlan step: 1\n") {
		t.Error("GenerateFile does not say which plan step the file is")
	}
}

func allText(p *Prompt) string {
	var b strings.Builder
	for _, s := range p.System {
		b.WriteString(s.Text + "\n")
	}
	for _, m := range p.Messages {
		for _, bl := range m.Blocks {
			b.WriteString(bl.Text + "\n")
		}
	}
	return b.String()
}

// TestTaskKeepsItsEnd: a long task is cut in the middle, so retry guidance appended at its
// end reaches the model.
func TestTaskKeepsItsEnd(t *testing.T) {
	t.Parallel()
	desc := "Start.\n" + strings.Repeat("filler line\n", 10000) + "Guidance for this retry: use h."
	out := fenceTask(&aiv1.TaskSpec{Title: "t", Description: desc})
	if !strings.Contains(out, "Start.") || !strings.Contains(out, "Guidance for this retry: use h.") || !strings.Contains(out, "bytes cut here") {
		t.Fatalf("the cut task lost its start or end (%d bytes)", len(out))
	}
}

// ReviewCode asks for concerns by line, so it shows files with their line numbers.
func TestReviewShowsLineNumbers(t *testing.T) {
	t.Parallel()
	p, err := ReviewCode(&aiv1.ReviewCodeRequest{Task: task(), Files: []*aiv1.ReviewFile{
		{Path: "a.go", Action: typev1.FileAction_FILE_ACTION_MODIFY, Content: strings.Repeat("x\n", 9) + "package a\n", Diff: "@@ -1 +1 @@"}}})
	if err != nil {
		t.Fatal(err)
	}
	if all := allText(p); !strings.Contains(all, ` lines="numbered">`+"\n 1| x\n") || !strings.Contains(all, "10| package a\n</data>") {
		t.Fatalf("the reviewed file is not numbered:\n%s", all)
	}
}

// A fix may change the test and the code under test together, each in its own named block;
// a block naming a related file is never taken for the fixed file.
func TestFixWithRelatedFiles(t *testing.T) {
	t.Parallel()
	req := &aiv1.FixFileRequest{Path: "a_test.go", Content: "package a\n\nfunc TestF() {}\n",
		RelatedFiles: []*aiv1.ContextFile{{Path: "a.go", Content: "package a\n\nfunc F() int { return 0 }\n"}}}
	got, err := ParseFixFile("```a.go\npackage a\n\nfunc F() int { return 1 }\n```\n```a_test.go\npackage a\n\nfunc TestF() { F() }\n```", req)
	if err != nil {
		t.Fatal(err)
	}
	if got.Content != "package a\n\nfunc TestF() { F() }\n" || len(got.RelatedChanges) != 1 || got.RelatedChanges[0].Content != "package a\n\nfunc F() int { return 1 }\n" {
		t.Fatalf("got %q and %v", got.Content, got.RelatedChanges)
	}
	// A related block only: the test stays as it is.
	got, err = ParseFixFile("The bug is in F.\n```a.go\npackage a\n\nfunc F() int { return 1 }\n```", req)
	if err != nil {
		t.Fatal(err)
	}
	if got.Content != req.Content || len(got.RelatedChanges) != 1 || got.Explanation != "The bug is in F." {
		t.Fatalf("got %q, %v, %q", got.Content, got.RelatedChanges, got.Explanation)
	}
	// Without related files, an unnamed block is the file.
	if _, err := ParseFixFile("```\npackage a\n```", &aiv1.FixFileRequest{Path: "a_test.go", Content: "package a\n"}); err != nil {
		t.Fatal(err)
	}
}
