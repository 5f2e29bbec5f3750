package prompts

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// maxBraceCandidates bounds the '{' positions ExtractJSON tries, so a reply full of braces
// costs linear time rather than quadratic.
const maxBraceCandidates = 64

// ExtractJSON finds the JSON object in a model reply: the whole reply, else the first
// markdown code fence (```json or ```) holding one, else the first '{' whose matching '}'
// (counted outside JSON strings) closes a valid object. Models are told to answer bare
// JSON; this tolerates the prose and fences they add anyway.
//
// When no candidate is valid JSON, the candidates are tried again with what models get
// wrong inside strings repaired (see lenientJSON): raw tabs and newlines, and backslashes
// that start no JSON escape (a regexp's "\d"). When that fails too, the error gives the
// first candidate's syntax error with its line and column, for the repair round.
func ExtractJSON(text string) ([]byte, error) {
	trimmed := strings.TrimSpace(text)
	if trimmed == "" {
		return nil, errors.New("the reply is empty; expected a JSON object")
	}
	cands, unclosed := candidates(text, trimmed)
	for _, c := range cands {
		if json.Valid([]byte(c)) {
			return []byte(c), nil
		}
	}
	for _, c := range cands {
		if fixed, changed := lenientJSON(c); changed && json.Valid(fixed) {
			return fixed, nil
		}
	}
	if len(cands) > 0 {
		return nil, syntaxError(cands[0])
	}
	if unclosed {
		return nil, errors.New("the reply has no complete JSON object (it may have been cut off)")
	}
	return nil, errors.New("the reply has no JSON object")
}

// candidates are the texts that may be the reply's JSON object, most likely first: the
// trimmed reply when it starts with '{', the bodies of code fences that do, then each '{'
// up to its matching '}'. unclosed reports a '{' that no '}' closes.
func candidates(text, trimmed string) (out []string, unclosed bool) {
	seen := map[string]bool{}
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	if strings.HasPrefix(trimmed, "{") {
		add(trimmed)
	}
	for _, body := range fenceBodies(text) {
		if s := strings.TrimSpace(body); strings.HasPrefix(s, "{") {
			add(s)
		}
	}
	tried := 0
	for i := 0; i < len(text) && tried < maxBraceCandidates; i++ {
		if text[i] != '{' {
			continue
		}
		tried++
		end := matchBrace(text, i)
		if end < 0 {
			unclosed = true
			continue
		}
		add(text[i : end+1])
	}
	return out, unclosed
}

// fenceBodies returns the bodies of the reply's code fences, in order. A fence closes at a
// line starting with ```; an unclosed last fence runs to the end. (A JSON string cannot
// hold a raw newline, so ``` inside a valid JSON string never ends the fence.)
func fenceBodies(text string) []string {
	var out []string
	rest := text
	for {
		i := strings.Index(rest, "```")
		if i < 0 {
			return out
		}
		if i > 0 && rest[i-1] != '\n' {
			rest = rest[i+3:]
			continue
		}
		body := rest[i+3:]
		nl := strings.IndexByte(body, '\n')
		if nl < 0 {
			return out
		}
		body = body[nl+1:]
		end := strings.Index(body, "\n```")
		if end < 0 {
			return append(out, body)
		}
		out = append(out, body[:end])
		rest = body[end+4:]
	}
}

// lenientJSON returns s with the mistakes models make inside JSON strings repaired: raw
// control characters (a tab, a newline) escaped, and a backslash before a character no
// JSON escape starts with doubled, so it stays the backslash the model meant. changed is
// false when there was nothing to repair.
func lenientJSON(s string) (out []byte, changed bool) {
	b := make([]byte, 0, len(s)+16)
	inString := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			b = append(b, c)
			continue
		}
		switch {
		case c == '"':
			inString = false
			b = append(b, c)
		case c == '\\':
			if i+1 < len(s) && strings.IndexByte(`"\/bfnrtu`, s[i+1]) >= 0 {
				b = append(b, c, s[i+1])
				i++
				continue
			}
			b = append(b, '\\', '\\')
			changed = true
		case c < 0x20:
			b = append(b, fmt.Sprintf(`\u%04x`, c)...)
			changed = true
		default:
			b = append(b, c)
		}
	}
	return b, changed
}

// syntaxError describes why s is not valid JSON, with the line and column where it breaks
// and what a model usually did wrong there.
func syntaxError(s string) error {
	var v any
	err := json.Unmarshal([]byte(s), &v)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		if err == nil {
			return errors.New("the reply's JSON is not an object")
		}
		return fmt.Errorf("the reply's JSON is invalid: %v", err)
	}
	// Offset counts the bytes read, the offending one included.
	off := min(max(int(se.Offset)-1, 0), len(s))
	line := strings.Count(s[:off], "\n") + 1
	col := off - strings.LastIndexByte(s[:off], '\n')
	lineText := s[strings.LastIndexByte(s[:off], '\n')+1:]
	if nl := strings.IndexByte(lineText, '\n'); nl >= 0 {
		lineText = lineText[:nl]
	}
	if len(lineText) > 160 {
		lineText = lineText[:160] + "…"
	}
	msg := fmt.Sprintf("the reply's JSON is invalid at line %d, column %d (%v): %q", line, col, se, lineText)
	if strings.Contains(se.Error(), "end of JSON input") {
		msg += "; the object is not closed (the reply may have been cut off)"
	} else if strings.Contains(se.Error(), "in string") {
		msg += `; inside a JSON string, a tab, newline, quote or backslash must be escaped (\t, \n, \", \\)`
	}
	return errors.New(msg)
}

// matchBrace returns the index of the '}' closing the '{' at start, skipping braces inside
// JSON strings, or -1.
func matchBrace(s string, start int) int {
	depth, inString, escaped := 0, false, false
	for i := start; i < len(s); i++ {
		c := s[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}
