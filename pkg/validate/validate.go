// Package validate holds the request checks every TheFold service needs, written once: ids,
// repository names, text limits, enums, request ids, page sizes and tokens, and the
// NUL/UTF-8 walk over every string of a request (Strings, used by the server's interceptor).
// Each check returns nil or an InvalidArgument status naming the field (errs.Invalid), so a
// handler returns its error as is.
package validate

import (
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/thefold/thefold/pkg/errs"
)

// Limits shared by every service's contract (see proto/thefold/type/v1/conventions.proto).
const (
	// MaxRepo bounds an "owner/name" repository (GitHub's own limits are 39 + 100).
	MaxRepo = 200
	// MaxRequestID bounds a caller's request_id.
	MaxRequestID = 128
	// MaxURL bounds a URL field.
	MaxURL = 2048
)

// UUID returns id in canonical (lower-case, hyphenated) form. An empty id is accepted unless
// required. Only the 36-character form is accepted: ids are compared as strings elsewhere.
func UUID(field, id string, required bool) (string, error) {
	if id == "" {
		if required {
			return "", errs.Invalid(field, "required")
		}
		return "", nil
	}
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		return "", errs.Invalid(field, "not a UUID: %q", Truncate(id, 64))
	}
	return u.String(), nil
}

// repoPattern is "owner/name" as forges allow them: letters, digits, '-', '_' and '.'.
var repoPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)

// Repo checks an "owner/name" repository; an empty one is accepted unless required.
func Repo(field, repo string, required bool) error {
	switch {
	case repo == "" && required:
		return errs.Invalid(field, "required")
	case repo == "":
		return nil
	case len(repo) > MaxRepo:
		return errs.Invalid(field, "at most %d characters", MaxRepo)
	case !repoPattern.MatchString(repo):
		return errs.Invalid(field, "want \"owner/name\", got %q", Truncate(repo, 64))
	}
	owner, name, _ := strings.Cut(repo, "/")
	// "./.." and friends match the pattern but name nothing.
	if strings.Trim(owner, ".") == "" || strings.Trim(name, ".") == "" {
		return errs.Invalid(field, "want \"owner/name\", got %q", repo)
	}
	return nil
}

// MaxLen checks that v has at most max characters (runes, as users count them).
func MaxLen(field, v string, max int) error {
	if utf8.RuneCountInString(v) > max {
		return errs.Invalid(field, "at most %d characters", max)
	}
	return nil
}

// RequiredText trims v and checks it is neither empty nor longer than max characters.
func RequiredText(field, v string, max int) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", errs.Invalid(field, "required")
	}
	if err := MaxLen(field, v, max); err != nil {
		return "", err
	}
	return v, nil
}

// URL accepts "" or an absolute http(s) URL of at most MaxURL characters.
func URL(field, v string) error {
	if v == "" {
		return nil
	}
	if err := MaxLen(field, v, MaxURL); err != nil {
		return err
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errs.Invalid(field, "want an absolute http or https URL")
	}
	return nil
}

// Labels trims labels, drops empty ones and duplicates (first-seen order kept) and bounds
// each label's length and their number.
func Labels(field string, labels []string, maxLen, maxCount int) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, l := range labels {
		l = strings.TrimSpace(l)
		if l == "" || seen[l] {
			continue
		}
		if utf8.RuneCountInString(l) > maxLen {
			return nil, errs.Invalid(field, "label %q: at most %d characters", Truncate(l, maxLen), maxLen)
		}
		seen[l] = true
		out = append(out, l)
	}
	if len(out) > maxCount {
		return nil, errs.Invalid(field, "at most %d labels", maxCount)
	}
	return out, nil
}

// Enum checks that v is a value its enum declares; the zero (…_UNSPECIFIED) value only when
// allowUnspecified.
func Enum(field string, v protoreflect.Enum, allowUnspecified bool) error {
	n := v.Number()
	if v.Descriptor().Values().ByNumber(n) == nil || (n == 0 && !allowUnspecified) {
		return errs.Invalid(field, "not a %s: %d", v.Descriptor().Name(), n)
	}
	return nil
}

// RequestID accepts "" (no idempotency) or a key of printable ASCII without spaces of at
// most MaxRequestID bytes (a UUID is a good choice).
func RequestID(field, id string) error {
	if len(id) > MaxRequestID {
		return errs.Invalid(field, "at most %d bytes", MaxRequestID)
	}
	if !PrintableASCII(id, false) {
		return errs.Invalid(field, "printable ASCII without spaces only")
	}
	return nil
}

// PrintableASCII reports whether s holds only printable ASCII (0x21–0x7e, and the space
// when spaces is set): what gRPC metadata and HTTP headers carry safely.
func PrintableASCII(s string, spaces bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 0x21 && !(spaces && c == ' ')) || c > 0x7e {
			return false
		}
	}
	return true
}

// PageSize maps 0 to def and refuses a negative size or one above max.
func PageSize(n int32, def, max int) (int, error) {
	switch {
	case n < 0 || int(n) > max:
		return 0, errs.Invalid("page_size", "want 0 to %d, got %d", max, n)
	case n == 0:
		return def, nil
	}
	return int(n), nil
}

// Truncate shortens s to n characters (with an ellipsis) for an error message.
func Truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
