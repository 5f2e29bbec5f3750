package prompts

import (
	"encoding/json"
	"errors"
	"strings"
)

// maxBraceCandidates bounds the '{' positions ExtractJSON tries, so a reply full of braces
// costs linear time rather than quadratic.
const maxBraceCandidates = 64

// ExtractJSON finds the JSON object in a model reply: the whole reply, else the first
// markdown code fence (```json or ```) holding one, else the first '{' whose matching '}'
// (counted outside JSON strings) closes a valid object. Models are told to answer bare
// JSON; this tolerates the prose and fences they add anyway.
func ExtractJSON(text string) ([]byte, error) {
	trimmed := strings.TrimSpace(text)
	if trimmed == "" {
		return nil, errors.New("the reply is empty; expected a JSON object")
	}
	if isObject(trimmed) {
		return []byte(trimmed), nil
	}
	if body, ok := fenced(text); ok {
		return []byte(body), nil
	}
	tried, unclosed := 0, false
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
		if cand := text[i : end+1]; json.Valid([]byte(cand)) {
			return []byte(cand), nil
		}
	}
	if unclosed {
		return nil, errors.New("the reply has no complete JSON object (it may have been cut off)")
	}
	return nil, errors.New("the reply has no JSON object")
}

func isObject(s string) bool {
	return strings.HasPrefix(s, "{") && json.Valid([]byte(s))
}

// fenced returns the first code fence's body that is a JSON object. A fence closes at a
// line starting with ```: JSON strings cannot hold a raw newline, so ``` inside a JSON
// string value never ends the fence.
func fenced(text string) (string, bool) {
	rest := text
	for {
		i := strings.Index(rest, "```")
		if i < 0 {
			return "", false
		}
		if i > 0 && rest[i-1] != '\n' {
			rest = rest[i+3:]
			continue
		}
		body := rest[i+3:]
		nl := strings.IndexByte(body, '\n')
		if nl < 0 {
			return "", false
		}
		body = body[nl+1:]
		end := strings.Index(body, "\n```")
		inner := body
		if end >= 0 {
			inner = body[:end]
		}
		if s := strings.TrimSpace(inner); isObject(s) {
			return s, true
		}
		if end < 0 {
			return "", false
		}
		rest = body[end+4:]
	}
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
