package workspace

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestUnified(t *testing.T) {
	t.Parallel()
	ten := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"
	cases := []struct {
		name, a, b string
		ctx        int
		want       string
	}{
		{name: "same", a: ten, b: ten, ctx: 3, want: ""},
		{name: "one line in the middle", a: ten, b: strings.Replace(ten, "5\n", "five\n", 1), ctx: 3, want: `--- a/f
+++ b/f
@@ -2,7 +2,7 @@
 2
 3
 4
-5
+five
 6
 7
 8
`},
		{name: "two hunks", a: ten + "11\n12\n", b: strings.Replace(strings.Replace(ten+"11\n12\n", "1\n", "one\n", 1), "12\n", "", 1), ctx: 1, want: `--- a/f
+++ b/f
@@ -1,2 +1,2 @@
-1
+one
 2
@@ -11,2 +11 @@
 11
-12
`},
		// Both expectations are GNU diff -U1's output.
		{name: "changes two lines apart share a hunk", a: ten, b: strings.Replace(strings.Replace(ten, "3\n", "", 1), "6\n", "six\n6\n", 1), ctx: 1, want: `--- a/f
+++ b/f
@@ -2,5 +2,5 @@
 2
-3
 4
 5
+six
 6
`},
		{name: "changes three lines apart do not", a: ten, b: strings.Replace(strings.Replace(ten, "3\n", "", 1), "6\n", "6\nsix\n", 1), ctx: 1, want: `--- a/f
+++ b/f
@@ -2,3 +2,2 @@
 2
-3
 4
@@ -6,2 +5,3 @@
 6
+six
 7
`},
		{name: "from empty", a: "", b: "x\ny\n", ctx: 3, want: `--- a/f
+++ b/f
@@ -0,0 +1,2 @@
+x
+y
`},
		{name: "to empty", a: "x\n", b: "", ctx: 3, want: `--- a/f
+++ b/f
@@ -1 +0,0 @@
-x
`},
		{name: "newline added at the end", a: "a\nb", b: "a\nb\n", ctx: 3, want: `--- a/f
+++ b/f
@@ -1,2 +1,2 @@
 a
-b
\ No newline at end of file
+b
`},
		{name: "insert at the top", a: "b\nc\n", b: "a\nb\nc\n", ctx: 3, want: `--- a/f
+++ b/f
@@ -1,2 +1,3 @@
+a
 b
 c
`},
		{name: "replace a block: deletions first", a: "k\nx\ny\nk\n", b: "k\np\nq\nk\n", ctx: 0, want: `--- a/f
+++ b/f
@@ -2,2 +2,2 @@
-x
-y
+p
+q
`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := unified("a/f", "b/f", lineDiff(splitLinesKeep(c.a), splitLinesKeep(c.b)), c.ctx)
			if got != c.want {
				t.Fatalf("unified diff:\n%s\nwant:\n%s", got, c.want)
			}
		})
	}
}

// TestLineDiffMinimal checks on random inputs that the script rebuilds both sides and is as
// short as the longest common subsequence allows.
func TestLineDiffMinimal(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	gen := func() []string {
		n := rng.IntN(14)
		s := make([]string, n)
		for i := range s {
			s[i] = string(rune('a'+rng.IntN(3))) + "\n"
		}
		return s
	}
	for i := 0; i < 3000; i++ {
		a, b := gen(), gen()
		ops := lineDiff(a, b)
		var ra, rb []string
		changes := 0
		for _, o := range ops {
			if o.kind != opInsert {
				ra = append(ra, o.line)
			}
			if o.kind != opDelete {
				rb = append(rb, o.line)
			}
			if o.kind != opEqual {
				changes++
			}
		}
		if strings.Join(ra, "") != strings.Join(a, "") || strings.Join(rb, "") != strings.Join(b, "") {
			t.Fatalf("script %v does not turn %q into %q", ops, a, b)
		}
		if want := len(a) + len(b) - 2*lcs(a, b); changes != want {
			t.Fatalf("%q → %q: %d changes, the minimum is %d", a, b, changes, want)
		}
	}
}

func lcs(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}

// TestLineDiffFallback: past maxEditDistance the script replaces the middle wholesale and
// still turns one side into the other.
func TestLineDiffFallback(t *testing.T) {
	t.Parallel()
	var a, b []string
	for i := range maxEditDistance {
		a = append(a, fmt.Sprintf("a%d\n", i))
		b = append(b, fmt.Sprintf("b%d\n", i))
	}
	a = append([]string{"same\n"}, a...)
	b = append([]string{"same\n"}, b...)
	ops := lineDiff(a, b)
	var ra, rb []string
	dels, adds := 0, 0
	for _, o := range ops {
		switch o.kind {
		case opDelete:
			dels++
		case opInsert:
			adds++
		}
		if o.kind != opInsert {
			ra = append(ra, o.line)
		}
		if o.kind != opDelete {
			rb = append(rb, o.line)
		}
	}
	if !slices.Equal(ra, a) || !slices.Equal(rb, b) || dels != maxEditDistance || adds != maxEditDistance {
		t.Fatalf("fallback script wrong: %d deletions, %d additions", dels, adds)
	}
}
