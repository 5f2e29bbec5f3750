package service

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/fakellm"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// fixLoopFiles is a build's context for one file: the files it depends on, in dependency
// order, about 9k tokens in all, as a mid-sized Go package would give.
func fixLoopFiles() []*aiv1.ContextFile {
	var files []*aiv1.ContextFile
	for i, name := range []string{"internal/store/store.go", "internal/store/tasks.go", "internal/service/validate.go"} {
		var b strings.Builder
		fmt.Fprintf(&b, "package %s\n\n", strings.Split(name, "/")[1])
		for j := 0; b.Len() < 12000; j++ {
			fmt.Fprintf(&b, "// Func%d_%d does step %d of the %s workflow and returns its error.\nfunc Func%d_%d(ctx context.Context, id string) error {\n\tif id == \"\" {\n\t\treturn errInvalid\n\t}\n\treturn nil\n}\n\n", i, j, j, name, i, j)
		}
		files = append(files, &aiv1.ContextFile{Path: name, Content: b.String()})
	}
	return files
}

var printFixLoop sync.Once

// BenchmarkFixLoopPromptCache simulates a build's fix loop — one GenerateFile and three
// FixFile calls of the same file on the same context — through the real Anthropic client
// against fakellm, and prints the share of input tokens served from the prompt cache (as
// fakellm accounts it, the way Anthropic does) and the loop's cost with and without
// caching. "cold" is the first file of a build; "warm" the next file of the build, which
// depends on the previous file's dependencies and the previous file: the previous file's
// calls cached all but that last block. From a cold cache the
// first call must write the prefix, so four calls can read at most 3/4 of it: the share of
// the three FixFile calls alone is printed beside the loop's.
func BenchmarkFixLoopPromptCache(b *testing.B) {
	answers := []fakellm.Response{
		{Match: "# Mode: generate", Text: `{"content": "package service\n\nfunc Handle() error { return nil }\n"}`},
		{Match: "# Mode: fix", Text: `{"content": "package service\n\nfunc Handle() error { return nil }\n", "explanation": "fixed the import"}`},
	}
	e := newAIEnv(b, &fakellm.Script{Anthropic: answers}, aiEnvOptions{provider: "anthropic"})
	task := &aiv1.TaskSpec{Title: "Validate task titles", Description: "Reject empty titles in CreateTask and UpdateTask with INVALID_ARGUMENT naming the field."}
	skills := []*aiv1.SkillFragment{{Id: "go", Name: "go-style", Content: strings.Repeat("Wrap errors with %w and name the operation. Return early. ", 40), Priority: 5}}
	deps := fixLoopFiles()
	model := &aiv1.ModelChoice{Model: "claude-sonnet-4-5"}
	loop := func(path string, deps []*aiv1.ContextFile) (cost int64, err error) {
		gen, err := e.ai.GenerateFile(e.alice, &aiv1.GenerateFileRequest{Task: task, Model: model, Skills: skills, DependencyFiles: deps,
			File: &aiv1.FileSpec{Path: path, Action: typev1.FileAction_FILE_ACTION_CREATE, Description: "the handler"}})
		if err != nil {
			return 0, err
		}
		cost += gen.Usage.CostMicros
		content := gen.Content
		for attempt := int32(1); attempt <= 3; attempt++ {
			fix, err := e.ai.FixFile(e.alice, &aiv1.FixFileRequest{Task: task, Model: model, Skills: skills, Path: path, Content: content, DependencyFiles: deps, Attempt: attempt,
				Errors: []*typev1.Diagnostic{{Path: path, Line: attempt + 2, Severity: typev1.Severity_SEVERITY_ERROR, Tool: "go vet", Message: fmt.Sprintf("undefined: errInvalid%d", attempt)}}})
			if err != nil {
				return 0, err
			}
			cost += fix.Usage.CostMicros
			content = fix.Content + fmt.Sprintf("// round %d\n", attempt)
		}
		return cost, nil
	}
	measure := func(warm bool) (share, fixShare float64, in int64, withCache, without int64) {
		e.fake.Reset()
		if warm {
			// The file before in the build: the last dependency, written on the others.
			if _, err := loop(deps[len(deps)-1].Path, deps[:len(deps)-1]); err != nil {
				b.Fatal(err)
			}
		}
		skip := len(e.fake.Requests())
		withCache, err := loop("internal/service/handler.go", deps)
		if err != nil {
			b.Fatal(err)
		}
		var read, out, fixIn, fixRead int64
		for i, r := range e.fake.Requests()[skip:] {
			in += int64(r.InputTokens)
			read += int64(r.CacheReadTokens)
			out += int64(r.OutputTokens)
			if i > 0 {
				fixIn += int64(r.InputTokens)
				fixRead += int64(r.CacheReadTokens)
			}
		}
		est, err := e.ai.EstimateCost(e.alice, &aiv1.EstimateCostRequest{Model: model.Model, InputTokens: in, OutputTokens: out})
		if err != nil {
			b.Fatal(err)
		}
		return float64(read) / float64(in), float64(fixRead) / float64(fixIn), in, withCache, est.CostMicros
	}
	var cold, warm float64
	for b.Loop() {
		cold, _, _, _, _ = measure(false)
		warm, _, _, _, _ = measure(true)
	}
	b.ReportMetric(cold*100, "%cached-cold")
	b.ReportMetric(warm*100, "%cached-warm")
	printFixLoop.Do(func() {
		for _, w := range []bool{false, true} {
			share, fixShare, in, with, without := measure(w)
			name := "cold (first file of a build)"
			if w {
				name = "warm (the next file of the build)"
			}
			fmt.Printf("fix loop, %s: %d input tokens, %.1f%% from the prompt cache (the three FixFile calls: %.1f%%); cost $%.4f with caching, $%.4f without (%.0f%% saved)\n",
				name, in, share*100, fixShare*100, float64(with)/1e6, float64(without)/1e6, 100*(1-float64(with)/float64(without)))
		}
	})
}

// BenchmarkStreamCompleteFirstDelta measures, per provider family, how long the first
// piece of a streamed reply takes from fakellm writing it (its record's FirstDeltaAt) to
// the gRPC client receiving it as a text_delta: the provider SDK's event decoding, the
// engine, the service and one gRPC hop. It prints the p50 and p99 over the iterations.
func BenchmarkStreamCompleteFirstDelta(b *testing.B) {
	for _, prov := range []string{"anthropic", "openai", "gemini"} {
		b.Run(prov, func(b *testing.B) {
			e := newAIEnv(b, scriptFor(prov, fakellm.Response{Text: strings.Repeat("a streamed reply ", 16), ChunkSize: 16, RepeatLast: true}),
				aiEnvOptions{provider: prov})
			req := &aiv1.StreamCompleteRequest{Messages: []*aiv1.ChatMessage{{Role: aiv1.MessageRole_MESSAGE_ROLE_USER, Content: "Stream me a reply."}}}
			var lat []time.Duration
			for b.Loop() {
				s, err := e.ai.StreamComplete(e.alice, req)
				if err != nil {
					b.Fatal(err)
				}
				var first time.Time
				for {
					m, err := s.Recv()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					if first.IsZero() && m.GetTextDelta() != "" {
						first = time.Now()
					}
				}
				recs := e.fake.Requests()
				sent := recs[len(recs)-1].FirstDeltaAt
				if first.IsZero() || sent.IsZero() {
					b.Fatalf("no first delta: received %v, fakellm wrote %v", first, sent)
				}
				lat = append(lat, first.Sub(sent))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[min(len(lat)*99/100, len(lat)-1)].Microseconds()), "p99-µs")
		})
	}
}
