package textedit

import (
	"strings"
	"testing"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

func ed(old, new string) *typev1.Edit { return &typev1.Edit{OldText: old, NewText: new} }

func TestApplyTolerant(t *testing.T) {
	const goFile = "package x\n\nfunc A() int {\n\tif ok {\n\t\treturn 1\n\t}\n\treturn 0\n}\n\nfunc B() {}\n"
	cases := []struct {
		name    string
		content string
		edits   []*typev1.Edit
		want    string
		failed  []int // indexes of skipped edits
	}{{
		name:    "exact",
		content: goFile,
		edits:   []*typev1.Edit{ed("\treturn 0\n", "\treturn 2\n")},
		want:    strings.Replace(goFile, "\treturn 0\n", "\treturn 2\n", 1),
	}, {
		name:    "spaces typed for tabs are re-indented with tabs",
		content: goFile,
		edits:   []*typev1.Edit{ed("    if ok {\n        return 1\n    }\n", "    if ok {\n        return 3\n    }\n    log()\n")},
		want:    strings.Replace(goFile, "\tif ok {\n\t\treturn 1\n\t}\n", "\tif ok {\n\t\treturn 3\n\t}\n\tlog()\n", 1),
	}, {
		name:    "indentation lost: the prefix comes back",
		content: goFile,
		edits:   []*typev1.Edit{ed("if ok {\n\treturn 1\n}", "if !ok {\n\treturn 1\n}")},
		want:    strings.Replace(goFile, "\tif ok {\n", "\tif !ok {\n", 1),
	}, {
		name:    "trailing spaces and blank lines around old_text",
		content: goFile,
		edits:   []*typev1.Edit{ed("\n\tif ok {  \n\t\treturn 1   \n\t}\n\n", "\n\tif ok {\n\t\treturn 4\n\t}\n\n")},
		want:    strings.Replace(goFile, "return 1", "return 4", 1),
	}, {
		name:    "a miss is reported and the rest still apply",
		content: goFile,
		edits:   []*typev1.Edit{ed("func C() {}", "x"), ed("func B() {}", "func B() { A() }")},
		want:    strings.Replace(goFile, "func B() {}", "func B() { A() }", 1),
		failed:  []int{0},
	}, {
		name:    "loosely ambiguous is not applied",
		content: "a := compute(x)\nb := 1\na  :=  compute(x)\nb := 1\n",
		edits:   []*typev1.Edit{ed("a := compute( x)\n", "z\n"), ed("a :=   compute(x)", "y")},
		want:    "a := compute(x)\nb := 1\na  :=  compute(x)\nb := 1\n",
		failed:  []int{0, 1},
	}, {
		name:    "too short to match loosely",
		content: "}\n\t}\n",
		edits:   []*typev1.Edit{ed("    }", "x")},
		want:    "}\n\t}\n",
		failed:  []int{0},
	}, {
		name:    "CRLF content keeps CRLF",
		content: "one line here\r\n\tsecond line here\r\nthird\r\n",
		edits:   []*typev1.Edit{ed("one line here\n    second line here\n", "one line here\n    second line there\n    added line\n")},
		want:    "one line here\r\n\tsecond line there\r\n\tadded line\r\nthird\r\n",
	}, {
		name:    "deleting loosely removes the lines",
		content: goFile,
		edits:   []*typev1.Edit{ed("  if ok {\n    return 1\n  }\n", "")},
		want:    "package x\n\nfunc A() int {\n\treturn 0\n}\n\nfunc B() {}\n",
	}, {
		name:    "exact count mismatch is not loosened",
		content: "x = 1\nx = 1\n",
		edits:   []*typev1.Edit{ed("x = 1", "y")},
		want:    "x = 1\nx = 1\n",
		failed:  []int{0},
	}, {
		name:    "nil and empty edits are skipped",
		content: goFile,
		edits:   []*typev1.Edit{nil, ed("", "x")},
		want:    goFile,
		failed:  []int{0, 1},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, applied, failed := ApplyTolerant(c.content, c.edits)
			if got != c.want {
				t.Fatalf("result\n%q\nwant\n%q", got, c.want)
			}
			var idx []int
			for _, f := range failed {
				idx = append(idx, f.Index)
			}
			if len(idx) != len(c.failed) {
				t.Fatalf("failed %v (%v), want %v", idx, failed, c.failed)
			}
			for i := range idx {
				if idx[i] != c.failed[i] {
					t.Fatalf("failed %v, want %v", idx, c.failed)
				}
			}
			// The edits as applied are exact: Apply reproduces the result from the content.
			again, err := Apply(c.content, applied)
			if err != nil || again != got {
				t.Fatalf("Apply(applied) = %q, %v; want %q", again, err, got)
			}
		})
	}
}

func TestApplyTolerantHints(t *testing.T) {
	_, _, failed := ApplyTolerant("alpha beta\ngamma := 1\nalpha beta\ngamma  := 1\n", []*typev1.Edit{ed("alpha  beta\ngamma := 1", "x")})
	if len(failed) != 1 || !strings.Contains(failed[0].Error(), "would match 2 times") {
		t.Fatalf("failed = %v, want the loose ambiguity named", failed)
	}
	_, _, failed = ApplyTolerant("x = 1\nx = 1\n", []*typev1.Edit{ed("x = 1", "y")})
	if len(failed) != 1 || !strings.Contains(failed[0].Error(), "matches 2 times, expected 1") || !strings.Contains(failed[0].Error(), "surrounding lines") {
		t.Fatalf("failed = %v", failed)
	}
}
