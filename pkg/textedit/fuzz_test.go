package textedit

import (
	"errors"
	"strings"
	"testing"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// FuzzApply checks that Apply never panics, fails only with an *EditError, and that a
// successful edit applies exactly where and as often as it says.
func FuzzApply(f *testing.F) {
	seeds := []struct {
		content, old, new string
		count             int32
	}{
		{"hello world", "world", "there", 0},
		{"aaaa", "aa", "b", 2},
		{"aaa", "aa", "", 1},
		{"a\r\nb\r\n", "a\nb", "c", 0},
		{"größe\n", "grösse", "x", 0},
		{"", "x", "y", 0},
		{"x", "", "y", 0},
		{"\xff\xfe", "\xfe", "ok", 1},
		{"line\n\tindented\n", " indented", "", -3},
	}
	for _, s := range seeds {
		f.Add(s.content, s.old, s.new, s.count)
	}
	f.Fuzz(func(t *testing.T, content, old, new string, count int32) {
		got, err := Apply(content, []*typev1.Edit{edit(old, new, count)})
		if err != nil {
			var ee *EditError
			if !errors.As(err, &ee) || ee.Index != 0 {
				t.Fatalf("error %v (%T) is not an *EditError for edit 0", err, err)
			}
			if got != "" {
				t.Fatalf("content %q returned with an error", got)
			}
			if old != "" && count >= 0 && strings.Count(content, old) == max(int(count), 1) {
				t.Fatalf("edit should apply: %v", err)
			}
			return
		}
		n := strings.Count(content, old)
		if old == "" || n != max(int(count), 1) {
			t.Fatalf("applied although old_text occurs %d times, expected_count %d", n, count)
		}
		if count <= 1 {
			// Exactly one place changed: everything around the one occurrence is kept.
			i := strings.Index(content, old)
			if want := content[:i] + new + content[i+len(old):]; got != want {
				t.Fatalf("Apply = %q, want %q", got, want)
			}
		}
	})
}

// FuzzApplyTolerant checks that ApplyTolerant never panics, that an edit Apply accepts it
// applies the same way, and that the edits it reports as applied reproduce its result
// exactly with Apply.
func FuzzApplyTolerant(f *testing.F) {
	f.Add("func A() {\n\treturn 1\n}\n", "  return 1\n", "  return 2\n", int32(0))
	f.Add("a\r\n  b c d e f g h\r\n", "b  c d e f g h", "x\ny", int32(0))
	f.Add("x\n\n\n", "\n\n", "", int32(2))
	f.Add("\t\t\n", "        ", "  z", int32(0))
	f.Fuzz(func(t *testing.T, content, old, new string, count int32) {
		edits := []*typev1.Edit{edit(old, new, count)}
		got, applied, failed := ApplyTolerant(content, edits)
		if len(applied)+len(failed) != 1 {
			t.Fatalf("%d applied, %d failed for one edit", len(applied), len(failed))
		}
		if exact, err := Apply(content, edits); err == nil && exact != got {
			t.Fatalf("ApplyTolerant = %q, Apply = %q", got, exact)
		}
		again, err := Apply(content, applied)
		if err != nil || again != got {
			t.Fatalf("Apply(applied) = %q, %v; want %q", again, err, got)
		}
	})
}
