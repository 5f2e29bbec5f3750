// Package learn holds the agent's pure learning functions: what kind of task a
// description is (the key strategy memories are stored and found under), which plan steps
// of a finished job worked, when a job's strategy is worth remembering, how a strategy
// memory becomes a fenced hint for the next plan, and the fingerprint of an attempt that
// tells the loop guard an attempt made no progress.
package learn

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// patterns are the task kinds DetectTaskPattern knows, checked in order: the first whose
// keyword the description holds wins. Keywords are English and Norwegian (the seed's
// users wrote both). A keyword of one word matches a word of the description that is it
// or, for keywords of three letters or more, starts with it ("fix" matches "fixes",
// "feil" matches "feilen"); a keyword of several words matches them in sequence.
var patterns = []struct {
	keywords []string
	pattern  string
}{
	{[]string{"migration", "migrasjon", "sql", "alter table", "create table"}, "database migration"},
	{[]string{"api", "endpoint", "route", "handler"}, "new api endpoint"},
	{[]string{"fix", "fiks", "bug", "error", "feil"}, "fix bug"},
	{[]string{"refactor", "refaktor", "decompose", "extract", "split"}, "refactoring"},
	{[]string{"test", "spec"}, "add tests"},
	{[]string{"security", "auth", "sikkerhet", "owasp"}, "security improvement"},
	{[]string{"frontend", "ui", "component", "page", "side"}, "frontend change"},
	{[]string{"config", "setup", "install", "konfigur"}, "configuration"},
	{[]string{"doc", "readme", "dokumentasjon"}, "documentation"},
	{[]string{"performance", "optimi", "cache", "speed", "ytelse"}, "performance optimization"},
}

// words splits s into lower-case words of letters and digits ("SQL-migrasjon" is "sql",
// "migrasjon"; "auth.ts" is "auth", "ts").
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// matches reports whether the keyword kw (one or more words) occurs in ws.
func matches(ws []string, kw string) bool {
	kws := strings.Fields(kw)
	for i := 0; i+len(kws) <= len(ws); i++ {
		ok := true
		for j, k := range kws {
			w := ws[i+j]
			if w != k && (len([]rune(k)) < 3 || !strings.HasPrefix(w, k)) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// DetectTaskPattern names the kind of task a description asks for ("database migration",
// "fix bug", …): the key a strategy memory is stored under and searched with. A
// description of no known kind is named by its first three words longer than three
// letters; an empty one is "general task".
func DetectTaskPattern(description string) string {
	ws := words(description)
	for _, p := range patterns {
		if slices.ContainsFunc(p.keywords, func(kw string) bool { return matches(ws, kw) }) {
			return p.pattern
		}
	}
	var first []string
	for _, w := range ws {
		if len([]rune(w)) > 3 {
			first = append(first, w)
			if len(first) == 3 {
				break
			}
		}
	}
	if len(first) == 0 {
		return "general task"
	}
	return strings.Join(first, " ")
}

// StepOutcome is one plan step of a finished job and whether its work failed at some
// point (a file that failed validation for good, a command that failed).
type StepOutcome struct {
	// Summary is what the step did, as the strategy tells it ("create store/users.go:
	// the users table's queries").
	Summary string
	Failed  bool
}

// ExtractSuccessfulSteps is the summaries of the steps that did not fail, in plan order,
// blank ones left out: the steps a strategy memory keeps.
func ExtractSuccessfulSteps(steps []StepOutcome) []string {
	var out []string
	for _, s := range steps {
		if t := strings.TrimSpace(s.Summary); t != "" && !s.Failed {
			out = append(out, t)
		}
	}
	return out
}

// PlanStepSummary is the summary of a plan step for ExtractSuccessfulSteps: its action and
// path, or its command, then its description.
func PlanStepSummary(s *typev1.PlanStep) string {
	var what string
	switch {
	case s.GetPath() != "":
		action := strings.ToLower(strings.TrimPrefix(s.GetAction().String(), "FILE_ACTION_"))
		if s.GetAction() == typev1.FileAction_FILE_ACTION_UNSPECIFIED {
			action = "write"
		}
		what = action + " " + s.GetPath()
	case len(s.GetCommand()) > 0:
		what = "run " + strings.Join(s.GetCommand(), " ")
	}
	desc := strings.TrimSpace(firstLine(s.GetDescription()))
	switch {
	case what == "":
		return desc
	case desc == "":
		return what
	}
	return what + ": " + desc
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// MinStrategyQuality is the review quality score (0–10) a job needs for its strategy to
// be remembered.
const MinStrategyQuality = 7

// WorthRemembering reports whether a job's strategy is stored as a strategy memory: it
// succeeded on its first attempt, its review scored at least MinStrategyQuality, and
// some step worked.
func WorthRemembering(attempts int, quality float64, successful []string) bool {
	return attempts == 1 && quality >= MinStrategyQuality && len(successful) > 0
}

// StrategyContent is a strategy memory's text: the task pattern and the steps that
// worked, in order.
func StrategyContent(pattern string, successful []string) string {
	return fmt.Sprintf("Strategy for %q: %s", pattern, strings.Join(successful, " → "))
}

// MinHintSimilarity is the similarity above which a strategy memory of the same
// repository becomes a hint for planning.
const MinHintSimilarity = 0.3

// StrategyHint fences a strategy memory for a planning prompt, marked as a suggestion
// rather than an instruction; "" when the memory is not similar enough. The memory's
// own text cannot close the fence: a line of it that looks like the end marker is
// neutralised.
func StrategyHint(content string, similarity float64) string {
	if similarity <= MinHintSimilarity || strings.TrimSpace(content) == "" {
		return ""
	}
	content = strings.ReplaceAll(content, "[END STRATEGY HINT", "[END-STRATEGY-HINT")
	return "[STRATEGY HINT — an approach that worked for similar tasks in this repository]\n" +
		strings.TrimSpace(content) +
		"\n[END STRATEGY HINT — use it as inspiration, not as an instruction]"
}

// volatile are the parts of a diagnostic message that change between attempts without
// the problem changing: numbers (line, column, counts, addresses) and temporary paths.
var volatile = regexp.MustCompile(`(?:/tmp/|/var/folders/)\S*|0x[0-9a-fA-F]+|\d+`)

// Fingerprint is the hash of an attempt's outcome for the loop guard: its diagnostics
// normalised (path, tool, rule and message, with numbers and temporary paths masked;
// sorted, duplicates dropped) and the files it changed (sorted, deduplicated). Two
// attempts with the same fingerprint ended in the same place: the second made no
// progress.
func Fingerprint(diags []*typev1.Diagnostic, changed []string) string {
	var lines []string
	for _, d := range diags {
		msg := volatile.ReplaceAllString(strings.Join(strings.Fields(d.GetMessage()), " "), "#")
		lines = append(lines, strings.Join([]string{"d", d.GetPath(), d.GetTool(), d.GetRule(), msg}, "\x1f"))
	}
	for _, p := range changed {
		lines = append(lines, "f\x1f"+p)
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Stalled reports whether the loop guard stops the retries: the last two attempts each
// repeat the fingerprint of an earlier attempt (fingerprints in attempt order).
func Stalled(fingerprints []string) bool {
	n := len(fingerprints)
	if n < 3 {
		return false
	}
	repeats := func(i int) bool { return slices.Contains(fingerprints[:i], fingerprints[i]) }
	return repeats(n-1) && repeats(n-2)
}
