package validate

import (
	"fmt"
	"strings"

	"github.com/thefold/thefold/pkg/errs"
)

// Limits of a repository-relative path (those of common file systems).
const (
	MaxPathBytes = 3072
	MaxNameBytes = 255
)

// RelPath checks that p is a clean, relative, '/'-separated path inside a tree (a
// repository or a workspace): not empty, no NUL, no backslash, not absolute, no "", "." or
// ".." component, within MaxPathBytes and MaxNameBytes per component. The error wraps
// errs.ErrInvalid and quotes the path; callers add the field.
func RelPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("path is empty: %w", errs.ErrInvalid)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("path %q: contains a NUL byte: %w", p, errs.ErrInvalid)
	case strings.Contains(p, `\`):
		return fmt.Errorf("path %q: contains a backslash; use '/' as the separator: %w", p, errs.ErrInvalid)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q: is absolute; paths are relative to the root: %w", p, errs.ErrInvalid)
	case len(p) > MaxPathBytes:
		return fmt.Errorf("path %q…: is %d bytes, over %d: %w", p[:64], len(p), MaxPathBytes, errs.ErrInvalid)
	}
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "..":
			return fmt.Errorf("path %q: escapes the root (\"..\"): %w", p, errs.ErrInvalid)
		case "", ".":
			return fmt.Errorf("path %q: is not clean (empty or \".\" component, or a trailing '/'): %w", p, errs.ErrInvalid)
		}
		if len(c) > MaxNameBytes {
			return fmt.Errorf("path %q: a component is %d bytes, over %d: %w", p, len(c), MaxNameBytes, errs.ErrInvalid)
		}
	}
	return nil
}

// Path is RelPath as an InvalidArgument status naming field.
func Path(field, p string) error {
	if err := RelPath(p); err != nil {
		return errs.Invalid(field, "%s", strings.TrimSuffix(err.Error(), ": "+errs.ErrInvalid.Error()))
	}
	return nil
}
