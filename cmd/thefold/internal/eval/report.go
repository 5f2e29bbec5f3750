package eval

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is an eval run: where its answers came from, and the tasks' results.
type Report struct {
	// Scripted: the answers were fakellm's, replaying the tasks' scripts; else Provider
	// names the setting that chose the real provider (e.g. ANTHROPIC_API_KEY).
	Scripted bool   `json:"scripted"`
	Provider string `json:"provider,omitempty"`
	// TasksDir is where the tasks came from, as the report names it (eval/tasks).
	TasksDir string        `json:"tasks_dir"`
	Started  time.Time     `json:"started"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	Parallel int           `json:"parallel"`
	Results  []Result      `json:"results"`
}

// Totals sum a report's results.
type Totals struct {
	Tasks, Passed            int
	Attempts, FixRounds      int
	InputTokens              int64
	OutputTokens             int64
	CostMicros               int64
	Wall, TestWall           time.Duration
	ByLanguage, ByKind       map[string][2]int // passed, total
	Models                   []string
	LanguageOrder, KindOrder []string
}

// Totals sums the results.
func (r *Report) Totals() Totals {
	t := Totals{ByLanguage: map[string][2]int{}, ByKind: map[string][2]int{}}
	for _, res := range r.Results {
		t.Tasks++
		pass := 0
		if res.Passed {
			t.Passed++
			pass = 1
		}
		t.Attempts += res.Attempts
		t.FixRounds += res.FixRounds
		t.InputTokens += res.InputTokens
		t.OutputTokens += res.OutputTokens
		t.CostMicros += res.CostMicros
		t.Wall += res.Wall
		t.TestWall += res.TestWall
		l := t.ByLanguage[res.Language]
		t.ByLanguage[res.Language] = [2]int{l[0] + pass, l[1] + 1}
		k := t.ByKind[res.Kind]
		t.ByKind[res.Kind] = [2]int{k[0] + pass, k[1] + 1}
		for _, m := range res.Models {
			if !slices.Contains(t.Models, m) {
				t.Models = append(t.Models, m)
			}
		}
	}
	for _, l := range Languages {
		if _, ok := t.ByLanguage[l]; ok {
			t.LanguageOrder = append(t.LanguageOrder, l)
		}
	}
	for _, k := range Kinds {
		if _, ok := t.ByKind[k]; ok {
			t.KindOrder = append(t.KindOrder, k)
		}
	}
	slices.Sort(t.Models)
	return t
}

// SourceLabel says in a few words where the answers came from.
func (r *Report) SourceLabel() string {
	if r.Scripted {
		return "Replayed answers, not a model."
	}
	return "A real model."
}

// SourceDetail says, in a paragraph, where the answers came from and what the figures mean.
func (r *Report) SourceDetail() string {
	if r.Scripted {
		return fmt.Sprintf("The model was fakellm, a scripted server replaying the answers of %[1]s/*/fakellm.json "+
			"(and the common answers of %[1]s/fakellm.json). These figures show the platform's wiring and its recovery "+
			"from botched answers on known-good scripts; they say nothing about a model's skill. Tokens are fakellm's "+
			"estimates of the scripted texts, and cost is those tokens at the list price of the model the platform chose.", r.TasksDir)
	}
	models := "none recorded"
	if m := r.Totals().Models; len(m) > 0 {
		models = strings.Join(m, ", ")
	}
	return fmt.Sprintf("The provider was chosen by %s; models used: %s. Cost is at the provider's list prices.", r.Provider, models)
}

// Dollars formats micro-dollars.
func Dollars(micros int64) string { return fmt.Sprintf("$%.4f", float64(micros)/1e6) }

// Seconds formats a duration to a tenth of a second.
func Seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func verdict(res Result) string {
	if res.Passed {
		return "PASS"
	}
	return "FAIL"
}

// testTime is the hidden tests' time, "—" when they did not run.
func testTime(res Result) string {
	if res.TestWall == 0 && res.TestOutput == "" {
		return "—"
	}
	return Seconds(res.TestWall)
}

func fraction(v [2]int) string { return fmt.Sprintf("%d/%d", v[0], v[1]) }

// Summary writes the table printed at the end of a run.
func (r *Report) Summary(w io.Writer) {
	t := r.Totals()
	label := "REPLAYED ANSWERS (fakellm), not a model"
	if !r.Scripted {
		label = "real model (" + r.Provider + ")"
	}
	fmt.Fprintf(w, "\nTheFold eval: %d/%d passed their hidden tests — %s\n\n", t.Passed, t.Tasks, label)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "task\tlanguage\tkind\tresult\tattempts\tfix rounds\tinput tokens\toutput tokens\tcost\twall\t")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t\n", res.ID, res.Language, res.Kind, verdict(res),
			res.Attempts, res.FixRounds, res.InputTokens, res.OutputTokens, Dollars(res.CostMicros), Seconds(res.Wall))
	}
	fmt.Fprintf(tw, "total\t\t\t%d/%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", t.Passed, t.Tasks, t.Attempts, t.FixRounds,
		t.InputTokens, t.OutputTokens, Dollars(t.CostMicros), Seconds(t.Wall))
	_ = tw.Flush()
	var parts []string
	for _, l := range t.LanguageOrder {
		parts = append(parts, l+" "+fraction(t.ByLanguage[l]))
	}
	for _, k := range t.KindOrder {
		parts = append(parts, k+" "+fraction(t.ByKind[k]))
	}
	fmt.Fprintf(w, "\nby language and kind: %s; %s elapsed with %d in parallel\n", strings.Join(parts, ", "), Seconds(r.Elapsed), r.Parallel)
	for _, res := range r.Results {
		if !res.Passed {
			fmt.Fprintf(w, "  %s: %s\n", res.ID, firstLine(res.Reason))
		}
	}
}

// mdCell escapes text for a Markdown table cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// fence is a Markdown code fence longer than any run of backticks in s.
func fence(s string) string {
	f := "```"
	for strings.Contains(s, f) {
		f += "`"
	}
	return f
}

// Markdown renders the report.
func (r *Report) Markdown() string {
	t := r.Totals()
	var b strings.Builder
	fmt.Fprintf(&b, "# TheFold eval — %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "> **%s** %s\n\n", r.SourceLabel(), r.SourceDetail())
	fmt.Fprintf(&b, "**%d of %d tasks passed their hidden tests.**", t.Passed, t.Tasks)
	var parts []string
	for _, l := range t.LanguageOrder {
		parts = append(parts, l+" "+fraction(t.ByLanguage[l]))
	}
	for _, k := range t.KindOrder {
		parts = append(parts, k+" "+fraction(t.ByKind[k]))
	}
	fmt.Fprintf(&b, " By language and kind: %s.\n\n", strings.Join(parts, ", "))
	fmt.Fprintf(&b, "Each task ran through the whole mesh (task → job → plan → sandboxed build with validation → review gate); "+
		"its hidden tests then ran in a fresh sandbox on the review's files, and the review was rejected. "+
		"%d tasks, %d at a time, in %s.\n\n", t.Tasks, r.Parallel, Seconds(r.Elapsed))
	b.WriteString("| task | language | kind | result | attempts | fix rounds | input tokens | output tokens | cost | wall | hidden tests |\n")
	b.WriteString("|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, res := range r.Results {
		fmt.Fprintf(&b, "| %s | %s | %s | **%s** | %d | %d | %d | %d | %s | %s | %s |\n", mdCell(res.ID), res.Language, res.Kind,
			verdict(res), res.Attempts, res.FixRounds, res.InputTokens, res.OutputTokens, Dollars(res.CostMicros), Seconds(res.Wall), testTime(res))
	}
	fmt.Fprintf(&b, "| **total** | | | **%d/%d** | %d | %d | %d | %d | %s | %s | %s |\n\n", t.Passed, t.Tasks, t.Attempts, t.FixRounds,
		t.InputTokens, t.OutputTokens, Dollars(t.CostMicros), Seconds(t.Wall), Seconds(t.TestWall))
	b.WriteString("Attempts are the job's attempts (1 when its first build reached review); fix rounds are the builder's rounds of " +
		"fixing a file the toolchain rejected, over all attempts; wall is from starting the job to its review; cost is in US dollars " +
		"at the provider's prices.\n\n")
	b.WriteString("## Tasks\n\n")
	for _, res := range r.Results {
		fmt.Fprintf(&b, "### %s — %s\n\n", res.ID, verdict(res))
		fmt.Fprintf(&b, "%s (%s, %s).", res.Title, res.Language, res.Kind)
		if res.JobID != "" {
			fmt.Fprintf(&b, " Job `%s` on `%s`, %s.", res.JobID, res.Repo, res.Where())
		}
		b.WriteString("\n\n")
		if res.Reason != "" {
			fmt.Fprintf(&b, "Why it failed: %s\n\n", res.Reason)
		}
		if len(res.Files) > 0 {
			fmt.Fprintf(&b, "Changed: `%s`\n\n", strings.Join(res.Files, "`, `"))
		}
		if p := res.PhaseSummary(); p != "" {
			fmt.Fprintf(&b, "Time by phase: %s.\n\n", p)
		}
		// A pass's output says only that the tests passed; a failure's is the point.
		if res.TestOutput != "" && !res.Passed {
			f := fence(res.TestOutput)
			fmt.Fprintf(&b, "Hidden tests' output (tail):\n\n%s\n%s\n%s\n\n", f, res.TestOutput, f)
		}
	}
	return b.String()
}

func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Where says where the job stopped: "reached review", or "stopped FAILED".
func (res Result) Where() string {
	if res.JobStatus == "PENDING_REVIEW" {
		return "reached review"
	}
	if res.JobStatus == "" {
		return "did not start"
	}
	return "stopped " + res.JobStatus
}

// PhaseSummary lists the phases that took a tenth of a second or more, with their time.
func (res Result) PhaseSummary() string {
	var parts []string
	for _, p := range res.Phases {
		if p.Wall >= 100*time.Millisecond {
			parts = append(parts, p.Phase+" "+Seconds(p.Wall))
		}
	}
	return strings.Join(parts, ", ")
}
