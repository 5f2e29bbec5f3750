package prompts

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"github.com/thefold/thefold/pkg/fence"
	"slices"
	"strconv"
	"strings"
	"text/template"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// funcs render request data for the templates. Every piece of untrusted text goes through
// Fence (or Sanitize for the few trusted ones), so a template cannot forget to.
var funcs = template.FuncMap{
	"task":        fenceTask,
	"tree":        fenceTree,
	"files":       fenceFiles,
	"file":        fenceFile,
	"trusted":     trustedMemories,
	"untrusted":   untrustedMemories,
	"diagnostics": fenceDiagnostics,
	"attempts":    fenceAttempts,
	"plan":        fencePlan,
	"projectPlan": fenceProjectPlan,
	"text":        func(kind, s string) string { return fence.Fence(kind, nil, s, maxTextBytes) },
	"output":      func(kind, s string) string { return fence.Fence(kind, nil, s, maxOutputBytes) },
	"reviewFiles": fenceReviewFiles,
	"outcomes":    fenceOutcomes,
	"orderable":   fenceOrderable,
	"phaseName":   func(p *aiv1.ProjectPhase) string { return fence.Attr(p.GetName()) },
	"inc":         func(i int32) int32 { return i + 1 },
	"attr":        fence.Attr,
	// A sub-agent's output shown to another model call: model text, so data.
	"subAgentOutput": func(role, s string) string {
		return fence.Fence("sub-agent-output", [][2]string{{"role", role}}, s, maxSubAgentOutputBytes)
	},
}

func fenceTask(t *aiv1.TaskSpec) string {
	var b strings.Builder
	b.WriteString("Title: " + fence.Sanitize(t.GetTitle(), maxShortBytes) + "\n")
	if len(t.GetLabels()) > 0 {
		b.WriteString("Labels: " + fence.Sanitize(strings.Join(t.GetLabels(), ", "), maxShortBytes) + "\n")
	}
	// Cut in the middle: what follows the task as written (retry guidance, a reviewer's
	// feedback) is appended at the end and matters as much as its start.
	b.WriteString("\n" + fence.TruncateMiddle(fence.Sanitize(t.GetDescription(), 0), maxTextBytes))
	return fence.Fence("task", nil, b.String(), 0)
}

// fenceTree lists repository paths, at most maxTreePaths of them.
func fenceTree(paths []string) string {
	if len(paths) == 0 {
		return "The repository is empty."
	}
	shown := paths
	if len(shown) > maxTreePaths {
		shown = shown[:maxTreePaths]
	}
	var b strings.Builder
	for _, p := range shown {
		b.WriteString(fence.Sanitize(strings.ReplaceAll(p, "\n", " "), maxShortBytes))
		b.WriteByte('\n')
	}
	if n := len(paths) - len(shown); n > 0 {
		fmt.Fprintf(&b, "[… %d more paths not shown]\n", n)
	}
	return fence.Fence("tree", [][2]string{{"paths", strconv.Itoa(len(paths))}}, b.String(), 0)
}

func fenceFile(kind, path, content string, truncated bool) string {
	attrs := [][2]string{{"path", path}}
	if truncated {
		// The caller cut it to a token budget before we saw it.
		attrs = append(attrs, [2]string{"truncated", "true"})
	}
	return fence.Fence(kind, attrs, content, maxFileBytes)
}

// fenceFiles fences context files in the order given: the order is the dependency order
// and keeps the prompt prefix identical across calls.
func fenceFiles(kind string, fs []*aiv1.ContextFile) string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, fenceFile(kind, f.GetPath(), f.GetContent(), f.GetTruncated()))
	}
	return strings.Join(out, "\n\n")
}

func memoryType(t typev1.MemoryType) string {
	if t == typev1.MemoryType_MEMORY_TYPE_UNSPECIFIED {
		return "general"
	}
	return strings.ToLower(strings.TrimPrefix(t.String(), "MEMORY_TYPE_"))
}

func isTrusted(m *aiv1.MemoryFragment) bool {
	return m.GetTrust() == typev1.Trust_TRUST_TRUSTED
}

// trustedMemories lists the TRUSTED memories as guidance; "" when there are none.
func trustedMemories(ms []*aiv1.MemoryFragment) string {
	var b strings.Builder
	for _, m := range ms {
		if !isTrusted(m) {
			continue
		}
		fmt.Fprintf(&b, "- [%s] %s\n", memoryType(m.GetType()),
			strings.ReplaceAll(fence.Sanitize(m.GetContent(), maxMemoryBytes), "\n", "\n  "))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// untrustedMemories fences every memory that is not TRUSTED; "" when there are none.
func untrustedMemories(ms []*aiv1.MemoryFragment) string {
	var out []string
	for _, m := range ms {
		if isTrusted(m) {
			continue
		}
		out = append(out, fence.Fence("memory", [][2]string{{"type", memoryType(m.GetType())}}, m.GetContent(), maxMemoryBytes))
	}
	return strings.Join(out, "\n\n")
}

func severity(s typev1.Severity) string {
	if s == typev1.Severity_SEVERITY_UNSPECIFIED {
		return "error"
	}
	return strings.ToLower(strings.TrimPrefix(s.String(), "SEVERITY_"))
}

// diagnosticLines renders diagnostics the way compilers print them.
func diagnosticLines(ds []*typev1.Diagnostic) string {
	var b strings.Builder
	for _, d := range ds {
		loc := d.GetPath()
		if loc == "" {
			loc = "(no file)"
		}
		if d.GetLine() > 0 {
			loc += ":" + strconv.Itoa(int(d.GetLine()))
			if d.GetColumn() > 0 {
				loc += ":" + strconv.Itoa(int(d.GetColumn()))
			}
		}
		src := d.GetTool()
		if d.GetRule() != "" {
			src += " " + d.GetRule()
		}
		line := fmt.Sprintf("%s: %s: %s", loc, severity(d.GetSeverity()), fence.Sanitize(d.GetMessage(), maxShortBytes))
		if src = strings.TrimSpace(src); src != "" {
			line += " [" + src + "]"
		}
		b.WriteString(strings.ReplaceAll(line, "\n", "\n    ") + "\n")
	}
	return b.String()
}

func fenceDiagnostics(ds []*typev1.Diagnostic) string {
	if len(ds) == 0 {
		return ""
	}
	return fence.Fence("diagnostics", [][2]string{{"count", strconv.Itoa(len(ds))}}, diagnosticLines(ds), maxOutputBytes)
}

func fenceAttempts(as []*aiv1.AttemptRecord) string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		var b strings.Builder
		if a.GetSummary() != "" {
			b.WriteString("Tried: " + fence.Sanitize(a.GetSummary(), maxTextBytes) + "\n")
		}
		if len(a.GetErrors()) > 0 {
			b.WriteString("Diagnostics:\n" + diagnosticLines(a.GetErrors()))
		}
		if a.GetError() != "" {
			b.WriteString("Failure output:\n" + fence.Sanitize(a.GetError(), maxOutputBytes) + "\n")
		}
		if a.GetCategory() != aiv1.FailureCategory_FAILURE_CATEGORY_UNSPECIFIED {
			b.WriteString("Diagnosed as: " + categoryName(a.GetCategory()) + "\n")
		}
		if a.GetDiagnosis() != "" {
			b.WriteString("Diagnosis: " + fence.Sanitize(a.GetDiagnosis(), maxTextBytes) + "\n")
		}
		attrs := [][2]string{{"attempt", strconv.Itoa(int(a.GetAttempt()))}}
		out = append(out, fence.Fence("attempt", attrs, b.String(), maxTextBytes+maxOutputBytes))
	}
	return strings.Join(out, "\n\n")
}

// js renders v as compact JSON without HTML escaping (code is full of < and &).
func js(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only plain structs of strings, ints and slices are encoded here.
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// fencePlan shows a plan in the shape PlanTask answers with, one step per line: compact
// for the token count, readable for the model.
func fencePlan(p *typev1.Plan) string {
	if p == nil {
		return ""
	}
	j := planToJSON(p)
	var b strings.Builder
	b.WriteString(`{"summary":` + js(j.Summary))
	if len(j.Packages) > 0 {
		b.WriteString(`,"packages":` + js(j.Packages))
	}
	b.WriteString(`,"steps":[`)
	for i, s := range j.Steps {
		b.WriteString("\n" + js(s) + sep(i, len(j.Steps)))
	}
	b.WriteString("\n]}")
	return fence.Fence("plan", nil, b.String(), maxFileBytes)
}

// fenceProjectPlan shows a project plan in DecomposeProject's answer shape, one task per
// line.
func fenceProjectPlan(p *aiv1.ProjectPlan) string {
	if p == nil {
		return ""
	}
	j := projectPlanToJSON(p)
	var b strings.Builder
	b.WriteString(`{"summary":` + js(j.Summary) + `,"conventions":` + js(j.Conventions) + `,"phases":[`)
	for i, ph := range j.Phases {
		b.WriteString("\n" + `{"name":` + js(ph.Name) + `,"description":` + js(ph.Description) + `,"tasks":[`)
		for k, t := range ph.Tasks {
			b.WriteString("\n" + js(t) + sep(k, len(ph.Tasks)))
		}
		b.WriteString("\n]}" + sep(i, len(j.Phases)))
	}
	b.WriteString("\n]}")
	return fence.Fence("project-plan", nil, b.String(), maxFileBytes)
}

func sep(i, n int) string {
	if i < n-1 {
		return ","
	}
	return ""
}

// fenceReviewFiles shows changed files within reviewBudget bytes in all: the largest files
// are cut first, so every file is seen and small ones whole.
// numbered prefixes every line of content with its 1-based number ("  7| "), so a review's
// concerns can name lines.
func numbered(content string) string {
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	width := len(strconv.Itoa(len(lines)))
	var b strings.Builder
	b.Grow(len(content) + len(lines)*(width+2))
	for i, l := range lines {
		b.WriteString(fmt.Sprintf("%*d| ", width, i+1))
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func numberedAttrs(attrs [][2]string) [][2]string {
	return append(slices.Clone(attrs), [2]string{"lines", "numbered"})
}

func fenceReviewFiles(fs []*aiv1.ReviewFile) string {
	sizes := make([]int, len(fs))
	contents := make([]string, len(fs))
	for i, f := range fs {
		if f.GetContent() != "" {
			contents[i] = numbered(f.GetContent())
		}
		sizes[i] = len(contents[i]) + len(f.GetDiff())
	}
	caps := shareBudget(sizes, reviewBudget)
	out := make([]string, 0, len(fs))
	for i, f := range fs {
		attrs := [][2]string{{"path", f.GetPath()}, {"action", actionName(f.GetAction())}}
		// The diff says what changed, so it gets its share first; the content gives context.
		diffCap := min(len(f.GetDiff()), caps[i])
		contentCap := max(caps[i]-diffCap, 0)
		// A created file's diff repeats its content and a deleted one has no content, so
		// those show one of the two; a modified file shows both.
		var parts []string
		switch {
		case f.GetAction() == typev1.FileAction_FILE_ACTION_CREATE && f.GetContent() != "":
			parts = append(parts, fence.Fence("file", numberedAttrs(attrs), contents[i], max(caps[i], 1)))
		case f.GetAction() == typev1.FileAction_FILE_ACTION_DELETE || f.GetContent() == "":
			parts = append(parts, fence.Fence("diff", attrs, f.GetDiff(), max(caps[i], 1)))
		default:
			if f.GetDiff() != "" {
				parts = append(parts, fence.Fence("diff", attrs, f.GetDiff(), max(diffCap, 1)))
			}
			parts = append(parts, fence.Fence("file", numberedAttrs(attrs), contents[i], max(contentCap, 1)))
		}
		out = append(out, strings.Join(parts, "\n"))
	}
	return strings.Join(out, "\n\n")
}

// reviewBudget is the file text a review prompt carries in all (~150k tokens).
const reviewBudget = 600 << 10

// shareBudget splits budget over items of the given sizes by water-filling: items smaller
// than an equal share keep their size, the rest split what is left equally. Each cap is
// also at most maxFileBytes.
func shareBudget(sizes []int, budget int) []int {
	caps := make([]int, len(sizes))
	order := make([]int, len(sizes))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(sizes[a], sizes[b]) })
	left := budget
	for k, i := range order {
		share := left / (len(order) - k)
		caps[i] = min(sizes[i], share, maxFileBytes)
		left -= caps[i]
	}
	return caps
}

func fenceOutcomes(os []*aiv1.TaskOutcome) string {
	out := make([]string, 0, len(os))
	for _, o := range os {
		status := "failed"
		if o.GetSucceeded() {
			status = "succeeded"
		}
		var b strings.Builder
		b.WriteString("Title: " + fence.Sanitize(o.GetTitle(), maxShortBytes) + "\n")
		if o.GetSummary() != "" {
			b.WriteString(fence.Sanitize(o.GetSummary(), maxTextBytes) + "\n")
		}
		if len(o.GetFiles()) > 0 {
			b.WriteString("Files: " + strings.Join(o.GetFiles(), ", ") + "\n")
		}
		out = append(out, fence.Fence("outcome", [][2]string{{"key", o.GetKey()}, {"status", status}}, b.String(), maxTextBytes))
	}
	return strings.Join(out, "\n\n")
}

// maxOrderableBytes caps one task's text in PlanTaskOrder, which sees many tasks.
const maxOrderableBytes = 4 << 10

func fenceOrderable(ts []*aiv1.OrderableTask) string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		attrs := [][2]string{{"id", t.GetId()}, {"priority", priorityName(t.GetPriority())}}
		if t.GetComplexity() > 0 {
			attrs = append(attrs, [2]string{"complexity", strconv.Itoa(int(t.GetComplexity()))})
		}
		if len(t.GetBlockedBy()) > 0 {
			attrs = append(attrs, [2]string{"blocked_by", strings.Join(t.GetBlockedBy(), ",")})
		}
		var b strings.Builder
		b.WriteString("Title: " + fence.Sanitize(t.GetTitle(), maxShortBytes) + "\n")
		if len(t.GetLabels()) > 0 {
			b.WriteString("Labels: " + fence.Sanitize(strings.Join(t.GetLabels(), ", "), maxShortBytes) + "\n")
		}
		if t.GetDescription() != "" {
			b.WriteString("\n" + fence.Sanitize(t.GetDescription(), maxOrderableBytes))
		}
		out = append(out, fence.Fence("task", attrs, b.String(), 0))
	}
	return strings.Join(out, "\n\n")
}

func priorityName(p typev1.Priority) string {
	if p == typev1.Priority_PRIORITY_UNSPECIFIED {
		return "none"
	}
	return strings.ToLower(strings.TrimPrefix(p.String(), "PRIORITY_"))
}

// maxSkillBytes caps one skill; skills are admin-authored but can still be long.
const maxSkillBytes = 20 << 10

// guidanceSegment renders the second system segment: skills by priority (then name),
// project conventions and code patterns. "" when there are none.
func guidanceSegment(skills []*aiv1.SkillFragment, conventions string, patterns []*aiv1.CodePattern) string {
	var parts []string
	if len(skills) > 0 {
		sorted := slices.Clone(skills)
		slices.SortStableFunc(sorted, func(a, b *aiv1.SkillFragment) int {
			return cmp.Or(cmp.Compare(b.GetPriority(), a.GetPriority()),
				cmp.Compare(a.GetName(), b.GetName()), cmp.Compare(a.GetId(), b.GetId()))
		})
		var b strings.Builder
		b.WriteString("# Skills\nFollow these instructions from the administrators where they apply.")
		for _, s := range sorted {
			b.WriteString("\n\n## " + fence.Sanitize(strings.ReplaceAll(s.GetName(), "\n", " "), maxShortBytes) + "\n")
			b.WriteString(fence.Sanitize(s.GetContent(), maxSkillBytes))
		}
		parts = append(parts, b.String())
	}
	if strings.TrimSpace(conventions) != "" {
		parts = append(parts, "# Project conventions\nThe code must follow these conventions of the project.\n\n"+
			fence.Fence("conventions", nil, conventions, maxTextBytes))
	}
	if len(patterns) > 0 {
		var b strings.Builder
		b.WriteString("# Code patterns\nKnown patterns from this codebase's history; reuse them where they fit.")
		for _, p := range patterns {
			attrs := [][2]string{{"language", p.GetLanguage()}}
			body := "Solves: " + fence.Sanitize(p.GetDescription(), maxShortBytes) + "\n\n" + p.GetCode()
			b.WriteString("\n\n" + fence.Fence("code-pattern", attrs, body, maxMemoryBytes))
		}
		parts = append(parts, b.String())
	}
	return strings.Join(parts, "\n\n")
}
