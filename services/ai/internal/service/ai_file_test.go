package service

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/thefold/thefold/pkg/fakellm"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/ai/internal/engine"
)

const srcGo = "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tif len(args) > 0 {\n\t\tfmt.Println(greet(args[0]))\n\t}\n\tfmt.Println(\"done\")\n}\n\nfunc greet(name string) string {\n\treturn \"hello \" + name\n}\n"

func createFile(path string) *aiv1.GenerateFileRequest {
	return &aiv1.GenerateFileRequest{Task: testTask, File: &aiv1.FileSpec{Path: path, Action: typev1.FileAction_FILE_ACTION_CREATE, Description: "the file"}}
}

func modifyFile(path, existing string) *aiv1.GenerateFileRequest {
	return &aiv1.GenerateFileRequest{Task: testTask, Form: aiv1.ChangeForm_CHANGE_FORM_EDITS,
		File: &aiv1.FileSpec{Path: path, Action: typev1.FileAction_FILE_ACTION_MODIFY, ExistingContent: existing, Description: "greet politely"}}
}

// TestFileAnswersAsRealModelsGiveThem: GenerateFile and FixFile through the real SDK clients,
// fakellm delivering the right answer the ways real models botch it. Each recovers — in the
// same call or with the repair round the fault calls for.
func TestFileAnswersAsRealModelsGiveThem(t *testing.T) {
	t.Parallel()
	whole := "```main.go\n" + srcGo + "```\n"
	editBlock := "<<<<<<< SEARCH\nfunc greet(name string) string {\n\treturn \"hello \" + name\n}\n=======\nfunc greet(name string) string {\n\treturn \"Good day, \" + name\n}\n>>>>>>> REPLACE\n"
	legacy, _ := json.Marshal(map[string]string{"content": srcGo})
	cases := []struct {
		name    string
		req     *aiv1.GenerateFileRequest
		replies []fakellm.Response
		// calls is how many model calls the answer took; want the resulting file.
		calls int
		want  string
		// asked is what the second request must say.
		asked string
		// moreRoom: the second request allows a longer reply than the first.
		moreRoom bool
	}{
		{name: "code in JSON with raw tabs", req: createFile("main.go"),
			replies: []fakellm.Response{{Text: string(legacy), Faults: []string{"json_raw_control"}}}, calls: 1, want: srcGo},
		{name: "JSON in a fence with prose around", req: createFile("main.go"),
			replies: []fakellm.Response{{Text: string(legacy), Faults: []string{"json_in_fence"}}}, calls: 1, want: srcGo},
		{name: "whole file with code elided", req: modifyFile("main.go", srcGo),
			replies: []fakellm.Response{{Text: whole, Faults: []string{"elide"}}, {Text: whole}}, calls: 2, want: srcGo, asked: "leaves code out"},
		{name: "SEARCH text with whitespace drift", req: modifyFile("main.go", srcGo),
			replies: []fakellm.Response{{Text: editBlock, Faults: []string{"search_whitespace_drift"}}}, calls: 1,
			want: strings.Replace(srcGo, `"hello "`, `"Good day, "`, 1)},
		{name: "new file cut off at max_tokens", req: createFile("main.go"),
			replies: []fakellm.Response{{Text: whole, Faults: []string{"truncate"}}, {Text: whole}}, calls: 2, want: srcGo, moreRoom: true},
		{name: "whole rewrite cut off switches to edits", req: &aiv1.GenerateFileRequest{Task: testTask, Form: aiv1.ChangeForm_CHANGE_FORM_WHOLE_FILE,
			File: &aiv1.FileSpec{Path: "main.go", Action: typev1.FileAction_FILE_ACTION_MODIFY, ExistingContent: srcGo, Description: "greet politely"}},
			replies: []fakellm.Response{{Text: whole, Faults: []string{"truncate"}}, {Text: editBlock}}, calls: 2,
			want: strings.Replace(srcGo, `"hello "`, `"Good day, "`, 1), asked: "SEARCH/REPLACE blocks for the changes instead"},
		{name: "one block of two misses", req: modifyFile("main.go", srcGo),
			replies: []fakellm.Response{
				{Text: editBlock + "<<<<<<< SEARCH\nfunc mian() {\n=======\nfunc main() {\n>>>>>>> REPLACE\n"},
				{Text: "<<<<<<< SEARCH\n\tfmt.Println(\"done\")\n=======\n\tfmt.Println(\"bye\")\n>>>>>>> REPLACE\n"}},
			calls: 2, want: strings.NewReplacer(`"hello "`, `"Good day, "`, `"done"`, `"bye"`).Replace(srcGo), asked: "1 of 2 SEARCH/REPLACE blocks did not apply"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newAIEnv(t, &fakellm.Script{Anthropic: c.replies}, aiEnvOptions{provider: "anthropic"})
			resp, err := e.ai.GenerateFile(e.alice, c.req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Content != c.want {
				t.Fatalf("content\n%s\nwant\n%s", resp.Content, c.want)
			}
			if resp.Usage.GetCalls() != int32(c.calls) {
				t.Errorf("%d calls, want %d", resp.Usage.GetCalls(), c.calls)
			}
			reqs := e.fake.Requests()
			if c.asked != "" && (len(reqs) < 2 || !strings.Contains(string(reqs[1].Body), c.asked)) {
				t.Errorf("the second request does not say %q", c.asked)
			}
			if c.moreRoom {
				var first, second struct {
					MaxTokens int `json:"max_tokens"`
				}
				_ = json.Unmarshal(reqs[0].Body, &first)
				_ = json.Unmarshal(reqs[1].Body, &second)
				if second.MaxTokens <= first.MaxTokens {
					t.Errorf("the retry of a cut-off reply allows %d tokens, the first call %d", second.MaxTokens, first.MaxTokens)
				}
			}
		})
	}
}

// A file answer is never asked for in a provider's JSON mode: code comes in code blocks.
func TestFileAnswersAreNotJSONMode(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, scriptFor("openai", fakellm.Response{Text: "```main.go\n" + srcGo + "```"}, answer(t, map[string]any{"content": srcGo})),
		aiEnvOptions{provider: "openai"})
	if _, err := e.ai.GenerateFile(e.alice, createFile("main.go")); err != nil {
		t.Fatal(err)
	}
	reqs := e.fake.Requests()
	if strings.Contains(string(reqs[0].Body), "response_format") {
		t.Errorf("GenerateFile asked for JSON mode: %s", reqs[0].Body)
	}
}

// Answers that stay unusable end after the repair rounds with MODEL_OUTPUT_INVALID naming
// the problem, and every call is billed.
func TestFileAnswerUnusableAfterRepairRounds(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{
		{Text: "<<<<<<< SEARCH\nfunc nothere() {\n=======\nx\n>>>>>>> REPLACE\n"},
		{Text: "<<<<<<< SEARCH\nfunc nothere() {\n=======\nx\n>>>>>>> REPLACE\n"},
		{Text: "I'd rather not.", Times: 2},
	}}, aiEnvOptions{provider: "anthropic"})
	_, err := e.ai.GenerateFile(e.alice, modifyFile("main.go", srcGo))
	st := wantCode(t, err, codes.Unavailable, "also after 3 repair rounds")
	if reason(st) != engine.ReasonModelOutputInvalid || !strings.Contains(st.Message(), "no code") {
		t.Errorf("reason %q, message %q", reason(st), st.Message())
	}
	if n := len(e.fake.Requests()); n != 4 {
		t.Errorf("%d model calls, want 4 (the answer and three repair rounds)", n)
	}
	reqs := e.fake.Requests()
	if !strings.Contains(string(reqs[2].Body), "whole file instead") {
		t.Error("the second miss does not ask for the whole file")
	}
}

// FixFile reads its explanation from the JSON object beside the code.
func TestFixFileExplanationBesideCode(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{{Text: "{\"explanation\": \"greet was misspelt\"}\n" +
		"<<<<<<< SEARCH\n\t\tfmt.Println(gret(args[0]))\n=======\n\t\tfmt.Println(greet(args[0]))\n>>>>>>> REPLACE\n"}}},
		aiEnvOptions{provider: "anthropic"})
	bad := strings.Replace(srcGo, "greet(args", "gret(args", 1)
	resp, err := e.ai.FixFile(e.alice, &aiv1.FixFileRequest{Task: testTask, Path: "main.go", Content: bad, Attempt: 2,
		Errors:         []*typev1.Diagnostic{{Path: "main.go", Line: 7, Message: "undefined: gret", Severity: typev1.Severity_SEVERITY_ERROR}},
		PreviousRounds: []*aiv1.FixHistory{{Round: 1, Error: "edit 1: old_text matches nothing"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != srcGo || resp.Explanation != "greet was misspelt" || len(resp.Edits) != 1 {
		t.Fatalf("got %q / %q / %d edits", resp.Content, resp.Explanation, len(resp.Edits))
	}
	body := string(e.fake.Requests()[0].Body)
	for _, w := range []string{"undefined: gret", "Round 1: its answer could not be used"} {
		if !strings.Contains(body, w) {
			t.Errorf("the prompt lacks %q", w)
		}
	}
}

// Malformed writer context is refused, naming the field.
func TestFileRequestsMalformedContext(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{}, aiEnvOptions{provider: "anthropic"})
	fix := func(f func(*aiv1.FixFileRequest)) *aiv1.FixFileRequest {
		r := &aiv1.FixFileRequest{Task: testTask, Path: "main.go", Content: srcGo, ErrorOutput: "x"}
		f(r)
		return r
	}
	cases := []struct {
		name, field string
		req         *aiv1.FixFileRequest
	}{
		{"history round 0", "previous_rounds[0].round", fix(func(r *aiv1.FixFileRequest) { r.PreviousRounds = []*aiv1.FixHistory{{}} })},
		{"too many rounds", "previous_rounds", fix(func(r *aiv1.FixFileRequest) {
			for i := range 21 {
				r.PreviousRounds = append(r.PreviousRounds, &aiv1.FixHistory{Round: int32(i + 1)})
			}
		})},
		{"reference without a path", "reference_files[0].path", fix(func(r *aiv1.FixFileRequest) { r.ReferenceFiles = []*aiv1.ContextFile{{Content: "x"}} })},
		{"plan step with a bad action", "plan.steps[0].action", fix(func(r *aiv1.FixFileRequest) {
			r.Plan = &typev1.Plan{Steps: []*typev1.PlanStep{{Id: "1", Action: typev1.FileAction(99)}}}
		})},
		{"related file is the fixed file", "related_files[0].path", fix(func(r *aiv1.FixFileRequest) {
			r.RelatedFiles = []*aiv1.ContextFile{{Path: "main.go", Content: "x"}}
		})},
		{"related file twice", "related_files[1].path", fix(func(r *aiv1.FixFileRequest) {
			r.RelatedFiles = []*aiv1.ContextFile{{Path: "a.go", Content: "x"}, {Path: "a.go", Content: "y"}}
		})},
		{"too many related files", "related_files", fix(func(r *aiv1.FixFileRequest) {
			for i := range 6 {
				r.RelatedFiles = append(r.RelatedFiles, &aiv1.ContextFile{Path: fmt.Sprintf("f%d.go", i), Content: "x"})
			}
		})},
		{"expected error too long", "expected_errors[0].message", fix(func(r *aiv1.FixFileRequest) {
			r.ExpectedErrors = []*typev1.Diagnostic{{Message: strings.Repeat("x", maxText+1)}}
		})},
	}
	for _, c := range cases {
		_, err := e.ai.FixFile(e.alice, c.req)
		wantCode(t, err, codes.InvalidArgument, c.field)
	}
	g := createFile("main.go")
	g.ReferenceFiles = []*aiv1.ContextFile{{Path: "../x", Content: "x"}}
	_, err := e.ai.GenerateFile(e.alice, g)
	wantCode(t, err, codes.InvalidArgument, "reference_files[0].path")
}

// A failing test's fix may change the code under test: the related file comes back changed,
// the test file as it was.
func TestFixFileChangesTheCodeUnderTest(t *testing.T) {
	t.Parallel()
	code := "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a - b }\n"
	test := "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 2) != 4 {\n\t\tt.Fatal(\"2+2\")\n\t}\n}\n"
	fixedCode := strings.Replace(code, "a - b", "a + b", 1)
	e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{{Text: `{"explanation": "Add subtracted"}` + "\n```calc/calc.go\n" + fixedCode + "```\n"}}},
		aiEnvOptions{provider: "anthropic"})
	resp, err := e.ai.FixFile(e.alice, &aiv1.FixFileRequest{Task: testTask, Path: "calc/calc_test.go", Content: test, Attempt: 1,
		Errors:       []*typev1.Diagnostic{{Path: "calc/calc_test.go", Line: 7, Message: "TestAdd: 2+2", Severity: typev1.Severity_SEVERITY_ERROR}},
		RelatedFiles: []*aiv1.ContextFile{{Path: "calc/calc.go", Content: code}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != test || len(resp.RelatedChanges) != 1 || resp.RelatedChanges[0].Path != "calc/calc.go" || resp.RelatedChanges[0].Content != fixedCode ||
		resp.Explanation != "Add subtracted" {
		t.Fatalf("got %q, related %v, explanation %q", resp.Content, resp.RelatedChanges, resp.Explanation)
	}
	if body := string(e.fake.Requests()[0].Body); !strings.Contains(body, "Related files you may also change") || !strings.Contains(body, "a - b") {
		t.Error("the prompt does not show the code under test as a file the fix may change")
	}
}

// setWindows gives every enabled model of provider a context window and reply limit.
func setWindows(t *testing.T, e *aiEnv, window, reply int32) {
	t.Helper()
	resp, err := e.reg.ListModels(e.admin, &aiv1.ListModelsRequest{EnabledOnly: true, PageSize: 200})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range resp.Models {
		if _, err := e.reg.UpdateModel(e.admin, &aiv1.UpdateModelRequest{Id: m.Id, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"context_window", "max_output_tokens"}},
			Model: &aiv1.Model{ContextWindow: window, MaxOutputTokens: reply}}); err != nil {
			t.Fatalf("update %s: %v", m.Name, err)
		}
	}
}

// A prompt over the chosen model's context window is fitted to it by priority; one whose
// essentials do not fit is refused, naming the window.
func TestPromptsFitTheModelsWindow(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{{Text: "```main.go\n" + srcGo + "```", RepeatLast: true}}},
		aiEnvOptions{provider: "anthropic"})
	setWindows(t, e, 30000, 4000)
	dep := func(p string) *aiv1.ContextFile {
		return &aiv1.ContextFile{Path: p, Content: strings.Repeat("// "+p+": a line of the dependency\n", 1500)}
	}
	req := createFile("main.go")
	req.DependencyFiles = []*aiv1.ContextFile{dep("far.go"), dep("near.go")}
	if _, err := e.ai.GenerateFile(e.alice, req); err != nil {
		t.Fatal(err)
	}
	body := string(e.fake.Requests()[0].Body)
	if strings.Contains(body, "far.go: a line") || !strings.Contains(body, "dependency file far.go left out") || !strings.Contains(body, "near.go: a line") {
		t.Errorf("the prompt was not fitted by priority (%d bytes)", len(body))
	}
	setWindows(t, e, 6000, 4000)
	_, err := e.ai.GenerateFile(e.alice, createFile("main.go"))
	wantCode(t, err, codes.FailedPrecondition, "context window (6000 tokens")
}
