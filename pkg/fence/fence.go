// Package fence makes untrusted text safe to put in a model's prompt: Sanitize cleans and
// caps it, Fence wraps it as data (<data kind="…">…</data>) that it cannot close early. The ai
// service fences everything it did not write; the agent's chat fences tool results and
// attachments the same way.
package fence

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxAttrBytes caps an attribute value of a fence.
const maxAttrBytes = 300

// Sanitize makes untrusted text safe to put in a prompt: NUL and the other C0 control
// characters go (tab and newline stay, and a carriage return before a newline, so CRLF files
// are shown as they are and edits against them still match), invalid UTF-8 becomes U+FFFD,
// and text longer than max bytes (max > 0) is cut at a character boundary with a visible
// "[… truncated N bytes]" marker, N counting the sanitised bytes left out.
func Sanitize(s string, max int) string {
	if clean(s) {
		return Truncate(s, max)
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r == '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				b.WriteByte('\r')
			}
		case r < 0x20 && r != '\n' && r != '\t':
			// dropped
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return Truncate(b.String(), max)
}

// clean reports whether Sanitize would leave s as it is (before truncation), the common
// case, so it costs no copy.
func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\n' && c != '\t' && (c != '\r' || i+1 == len(s) || s[i+1] != '\n') {
			return false
		}
	}
	return utf8.ValidString(s)
}

// Truncate cuts s to at most max bytes (max > 0) at a character boundary, with a visible
// "[… truncated N bytes]" marker.
func Truncate(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[… truncated %d bytes]", len(s)-cut)
}

// TruncateMiddle caps s at about max bytes by cutting from its middle, keeping two thirds
// of the room for its start and one third for its end.
func TruncateMiddle(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	head, tail := max*2/3, len(s)-max/3
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + fmt.Sprintf("\n[… %d bytes cut here …]\n", tail-head) + s[tail:]
}

// Fence wraps untrusted content as data for a prompt:
//
//	<data kind="file" path="internal/x.go">
//	…content…
//	</data>
//
// The content is sanitised and capped at max bytes; any "</data" in it (any letter case)
// becomes "<\/data", so the content cannot close the fence early and pose as instructions.
// Attribute names and values are sanitised too: no quotes, angle brackets or line breaks.
func Fence(kind string, attrs [][2]string, content string, max int) string {
	var b strings.Builder
	b.Grow(len(content) + 64)
	b.WriteString(`<data kind="`)
	b.WriteString(Attr(kind))
	b.WriteByte('"')
	for _, a := range attrs {
		name := attrName(a[0])
		if name == "" {
			continue
		}
		b.WriteByte(' ')
		b.WriteString(name)
		b.WriteString(`="`)
		b.WriteString(Attr(a[1]))
		b.WriteByte('"')
	}
	b.WriteString(">\n")
	body := neutralize(Sanitize(content, max))
	b.WriteString(body)
	if body != "" && !strings.HasSuffix(body, "\n") {
		b.WriteByte('\n')
	}
	b.WriteString("</data>")
	return b.String()
}

// neutralize turns every "</data" (case-insensitively) into "<\/data".
func neutralize(s string) string {
	if !strings.Contains(s, "</") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for {
		i := strings.Index(s, "</")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		if len(s) >= i+6 && strings.EqualFold(s[i+2:i+6], "data") {
			b.WriteString(`<\/`)
		} else {
			b.WriteString("</")
		}
		s = s[i+2:]
	}
}

// Attr keeps an attribute value on one line and inside its quotes.
func Attr(s string) string {
	s = Sanitize(s, 0)
	s = strings.Map(func(r rune) rune {
		switch r {
		case '"', '\'', '<', '>', '`':
			return -1
		case '\n', '\r', '\t':
			return ' '
		}
		return r
	}, s)
	if len(s) > maxAttrBytes {
		cut := maxAttrBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// attrName keeps letters, digits, '-' and '_'.
func attrName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return -1
	}, s)
}
