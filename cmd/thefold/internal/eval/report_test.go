package eval

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata")

// fixedReport is a scripted run of three tasks: one passed, one whose hidden tests failed
// (with output that holds a code fence and markup), one whose job failed.
func fixedReport() *Report {
	return &Report{
		Scripted: true, TasksDir: "eval/tasks", Parallel: 2,
		Started: time.Date(2026, 11, 28, 15, 4, 5, 0, time.UTC), Elapsed: 95 * time.Second,
		Results: []Result{
			{ID: "go-median-even", Language: "go", Kind: "bugfix", Title: "Median is wrong for an even number of values",
				Passed: true, Repo: "local/eval-x-go-median-even", JobID: "job-1", JobStatus: "PENDING_REVIEW",
				Attempts: 1, InputTokens: 13193, OutputTokens: 651, CostMicros: 12400, Models: []string{"claude-sonnet-4-5"},
				Wall: 10500 * time.Millisecond, TestWall: 2100 * time.Millisecond, Files: []string{"stats/stats.go"},
				Phases:     []PhaseTime{{"context", 300 * time.Millisecond}, {"planning", 20 * time.Millisecond}, {"building", 8700 * time.Millisecond}},
				TestOutput: "$ go test -count=1 ./...\nok  \texample.com/samples/stats\t0.004s"},
			{ID: "ts-chunk", Language: "typescript", Kind: "feature", Title: "Add chunk to the array helpers",
				Reason: "hidden tests failed", Repo: "local/eval-x-ts-chunk", JobID: "job-2", JobStatus: "PENDING_REVIEW",
				Attempts: 2, FixRounds: 3, InputTokens: 20522, OutputTokens: 1746, CostMicros: 30700,
				Wall: 120400 * time.Millisecond, TestWall: 9 * time.Second, Files: []string{"src/array.ts", "test/array.test.ts"},
				TestOutput: "$ node --test\n✖ hidden: chunk <script>alert(1)</script>\n```\nnot a fence\n```\n[exit status 1]"},
			{ID: "py-csv-totals", Language: "python", Kind: "bugfix", Title: "Ledger totals miss the last row",
				Reason: "job FAILED: budget exhausted: <b>tokens</b>", Repo: "local/eval-x-py-csv-totals", JobID: "job-3",
				JobStatus: "FAILED", Attempts: 5, FixRounds: 9, InputTokens: 2000000, OutputTokens: 4000, CostMicros: 6100000,
				Wall: 61 * time.Second},
		},
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (go test -run Report -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (go test -run Report -update rewrites it after a deliberate change):\n%s", name, p, got)
	}
}

func TestReportMarkdown(t *testing.T) {
	t.Parallel()
	r := fixedReport()
	md := r.Markdown()
	golden(t, "report.md", md)
	lines := strings.Split(md, "\n")
	if !strings.HasPrefix(lines[2], "> **Replayed answers, not a model.**") {
		t.Errorf("the report does not say at its top that the answers were replayed:\n%s", strings.Join(lines[:4], "\n"))
	}
	for _, want := range []string{
		"**1 of 3 tasks passed their hidden tests.**",
		"| **total** | | | **1/3** | 8 | 12 | 2033715 | 6397 | $6.1431 | 191.9s | 11.1s |",
		"Why it failed: job FAILED: budget exhausted: <b>tokens</b>",
		"````\n$ node --test", // a longer fence than the output's own
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	if strings.Contains(md, "example.com/samples/stats") {
		t.Error("a passing task's test output is in the Markdown report")
	}
}

func TestReportHTML(t *testing.T) {
	t.Parallel()
	r := fixedReport()
	page, err := r.HTML()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "report.html", page)
	for _, want := range []string{
		`<div class="source scripted"><strong>Replayed answers, not a model.</strong> The model was fakellm`,
		"&lt;script&gt;alert(1)&lt;/script&gt;",
		"budget exhausted: &lt;b&gt;tokens&lt;/b&gt;",
		"<svg ", "</svg>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	// Self-contained and inert: no script, nothing fetched.
	for _, bad := range []string{"<script", "src=", "<link", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("HTML holds %q", bad)
		}
	}
	if n := strings.Count(page, "<rect "); n != len(r.Results) {
		t.Errorf("%d bars for %d tasks", n, len(r.Results))
	}
	if !strings.Contains(page, `fill="#cf222e"><title>py-csv-totals: FAIL, 61.0s</title>`) {
		t.Error("the failed task's bar is not red with its figure")
	}
}

func TestReportSummaryAndSource(t *testing.T) {
	t.Parallel()
	r := fixedReport()
	var b bytes.Buffer
	r.Summary(&b)
	golden(t, "summary.txt", b.String())
	if !strings.Contains(b.String(), "1/3 passed their hidden tests — REPLAYED ANSWERS (fakellm), not a model") {
		t.Errorf("summary:\n%s", b.String())
	}
	r.Scripted, r.Provider = false, "ANTHROPIC_API_KEY"
	if got := r.SourceLabel() + " " + r.SourceDetail(); got != "A real model. The provider was chosen by ANTHROPIC_API_KEY; models used: claude-sonnet-4-5. Cost is at the provider's list prices." {
		t.Errorf("real-model source: %q", got)
	}
	b.Reset()
	r.Summary(&b)
	if !strings.Contains(b.String(), "— real model (ANTHROPIC_API_KEY)") {
		t.Errorf("summary:\n%s", b.String())
	}
}

func TestTailOf(t *testing.T) {
	t.Parallel()
	var long []string
	for i := range 100 {
		long = append(long, strings.Repeat("x", i))
	}
	got := tailOf(strings.Join(long, "\n") + "\n")
	lines := strings.Split(got, "\n")
	if lines[0] != "[… earlier output cut]" || lines[len(lines)-1] != strings.Repeat("x", 99) || len(got) > tailBytes+30 {
		t.Errorf("tail: %d lines, first %q", len(lines), lines[0])
	}
	if got := tailOf("a\nb\n"); got != "a\nb" {
		t.Errorf("short output: %q", got)
	}
}
