// Package textedit applies search/replace edits (thefold.type.v1.Edit) to a file's content:
// the form in which a model changes part of a file instead of rewriting it. The ai service
// checks a model's edits with it before answering, and the sandbox applies them to the
// workspace, so both agree on what an edit means.
//
// Apply's matching is exact, byte for byte: no whitespace or line-ending normalisation,
// because an edit that matches "almost" may change the wrong place. ApplyTolerant, for the
// ai service reading a model's answer, also accepts an edit whose whole lines match one
// place when whitespace is ignored, and applies what it can; it returns the edits as they
// applied, exact, so every other user of an edit (the sandbox, the forge) stays exact. When
// an edit does not apply, the error says why in terms a model can act on (which edit, how
// many matches, the closest line, differing line endings).
package textedit

import (
	"fmt"
	"strings"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// Problems an EditError reports. The text of a count mismatch varies ("old_text matches 2
// times, expected 1"); these are the fixed ones.
const (
	ProblemMissing       = "edit is missing"
	ProblemEmptyOldText  = "old_text is empty"
	ProblemNegativeCount = "expected_count is negative"
	ProblemNoMatch       = "old_text matches nothing"
)

// EditError says which edit did not apply and why.
type EditError struct {
	// Index is the edit's position in the list, 0-based (the message counts from 1, as a
	// model reading it does).
	Index int
	// Problem is what is wrong, e.g. ProblemNoMatch or "old_text matches 2 times, expected 1".
	Problem string
	// Hint helps repair the edit, for ProblemNoMatch: that line endings differ, or the
	// content's line closest to old_text's first line. Empty when there is nothing useful
	// to say.
	Hint string
}

func (e *EditError) Error() string {
	msg := fmt.Sprintf("edit %d: %s", e.Index+1, e.Problem)
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// Apply applies edits to content in order and returns the result, or the content untouched
// and an *EditError for the first edit that does not apply (all or nothing).
//
// Each edit's old_text must be non-empty and occur exactly expected_count times (0 means
// exactly once) in the content as it is when that edit applies, so an edit sees the text
// earlier edits produced. Occurrences are counted and replaced as strings.Count and
// strings.ReplaceAll do: leftmost first, not overlapping. Every occurrence is replaced; an
// empty new_text deletes.
func Apply(content string, edits []*typev1.Edit) (string, error) {
	for i, e := range edits {
		if e == nil {
			return "", &EditError{Index: i, Problem: ProblemMissing}
		}
		old := e.GetOldText()
		if old == "" {
			return "", &EditError{Index: i, Problem: ProblemEmptyOldText}
		}
		want := int(e.GetExpectedCount())
		if want < 0 {
			return "", &EditError{Index: i, Problem: ProblemNegativeCount}
		}
		if want == 0 {
			want = 1
		}
		n := strings.Count(content, old)
		switch {
		case n == 0:
			return "", &EditError{Index: i, Problem: ProblemNoMatch, Hint: hint(content, old)}
		case n != want:
			return "", &EditError{Index: i, Problem: fmt.Sprintf("old_text matches %s, expected %d", times(n), want)}
		}
		content = strings.ReplaceAll(content, old, e.GetNewText())
	}
	return content, nil
}

func times(n int) string {
	if n == 1 {
		return "1 time"
	}
	return fmt.Sprintf("%d times", n)
}
