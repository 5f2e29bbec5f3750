package prompts

import (
	"strings"
	"testing"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/testenv"
	"github.com/thefold/thefold/pkg/tokens"
	"github.com/thefold/thefold/services/ai/internal/llm"
)

func request(p *Prompt) llm.Request {
	return llm.Request{System: p.System, Messages: p.Messages, MaxTokens: p.MaxTokens}
}

// A prompt over the model's window loses the outlines first, then the farthest dependency
// files, then is cut in its longest block's middle — never its instructions or specifics.
func TestFitByPriority(t *testing.T) {
	t.Parallel()
	// One goroutine's computation: the race detector multiplies its time by ten and finds
	// nothing in it (make test-unit runs it without -race).
	testenv.CPUBound(t)
	dep := func(p string, n int) *aiv1.ContextFile {
		return &aiv1.ContextFile{Path: p, Content: strings.Repeat("// "+p+" line of code\n", n)}
	}
	req := &aiv1.GenerateFileRequest{Task: &aiv1.TaskSpec{Title: "t", Description: "Make it so."},
		File:            &aiv1.FileSpec{Path: "c.go", Action: typev1.FileAction_FILE_ACTION_CREATE, Description: "the file"},
		DependencyFiles: []*aiv1.ContextFile{dep("a.go", 2000), dep("b.go", 2000)},
		ReferenceFiles:  []*aiv1.ContextFile{dep("r.go", 2000)}}
	p, err := GenerateFile(req)
	if err != nil {
		t.Fatal(err)
	}
	full := request(p)
	size := total(full, tokens.Count)
	if got, ok := p.Fit(full, size, tokens.Count); !ok || total(got, tokens.Count) != size {
		t.Fatal("a prompt that fits was changed")
	}
	text := func(r llm.Request) string {
		var b strings.Builder
		for _, bl := range r.Messages[0].Blocks {
			b.WriteString(bl.Text)
		}
		return b.String()
	}
	// Room for all but about one file: the outlines go, both dependencies stay.
	got, ok := p.Fit(full, size-5000, tokens.Count)
	if !ok || strings.Contains(text(got), "r.go line") || !strings.Contains(text(got), "the repository outlines left out") ||
		!strings.Contains(text(got), "a.go line") || !strings.Contains(text(got), "b.go line") {
		t.Fatalf("fit to %d: %d tokens", size-5000, total(got, tokens.Count))
	}
	// Room for one file: a.go (the farthest) goes too, b.go stays.
	got, ok = p.Fit(full, size-20000, tokens.Count)
	if !ok || strings.Contains(text(got), "a.go line") || !strings.Contains(text(got), "b.go line") || total(got, tokens.Count) > size-20000 {
		t.Fatalf("fit to %d: %d tokens, ok %v", size-20000, total(got, tokens.Count), ok)
	}
	// Less: every droppable block goes.
	got, ok = p.Fit(full, size-33000, tokens.Count)
	if !ok || strings.Contains(text(got), "b.go line") || !strings.Contains(text(got), "dependency file b.go left out") {
		t.Fatalf("fit to %d: %d tokens, ok %v", size-33000, total(got, tokens.Count), ok)
	}
	// A task too long for the window is cut in its middle; the specifics stay whole.
	long := proto.CloneOf(req)
	long.DependencyFiles, long.ReferenceFiles = nil, nil
	long.Task.Description = "START " + strings.Repeat("words of the task ", 3000) + " END"
	lp, err := GenerateFile(long)
	if err != nil {
		t.Fatal(err)
	}
	lsize := total(request(lp), tokens.Count)
	got, ok = lp.Fit(request(lp), lsize/2, tokens.Count)
	if !ok || total(got, tokens.Count) > lsize/2 || !strings.Contains(text(got), "bytes cut here") || !strings.Contains(text(got), "START") ||
		!strings.Contains(text(got), "END") || !strings.Contains(text(got), "File to create: c.go") {
		t.Fatalf("fit to %d: %d tokens, ok %v", lsize/2, total(got, tokens.Count), ok)
	}
	// Not even the instructions fit.
	if _, ok := p.Fit(full, 100, tokens.Count); ok {
		t.Fatal("a prompt larger than the window was said to fit")
	}
	if len(full.Messages[0].Blocks[1].Text) < 1000 {
		t.Fatal("Fit changed the request it was given")
	}
}

// SurelyFits never says a request fits that does not by the real count (each text's cl100k
// count, scaled and rounded as the engine counts), whatever the text — code, prose, CJK,
// emoji, whitespace runs — and it says so for a request well inside the limit.
func TestSurelyFitsIsABound(t *testing.T) {
	texts := []string{
		"package main\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n",
		strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40),
		strings.Repeat("日本語のテキストと中文文本。", 30),
		strings.Repeat("🙂🚀 ", 50),
		strings.Repeat(" \t\n", 200),
		"a",
		"",
	}
	for _, scale := range []float64{1, 1.15} {
		count := func(s string) int { return int(float64(tokens.Count(s))*scale + 0.5) }
		for i := range texts {
			for j := range texts {
				req := llm.Request{System: []llm.Segment{{Text: texts[i]}}, Messages: []llm.Message{{Blocks: []llm.Block{{Text: texts[j]}, {Text: texts[i]}}}}}
				n := total(req, count)
				for _, limit := range []int{n - 1, n, n + 10, 4 * n} {
					if SurelyFits(req, limit, scale) && n > limit {
						t.Errorf("scale %v, texts %d+%d: SurelyFits at limit %d, but the prompt counts %d tokens", scale, i, j, limit, n)
					}
				}
			}
		}
	}
	small := llm.Request{Messages: []llm.Message{{Blocks: []llm.Block{{Text: strings.Repeat("x", 1000)}}}}}
	if !SurelyFits(small, 200_000, 1.15) {
		t.Error("a 1,000-byte prompt does not surely fit 200,000 tokens")
	}
}
