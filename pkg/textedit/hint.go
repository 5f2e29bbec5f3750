package textedit

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

const (
	// minSimilarity is how alike (1 - edit distance / length) a line must be to old_text's
	// first line to be offered as the closest: below it the "closest" line is noise that
	// would mislead a model more than no hint.
	minSimilarity = 0.6
	// maxCompareRunes caps the part of a line that is compared; long lines are compared by
	// their start, which is where they usually differ from each other.
	maxCompareRunes = 256
	// distanceBudget caps the edit-distance cells computed for one hint, so a huge file
	// cannot make a failing edit slow; the best line found so far is used.
	distanceBudget = 20_000_000
	// maxShownBytes caps a line quoted in a hint.
	maxShownBytes = 240
)

// hint explains why old matches nothing in content, or returns "" when it cannot.
func hint(content, old string) string {
	if h := lineEndingHint(content, old); h != "" {
		return h
	}
	return closestLineHint(content, old)
}

// lineEndingHint reports the case where old would match if its line endings were the
// content's: the edit is wrong (matching is exact) but trivially fixable.
func lineEndingHint(content, old string) string {
	lf := strings.ReplaceAll(old, "\r\n", "\n")
	if !strings.Contains(lf, "\n") {
		return ""
	}
	crlf := strings.ReplaceAll(lf, "\n", "\r\n")
	switch {
	case crlf != old && strings.Contains(content, crlf):
		return "the content has CRLF (\\r\\n) line endings and old_text does not: it would match with CRLF"
	case lf != old && strings.Contains(content, lf):
		return "the content has LF (\\n) line endings and old_text CRLF (\\r\\n): it would match with LF"
	}
	return ""
}

// closestLineHint finds the content line closest to old's first non-blank line.
func closestLineHint(content, old string) string {
	oldLines := splitLines(old)
	first := -1
	for i, l := range oldLines {
		if strings.TrimSpace(l) != "" {
			first = i
			break
		}
	}
	if first < 0 {
		return ""
	}
	lines := splitLines(content)
	want := oldLines[first]

	// The first line occurs as it is (old_text may start mid-line, so at a line's end): say
	// where old_text stops matching, preferring the occurrence that matches longest.
	bestAt, bestLen := -1, 0
	for i, l := range lines {
		if !strings.HasSuffix(l, want) {
			continue
		}
		n := 1
		for first+n < len(oldLines) && i+n < len(lines) {
			ol, cl := oldLines[first+n], lines[i+n]
			// old_text may end mid-line, so its last line need only start the content's.
			if ol != cl && (first+n < len(oldLines)-1 || !strings.HasPrefix(cl, ol)) {
				break
			}
			n++
		}
		if n > bestLen {
			bestAt, bestLen = i, n
		}
	}
	if bestAt >= 0 {
		j := first + bestLen // old_text's first differing line
		if j >= len(oldLines) {
			// Every line matches, so the difference is within a line's end (e.g. a "\r" or
			// old_text starting mid-line): nothing a line can show.
			return ""
		}
		at := bestAt + bestLen
		if at >= len(lines) {
			return fmt.Sprintf("old_text's line %d matches line %d, but the content ends before old_text's line %d", first+1, bestAt+1, j+1)
		}
		return fmt.Sprintf("old_text's line %d matches line %d, but its line %d differs from line %d: %s", first+1, bestAt+1, j+1, at+1, show(lines[at]))
	}

	trimmed := strings.TrimSpace(want)
	for i, l := range lines {
		if strings.TrimSpace(l) == trimmed {
			return fmt.Sprintf("line %d differs from old_text's line %d only in whitespace: %s", i+1, first+1, show(l))
		}
	}

	target := []rune(trimmed)
	if len(target) > maxCompareRunes {
		target = target[:maxCompareRunes]
	}
	best, bestSim, budget := -1, minSimilarity, distanceBudget
	var row []int
	for i, l := range lines {
		t := strings.TrimSpace(l)
		n := min(utf8.RuneCountInString(t), maxCompareRunes)
		longest := max(n, len(target))
		// The distance is at least the length difference: skip lines that cannot beat the
		// best without computing it.
		if 1-float64(abs(n-len(target)))/float64(longest) < bestSim {
			continue
		}
		if budget -= n * len(target); budget < 0 {
			break
		}
		var d int
		d, row = distance(t, target, row)
		if sim := 1 - float64(d)/float64(longest); sim >= bestSim && (best < 0 || sim > bestSim) {
			best, bestSim = i, sim
		}
	}
	if best < 0 {
		return ""
	}
	return fmt.Sprintf("the closest line to old_text's line %d is line %d: %s", first+1, best+1, show(lines[best]))
}

// splitLines splits s into lines without their "\n" or "\r\n".
func splitLines(s string) []string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// distance is the Levenshtein distance between the first maxCompareRunes runes of a and b,
// reusing row as scratch space.
func distance(a string, b []rune, row []int) (int, []int) {
	if cap(row) < len(b)+1 {
		row = make([]int, len(b)+1)
	}
	row = row[:len(b)+1]
	for j := range row {
		row[j] = j
	}
	n := 0
	for _, ra := range a {
		if n == maxCompareRunes {
			break
		}
		n++
		diag := row[0]
		row[0] = n
		for j, rb := range b {
			cost := 1
			if ra == rb {
				cost = 0
			}
			next := min(row[j+1]+1, row[j]+1, diag+cost)
			diag = row[j+1]
			row[j+1] = next
		}
	}
	return row[len(b)], row
}

// show quotes a line for a hint, so whitespace and control characters are visible.
func show(line string) string {
	if len(line) <= maxShownBytes {
		return fmt.Sprintf("%q", line)
	}
	cut := maxShownBytes
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return fmt.Sprintf("%q…", line[:cut])
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
