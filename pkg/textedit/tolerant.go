package textedit

import (
	"fmt"
	"strings"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// minLooseBytes is the least text (whitespace collapsed) an old_text must have to be
// matched loosely: a short one ("}", "return nil") that is unique only by luck must match
// exactly.
const minLooseBytes = 8

// ApplyTolerant applies edits in order as Apply does, with two differences for edits a
// model wrote against a file it saw:
//
//   - An edit whose old_text (expected once) matches nothing exactly, but matches exactly one
//     run of whole lines when the whitespace within and around each line is ignored, applies
//     there. Its new_text is re-indented by the difference between old_text's indentation
//     and the file's (the same prefix added or removed on every line, or four spaces read as
//     a tab), and written with the file's line endings. Models re-type indentation; an
//     almost-match of a whole line run that occurs once is the place they meant.
//   - An edit that does not apply is skipped and reported, and the ones after it still apply
//     to the content as it is.
//
// It returns the result, the edits as they were applied (old_text as it stands in the
// content at that point, new_text as written; each applies exactly with Apply, in order, to
// content) and an *EditError per skipped edit, in order.
func ApplyTolerant(content string, edits []*typev1.Edit) (string, []*typev1.Edit, []*EditError) {
	var applied []*typev1.Edit
	var failed []*EditError
	for i, e := range edits {
		if e == nil {
			failed = append(failed, &EditError{Index: i, Problem: ProblemMissing})
			continue
		}
		out, done, err := applyOne(content, i, e)
		if err != nil {
			failed = append(failed, err)
			continue
		}
		content = out
		applied = append(applied, done)
	}
	return content, applied, failed
}

// applyOne applies one edit exactly, or loosely (see ApplyTolerant), returning the content,
// the edit as applied, or why it does not apply.
func applyOne(content string, i int, e *typev1.Edit) (string, *typev1.Edit, *EditError) {
	old := e.GetOldText()
	if old == "" {
		return "", nil, &EditError{Index: i, Problem: ProblemEmptyOldText}
	}
	want := int(e.GetExpectedCount())
	if want < 0 {
		return "", nil, &EditError{Index: i, Problem: ProblemNegativeCount}
	}
	if want == 0 {
		want = 1
	}
	n := strings.Count(content, old)
	switch {
	case n == want:
		return strings.ReplaceAll(content, old, e.GetNewText()),
			&typev1.Edit{OldText: old, NewText: e.GetNewText(), ExpectedCount: e.GetExpectedCount()}, nil
	case n > 0:
		return "", nil, &EditError{Index: i, Problem: fmt.Sprintf("old_text matches %s, expected %d", times(n), want),
			Hint: "include more of the surrounding lines so it matches only the place meant"}
	case want != 1:
		return "", nil, &EditError{Index: i, Problem: ProblemNoMatch, Hint: hint(content, old)}
	}
	m, count := looseMatch(content, old)
	switch {
	case count == 1:
		repl := reindent(m, e.GetNewText())
		if repl == "" {
			// Deleting the lines: their line end goes with them.
			if strings.HasPrefix(content[m.end:], "\r\n") {
				m.end += 2
			} else if strings.HasPrefix(content[m.end:], "\n") {
				m.end++
			}
		}
		exact := content[m.start:m.end]
		return content[:m.start] + repl + content[m.end:], &typev1.Edit{OldText: exact, NewText: repl}, nil
	case count > 1:
		return "", nil, &EditError{Index: i, Problem: ProblemNoMatch,
			Hint: fmt.Sprintf("ignoring whitespace it would match %s; copy it exactly, with more of the surrounding lines", times(count))}
	}
	return "", nil, &EditError{Index: i, Problem: ProblemNoMatch, Hint: hint(content, old)}
}

// looseSpan is where a loose match lies in the content and how its lines pair up with
// old_text's.
type looseSpan struct {
	// start and end are byte offsets of the matched lines, without the last one's line end.
	start, end int
	// oldLines and gotLines are the non-blank-trimmed lines of old_text and of the content
	// that matched them, pairwise.
	oldLines, gotLines []string
	// crlf: the content's matched lines end in "\r\n".
	crlf bool
	// trimmedLead and trimmedTail are the blank lines cut from old_text's start and end.
	trimmedLead, trimmedTail int
}

// looseMatch finds the runs of whole content lines equal to old's lines (blank lines at
// old's start and end dropped) when each line's whitespace is collapsed, returning the
// first and how many there are.
func looseMatch(content, old string) (looseSpan, int) {
	oldLines := splitLines(strings.TrimSuffix(old, "\n"))
	lead := 0
	for lead < len(oldLines) && strings.TrimSpace(oldLines[lead]) == "" {
		lead++
	}
	tail := len(oldLines)
	for tail > lead && strings.TrimSpace(oldLines[tail-1]) == "" {
		tail--
	}
	oldLines = oldLines[lead:tail]
	norm := make([]string, len(oldLines))
	size := 0
	for i, l := range oldLines {
		norm[i] = collapse(l)
		size += len(norm[i])
	}
	if len(oldLines) == 0 || size < minLooseBytes {
		return looseSpan{}, 0
	}
	// Line starts of the content.
	starts := []int{0}
	for i := 0; i < len(content); i++ {
		if content[i] == '\n' {
			starts = append(starts, i+1)
		}
	}
	lineAt := func(k int) string {
		end := len(content)
		if k+1 < len(starts) {
			end = starts[k+1] - 1
		}
		return strings.TrimSuffix(content[starts[k]:end], "\r")
	}
	var first looseSpan
	count := 0
	for k := 0; k+len(oldLines) <= len(starts); k++ {
		if collapse(lineAt(k)) != norm[0] {
			continue
		}
		ok := true
		for j := 1; j < len(oldLines) && ok; j++ {
			ok = collapse(lineAt(k+j)) == norm[j]
		}
		if !ok {
			continue
		}
		count++
		if count > 1 {
			continue
		}
		last := k + len(oldLines) - 1
		end := len(content)
		if last+1 < len(starts) {
			end = starts[last+1] - 1
		}
		crlf := end > starts[last] && content[end-1] == '\r'
		if crlf {
			end--
		}
		got := make([]string, len(oldLines))
		for j := range got {
			got[j] = lineAt(k + j)
		}
		first = looseSpan{start: starts[k], end: end, oldLines: oldLines, gotLines: got, crlf: crlf,
			trimmedLead: lead, trimmedTail: len(splitLines(strings.TrimSuffix(old, "\n"))) - tail}
	}
	return first, count
}

// collapse is a line with its whitespace runs made one space and its ends trimmed.
func collapse(l string) string {
	return strings.Join(strings.Fields(l), " ")
}

// reindent writes new (the model's new_text for a loose match) the way the matched lines
// are written: the blank lines trimmed from old_text trimmed from it too, its indentation
// moved by the difference between old_text's and the content's, its line ends the content's.
func reindent(m looseSpan, new string) string {
	lines := splitLines(strings.TrimSuffix(new, "\n"))
	for n := m.trimmedLead; n > 0 && len(lines) > 0 && strings.TrimSpace(lines[0]) == ""; n-- {
		lines = lines[1:]
	}
	for n := m.trimmedTail; n > 0 && len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == ""; n-- {
		lines = lines[:len(lines)-1]
	}
	if fix := indentFix(m.oldLines, m.gotLines); fix != nil {
		for i, l := range lines {
			if strings.TrimSpace(l) != "" {
				lines[i] = fix(l)
			}
		}
	}
	sep := "\n"
	if m.crlf {
		sep = "\r\n"
	}
	return strings.Join(lines, sep)
}

// indentFix returns the change of indentation that turns every non-blank old line's into its
// matched line's, or nil when there is no single one (the lines then keep theirs).
func indentFix(old, got []string) func(string) string {
	type pair struct{ o, g string }
	var pairs []pair
	for i := range old {
		if strings.TrimSpace(old[i]) == "" {
			continue
		}
		pairs = append(pairs, pair{leading(old[i]), leading(got[i])})
	}
	all := func(ok func(p pair) bool) bool {
		for _, p := range pairs {
			if !ok(p) {
				return false
			}
		}
		return true
	}
	if all(func(p pair) bool { return p.o == p.g }) {
		return nil
	}
	// Four spaces typed for each tab (or the reverse).
	if all(func(p pair) bool { return strings.ReplaceAll(p.o, "    ", "\t") == p.g }) {
		return func(l string) string {
			lead := leading(l)
			return strings.ReplaceAll(lead, "    ", "\t") + l[len(lead):]
		}
	}
	if all(func(p pair) bool { return p.o == strings.ReplaceAll(p.g, "    ", "\t") }) {
		return func(l string) string {
			lead := leading(l)
			return strings.ReplaceAll(lead, "\t", "    ") + l[len(lead):]
		}
	}
	// The same prefix added to (or removed from) every line.
	p0 := pairs[0]
	if strings.HasPrefix(p0.g, p0.o) {
		add := p0.g[len(p0.o):]
		if all(func(p pair) bool { return p.g == add+p.o }) {
			return func(l string) string { return add + l }
		}
	}
	if strings.HasPrefix(p0.o, p0.g) {
		cut := p0.o[len(p0.g):]
		if all(func(p pair) bool { return p.o == cut+p.g }) {
			return func(l string) string { return strings.TrimPrefix(l, cut) }
		}
	}
	return nil
}

// leading is l's indentation.
func leading(l string) string {
	return l[:len(l)-len(strings.TrimLeft(l, " \t"))]
}
