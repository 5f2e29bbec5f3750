package forge

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// blockedLine matches the lines of an issue body that name its blockers: "Blocked by #3",
// "depends on #4, #5", "- blocked by: #6" (case-insensitive, at the start of a line after
// an optional list marker).
var blockedLine = regexp.MustCompile(`(?im)^[ \t]*(?:[-*][ \t]+)?(?:blocked[ \t]+by|depends[ \t]+on)[ \t]*:?[ \t]*((?:#\d+[ \t,]*(?:and[ \t]+)?)+)[ \t]*$`)

var issueRef = regexp.MustCompile(`#(\d+)`)

// ParseBlockedBy returns the issue numbers named by a body's "Blocked by #N" / "Depends on
// #N" lines, sorted and without duplicates.
func ParseBlockedBy(body string) []int32 {
	var out []int32
	for _, m := range blockedLine.FindAllStringSubmatch(body, -1) {
		for _, r := range issueRef.FindAllStringSubmatch(m[1], -1) {
			if n, err := strconv.ParseInt(r[1], 10, 32); err == nil && n > 0 {
				out = append(out, int32(n))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// WithBlockedBy rewrites body so that its blocked-by lines name exactly nums: the existing
// lines are removed and one "Blocked by #a, #b" line is appended (none when nums is empty).
func WithBlockedBy(body string, nums []int32) string {
	body = strings.TrimRight(blockedLine.ReplaceAllString(body, ""), "\n")
	body = strings.TrimRight(collapseBlank(body), "\n")
	nums = slices.Clone(nums)
	slices.Sort(nums)
	nums = slices.Compact(nums)
	if len(nums) == 0 {
		return body
	}
	refs := make([]string, len(nums))
	for i, n := range nums {
		refs[i] = "#" + strconv.Itoa(int(n))
	}
	line := "Blocked by " + strings.Join(refs, ", ")
	if body == "" {
		return line
	}
	return body + "\n\n" + line
}

// collapseBlank turns runs of three or more newlines (left by removed lines) into two.
func collapseBlank(s string) string {
	for strings.Contains(s, "\n\n\n") {
		s = strings.ReplaceAll(s, "\n\n\n", "\n\n")
	}
	return s
}
