package textedit

import (
	"errors"
	"strings"
	"testing"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

func edit(old, new string, count int32) *typev1.Edit {
	return &typev1.Edit{OldText: old, NewText: new, ExpectedCount: count}
}

func TestApply(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		content string
		edits   []*typev1.Edit
		want    string
	}{
		{"no edits", "abc", nil, "abc"},
		{"once", "func a() {}\nfunc b() {}\n", []*typev1.Edit{edit("func b() {}", "func c() {}", 0)}, "func a() {}\nfunc c() {}\n"},
		{"expected 1 explicitly", "x := 1", []*typev1.Edit{edit("1", "2", 1)}, "x := 2"},
		{"every occurrence", "a.b a.b a.b", []*typev1.Edit{edit("a.b", "c", 3)}, "c c c"},
		{"overlap counts leftmost non-overlapping", "aaa", []*typev1.Edit{edit("aa", "b", 1)}, "ba"},
		{"overlap of four is two", "aaaa", []*typev1.Edit{edit("aa", "b", 2)}, "bb"},
		{"deletion", "keep\ndrop me\nkeep\n", []*typev1.Edit{edit("drop me\n", "", 0)}, "keep\nkeep\n"},
		{"later edit matches text an earlier one made", "x", []*typev1.Edit{edit("x", "y", 0), edit("y", "z", 0)}, "z"},
		{"later edit counts text an earlier one made", "a b", []*typev1.Edit{edit("a", "b", 0), edit("b", "c", 2)}, "c c"},
		{"same old and new", "same", []*typev1.Edit{edit("same", "same", 0)}, "same"},
		{"unicode", "héllo wörld 世界", []*typev1.Edit{edit("wörld", "мир", 0), edit("世界", "🌍", 0)}, "héllo мир 🌍"},
		{"crlf matched exactly", "a\r\nb\r\n", []*typev1.Edit{edit("a\r\nb", "c", 0)}, "c\r\n"},
		{"whole content", "all", []*typev1.Edit{edit("all", "", 0)}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Apply(tc.content, tc.edits)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if got != tc.want {
				t.Fatalf("Apply = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestApplyErrors(t *testing.T) {
	t.Parallel()
	const src = "package main\n\nfunc main() {\n\tfmt.Println(\"hello\")\n\treturn\n}\n"
	cases := []struct {
		name    string
		content string
		edits   []*typev1.Edit
		index   int
		problem string
		msg     string // the whole Error() text
	}{
		{
			name: "missing edit", content: "a", edits: []*typev1.Edit{edit("a", "b", 0), nil},
			index: 1, problem: ProblemMissing, msg: "edit 2: edit is missing",
		},
		{
			name: "empty old_text", content: "a", edits: []*typev1.Edit{edit("", "b", 0)},
			index: 0, problem: ProblemEmptyOldText, msg: "edit 1: old_text is empty",
		},
		{
			name: "negative count", content: "a", edits: []*typev1.Edit{edit("a", "b", -1)},
			index: 0, problem: ProblemNegativeCount, msg: "edit 1: expected_count is negative",
		},
		{
			name: "too many", content: "x x", edits: []*typev1.Edit{edit("x", "y", 0)},
			index: 0, problem: "old_text matches 2 times, expected 1", msg: "edit 1: old_text matches 2 times, expected 1",
		},
		{
			name: "too few", content: "x y", edits: []*typev1.Edit{edit("x", "z", 0), edit("y", "w", 3)},
			index: 1, problem: "old_text matches 1 time, expected 3", msg: "edit 2: old_text matches 1 time, expected 3",
		},
		{
			name: "earlier edit removed the text", content: "abc", edits: []*typev1.Edit{edit("b", "", 0), edit("bc", "x", 0)},
			index: 1, problem: ProblemNoMatch, msg: "edit 2: old_text matches nothing",
		},
		{
			name: "nothing close", content: src, edits: []*typev1.Edit{edit("completely unrelated", "x", 0)},
			index: 0, problem: ProblemNoMatch, msg: "edit 1: old_text matches nothing",
		},
		{
			name: "closest line", content: src, edits: []*typev1.Edit{edit("package main", "package app", 0), edit("\tfmt.Println(\"hallo\")\n", "", 0)},
			index: 1, problem: ProblemNoMatch,
			msg: `edit 2: old_text matches nothing; the closest line to old_text's line 1 is line 4: "\tfmt.Println(\"hello\")"`,
		},
		{
			name: "closest to the first non-blank line", content: src, edits: []*typev1.Edit{edit("\n\nfunc mian() {", "", 0)},
			index: 0, problem: ProblemNoMatch,
			msg: `edit 1: old_text matches nothing; the closest line to old_text's line 3 is line 3: "func main() {"`,
		},
		{
			name: "whitespace only", content: src, edits: []*typev1.Edit{edit("    fmt.Println(\"hello\")", "", 0)},
			index: 0, problem: ProblemNoMatch,
			msg: `edit 1: old_text matches nothing; line 4 differs from old_text's line 1 only in whitespace: "\tfmt.Println(\"hello\")"`,
		},
		{
			name: "a later line differs", content: src, edits: []*typev1.Edit{edit("func main() {\n\tfmt.Println(\"hello\")\n\treturn nil\n}", "", 0)},
			index: 0, problem: ProblemNoMatch,
			msg: `edit 1: old_text matches nothing; old_text's line 1 matches line 3, but its line 3 differs from line 5: "\treturn"`,
		},
		{
			name: "starts and ends mid-line", content: "x := f(1)\ny := g(2)\nz := h(3)\n", edits: []*typev1.Edit{edit("f(1)\ny := q(2)\nz :=", "", 0)},
			index: 0, problem: ProblemNoMatch,
			msg: `edit 1: old_text matches nothing; old_text's line 1 matches line 1, but its line 2 differs from line 2: "y := g(2)"`,
		},
		{
			name: "runs past the end", content: "a\nb", edits: []*typev1.Edit{edit("a\nb\nc", "", 0)},
			index: 0, problem: ProblemNoMatch,
			msg: "edit 1: old_text matches nothing; old_text's line 1 matches line 1, but the content ends before old_text's line 3",
		},
		{
			name: "crlf content, lf old_text", content: "one\r\ntwo\r\nthree\r\n", edits: []*typev1.Edit{edit("one\ntwo\n", "", 0)},
			index: 0, problem: ProblemNoMatch,
			msg: `edit 1: old_text matches nothing; the content has CRLF (\r\n) line endings and old_text does not: it would match with CRLF`,
		},
		{
			name: "lf content, crlf old_text", content: "one\ntwo\nthree\n", edits: []*typev1.Edit{edit("two\r\nthree", "", 0)},
			index: 0, problem: ProblemNoMatch,
			msg: `edit 1: old_text matches nothing; the content has LF (\n) line endings and old_text CRLF (\r\n): it would match with LF`,
		},
		{
			name: "unicode closest line", content: "größe := 1\nbreite := 2\n", edits: []*typev1.Edit{edit("grösse := 1", "", 0)},
			index: 0, problem: ProblemNoMatch,
			msg: `edit 1: old_text matches nothing; the closest line to old_text's line 1 is line 1: "größe := 1"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Apply(tc.content, tc.edits)
			var ee *EditError
			if !errors.As(err, &ee) {
				t.Fatalf("Apply = %q, %v; want an *EditError", got, err)
			}
			if got != "" {
				t.Errorf("Apply returned content %q with an error", got)
			}
			if ee.Index != tc.index || ee.Problem != tc.problem {
				t.Errorf("EditError{Index: %d, Problem: %q}, want {%d, %q}", ee.Index, ee.Problem, tc.index, tc.problem)
			}
			if err.Error() != tc.msg {
				t.Errorf("Error() =\n%s\nwant\n%s", err, tc.msg)
			}
		})
	}
}

// A long line is shown cut at a rune boundary, so the hint stays valid UTF-8 and short.
func TestHintCutsLongLines(t *testing.T) {
	t.Parallel()
	line := strings.Repeat("é", 300)
	_, err := Apply(line+"\n", []*typev1.Edit{edit(strings.Repeat("é", 299)+"e\nx", "", 0)})
	var ee *EditError
	if !errors.As(err, &ee) {
		t.Fatalf("want an *EditError, got %v", err)
	}
	if !strings.HasSuffix(ee.Hint, `…`) || len(ee.Hint) > maxShownBytes+100 {
		t.Fatalf("hint not cut: %q", ee.Hint)
	}
	if !strings.Contains(ee.Hint, "line 1") {
		t.Fatalf("hint does not name the line: %q", ee.Hint)
	}
}

func BenchmarkApplyNoMatchHint(b *testing.B) {
	var sb strings.Builder
	for i := range 5000 {
		sb.WriteString("\tresult = append(result, compute(items[")
		sb.WriteString(strings.Repeat("x", i%40))
		sb.WriteString("]))\n")
	}
	content := sb.String()
	edits := []*typev1.Edit{edit("\tresult = append(result, compute(item[xxxxxxxx]))", "", 0)}
	for b.Loop() {
		if _, err := Apply(content, edits); err == nil {
			b.Fatal("edit applied")
		}
	}
}
