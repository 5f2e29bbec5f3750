// Package glob matches '/'-separated paths against globs with "**": "**/*.sql" matches an
// .sql file in any directory (the root included), "migrations/**" everything under
// migrations, ".git/**" git's internal files. Within a segment, path.Match's syntax applies
// (*, ?, [a-z], \ escapes).
package glob

import (
	"fmt"
	"path"
	"strings"
)

// Validate reports a malformed glob.
func Validate(pattern string) error {
	if pattern == "" {
		return fmt.Errorf("empty glob")
	}
	if strings.HasPrefix(pattern, "/") {
		return fmt.Errorf("glob %q: paths are relative to the repository root, without a leading '/'", pattern)
	}
	for _, seg := range strings.Split(pattern, "/") {
		if seg == "**" {
			continue
		}
		if strings.Contains(seg, "**") {
			return fmt.Errorf("glob %q: ** must be a whole path segment", pattern)
		}
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Errorf("glob %q: %w", pattern, err)
		}
	}
	return nil
}

// Match reports whether name matches pattern; a malformed pattern matches nothing.
func Match(pattern, name string) bool {
	return match(strings.Split(pattern, "/"), strings.Split(strings.TrimPrefix(name, "./"), "/"))
}

func match(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			for i := 0; i <= len(segs); i++ {
				if match(rest, segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], segs[0]); err != nil || !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}
