package workspace

import (
	"fmt"
	"strings"
)

// maxEditDistance bounds the Myers search: its trace costs O(D²) memory (16 MB of int32 at
// 2000) and its time O((N+M)·D), so past this many differing lines the changed middle is
// shown as a whole replacement — still a correct diff, only not a minimal one.
const maxEditDistance = 2000

type opKind byte

const (
	opEqual  opKind = ' '
	opDelete opKind = '-'
	opInsert opKind = '+'
)

// op is one line of a diff script.
type op struct {
	kind opKind
	line string // with its "\n", when it has one
}

// splitLinesKeep splits s into lines that keep their "\n"; a last line without one stays
// without, so "no newline at end of file" is a difference like any other.
func splitLinesKeep(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// lineDiff returns a shortest edit script from a to b (Myers' O(ND) algorithm), with each
// run of changes ordered deletions first, as diff and git print them.
func lineDiff(a, b []string) []op {
	// The common prefix and suffix are matched directly: cheap, and most edits are local.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []op
	for _, l := range a[:pre] {
		ops = append(ops, op{opEqual, l})
	}
	mid := myers(a[pre:len(a)-suf], b[pre:len(b)-suf])
	ops = append(ops, normalize(mid)...)
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, op{opEqual, l})
	}
	return ops
}

// replaceAll is the script deleting all of a and inserting all of b.
func replaceAll(a, b []string) []op {
	ops := make([]op, 0, len(a)+len(b))
	for _, l := range a {
		ops = append(ops, op{opDelete, l})
	}
	for _, l := range b {
		ops = append(ops, op{opInsert, l})
	}
	return ops
}

func myers(a, b []string) []op {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		return replaceAll(a, b)
	}
	limit := min(n+m, maxEditDistance)
	off := limit + 1
	v := make([]int, 2*limit+3)
	// trace[d] holds v[-d..d] as it was after step d, for the walk back.
	var trace [][]int32
	found := -1
	for d := 0; d <= limit && found < 0; d++ {
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1] // down: insert b[y]
			} else {
				x = v[off+k-1] + 1 // right: delete a[x]
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				found = d
				break
			}
		}
		snap := make([]int32, 2*d+1)
		for i := range snap {
			snap[i] = int32(v[off-d+i])
		}
		trace = append(trace, snap)
	}
	if found < 0 {
		return replaceAll(a, b)
	}

	// Walk back from (n, m), collecting the script in reverse.
	var rev []op
	x, y := n, m
	for d := found; d > 0; d-- {
		prev := trace[d-1] // index k+(d-1)
		at := func(k int) int { return int(prev[k+d-1]) }
		k := x - y
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := at(pk)
		py := px - pk
		// The step from (px, py) lands at mid; the snake of equal lines runs on to (x, y).
		midX, midY := px+1, py
		if pk == k+1 {
			midX, midY = px, py+1
		}
		for x > midX && y > midY {
			x--
			y--
			rev = append(rev, op{opEqual, a[x]})
		}
		if pk == k+1 {
			rev = append(rev, op{opInsert, b[py]})
		} else {
			rev = append(rev, op{opDelete, a[px]})
		}
		x, y = px, py
	}
	for x > 0 {
		x--
		rev = append(rev, op{opEqual, a[x]})
	}
	ops := make([]op, len(rev))
	for i, o := range rev {
		ops[len(rev)-1-i] = o
	}
	return ops
}

// normalize orders each run of changes deletions first, then insertions.
func normalize(ops []op) []op {
	out := make([]op, 0, len(ops))
	for i := 0; i < len(ops); {
		if ops[i].kind == opEqual {
			out = append(out, ops[i])
			i++
			continue
		}
		j := i
		for j < len(ops) && ops[j].kind != opEqual {
			j++
		}
		for _, o := range ops[i:j] {
			if o.kind == opDelete {
				out = append(out, o)
			}
		}
		for _, o := range ops[i:j] {
			if o.kind == opInsert {
				out = append(out, o)
			}
		}
		i = j
	}
	return out
}

// unified formats a script as a unified diff with ctx lines of context, "" when nothing
// changed.
func unified(oldName, newName string, ops []op, ctx int) string {
	// Line positions before each op, in a and in b.
	ai := make([]int, len(ops)+1)
	bi := make([]int, len(ops)+1)
	var changes []int
	for i, o := range ops {
		ai[i+1], bi[i+1] = ai[i], bi[i]
		if o.kind != opInsert {
			ai[i+1]++
		}
		if o.kind != opDelete {
			bi[i+1]++
		}
		if o.kind != opEqual {
			changes = append(changes, i)
		}
	}
	if len(changes) == 0 {
		return ""
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", oldName, newName)
	for c := 0; c < len(changes); {
		first, last := changes[c], changes[c]
		c++
		// Changes separated by at most 2·ctx equal lines share a hunk.
		for c < len(changes) && changes[c]-last-1 <= 2*ctx {
			last = changes[c]
			c++
		}
		start, end := max(0, first-ctx), min(len(ops), last+ctx+1)
		fmt.Fprintf(&sb, "@@ -%s +%s @@\n", hunkRange(ai[start], ai[end]-ai[start]), hunkRange(bi[start], bi[end]-bi[start]))
		for _, o := range ops[start:end] {
			sb.WriteByte(byte(o.kind))
			sb.WriteString(o.line)
			if !strings.HasSuffix(o.line, "\n") {
				sb.WriteString("\n\\ No newline at end of file\n")
			}
		}
	}
	return sb.String()
}

// hunkRange is diff's "start,count": 1-based, the count left out when it is 1, and the
// line before the hunk (0 at the top) when the range is empty.
func hunkRange(start, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}
