package fakellm

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// Fault names for Response.Faults.
const (
	FaultJSONRawControl        = "json_raw_control"
	FaultJSONInFence           = "json_in_fence"
	FaultElide                 = "elide"
	FaultSearchWhitespaceDrift = "search_whitespace_drift"
	FaultTruncate              = "truncate"
)

// faults maps each fault to its transformation of a Response's text. They are pure
// functions of the text (truncate also reads TruncateAt), so a script replays identically.
var faults = map[string]func(text string, e *Response) string{
	FaultJSONRawControl:        func(text string, _ *Response) string { return jsonRawControl(text) },
	FaultJSONInFence:           func(text string, _ *Response) string { return jsonInFence(text) },
	FaultElide:                 func(text string, _ *Response) string { return elide(text) },
	FaultSearchWhitespaceDrift: func(text string, _ *Response) string { return searchWhitespaceDrift(text) },
	FaultTruncate:              truncate,
}

// withFaults returns the entry as it is served: its Faults applied to Text in order, and a
// truncated answer's stop reason max_tokens unless the script set one.
func (e Response) withFaults() Response {
	for _, f := range e.Faults {
		e.Text = faults[f](e.Text, &e)
		if f == FaultTruncate && e.StopReason == "" {
			e.StopReason = "max_tokens"
		}
	}
	return e
}

// jsonRawControl writes the string literals of the JSON objects in text the way a model
// that puts code in JSON often does: \t and \n as the raw characters, and \\ before a
// character JSON cannot escape as a lone backslash ("\\d" becomes "\d"). Prose around the
// objects, and anything outside string literals, is left alone.
func jsonRawControl(text string) string {
	var b strings.Builder
	b.Grow(len(text))
	depth := 0 // nesting of {} and [] inside an object; 0 is prose
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case depth == 0:
			if c == '{' {
				depth++
			}
			b.WriteByte(c)
		case c == '{' || c == '[':
			depth++
			b.WriteByte(c)
		case c == '}' || c == ']':
			depth--
			b.WriteByte(c)
		case c == '"':
			i = rawControlString(&b, text, i)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// rawControlString copies the string literal starting at text[open] (the opening quote) to
// b with the fault applied, and returns the index of its closing quote (or the last index
// when it never closes).
func rawControlString(b *strings.Builder, text string, open int) int {
	b.WriteByte('"')
	for i := open + 1; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '"':
			b.WriteByte(c)
			return i
		case c != '\\' || i+1 == len(text):
			b.WriteByte(c)
			continue
		}
		switch next := text[i+1]; {
		case next == 't':
			b.WriteByte('\t')
		case next == 'n':
			b.WriteByte('\n')
		case next == '\\' && i+2 < len(text) && !strings.ContainsRune(`"\/bfnrtu`, rune(text[i+2])):
			b.WriteByte('\\')
		default:
			b.WriteString(text[i : i+2])
		}
		i++
	}
	return len(text) - 1
}

func jsonInFence(text string) string {
	return "Here is the answer:\n\n```json\n" + text + "\n```\n\nLet me know if you need anything else."
}

// elideMinLines is the shortest block elide shortens: below it a model rewrites in full.
const elideMinLines = 9

// hashCommentLanguages are the fence info strings whose comments start with #.
var hashCommentLanguages = map[string]bool{"python": true, "py": true, "sh": true, "yaml": true, "toml": true}

// elide replaces the middle third of the first fenced block (or of the whole text) by the
// placeholder line models write instead of code they did not want to repeat.
func elide(text string) string {
	lines := strings.Split(text, "\n")
	last := len(lines) // lines[:last] are the text's lines
	if strings.HasSuffix(text, "\n") {
		last-- // the empty string after the final newline is not a line
	}
	start, end := 0, last // the block's lines: lines[start:end]
	comment := "//"
	for i, l := range lines[:last] {
		trimmed := strings.TrimLeft(l, " \t")
		if !strings.HasPrefix(trimmed, "```") {
			continue
		}
		info := strings.Fields(strings.TrimPrefix(trimmed, "```"))
		if len(info) > 0 && hashCommentLanguages[strings.ToLower(info[0])] {
			comment = "#"
		}
		start, end = i+1, last // an unclosed fence runs to the end
		for j := i + 1; j < last; j++ {
			if strings.TrimSpace(lines[j]) == "```" {
				end = j
				break
			}
		}
		break
	}
	n := end - start
	if n < elideMinLines {
		return text
	}
	from, to := start+n/3, start+2*n/3
	first := lines[from]
	indent := first[:len(first)-len(strings.TrimLeft(first, " \t"))]
	out := append([]string(nil), lines[:from]...)
	out = append(out, indent+comment+" ... existing code ...")
	out = append(out, lines[to:]...)
	return strings.Join(out, "\n")
}

// Aider's SEARCH/REPLACE markers, each a whole line.
const (
	searchMarker  = "<<<<<<< SEARCH"
	dividerMarker = "======="
	replaceMarker = ">>>>>>> REPLACE"
)

// searchWhitespaceDrift re-indents the SEARCH half of every SEARCH/REPLACE block the way a
// model that does not copy whitespace exactly does: tabs in a line's indentation become
// four spaces each, and the line gets two trailing spaces. REPLACE halves are unchanged.
func searchWhitespaceDrift(text string) string {
	lines := strings.Split(text, "\n")
	inSearch := false
	for i, l := range lines {
		switch {
		case l == searchMarker:
			inSearch = true
		case l == dividerMarker || l == replaceMarker:
			inSearch = false
		case inSearch:
			rest := strings.TrimLeft(l, " \t")
			indent := strings.ReplaceAll(l[:len(l)-len(rest)], "\t", "    ")
			lines[i] = indent + rest + "  "
		}
	}
	return strings.Join(lines, "\n")
}

// truncate cuts the text at TruncateAt bytes, or at half its length when that is 0, moved
// back to the start of a UTF-8 character so the answer stays valid text.
func truncate(text string, e *Response) string {
	n := len(text) / 2
	if e.TruncateAt > 0 {
		n = min(e.TruncateAt, len(text))
	}
	for n > 0 && n < len(text) && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n]
}

// faultNames lists the known faults, sorted, for error messages.
func faultNames() []string {
	names := make([]string, 0, len(faults))
	for name := range faults {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
