package prompts

import (
	"fmt"
	"github.com/thefold/thefold/pkg/fence"
	"path"
	"regexp"
	"strings"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// Code comes back outside JSON: a whole file in one fenced code block, or edits as
// SEARCH/REPLACE blocks (the forms Aider found models write best), with any other field (a
// fix's explanation) in a small JSON object beside it. Models asked to put code inside JSON
// strings leave tabs and backslashes raw; in a code block nothing needs escaping.

// codeAnswer is what a GenerateFile or FixFile reply holds.
type codeAnswer struct {
	// file is the whole file from the reply's code block; hasFile says there was one.
	file    string
	hasFile bool
	// edits are the SEARCH/REPLACE blocks, in order.
	edits []*typev1.Edit
	// rest is the reply outside the code: prose, or the JSON object of the other fields.
	rest string
}

var (
	searchLine  = regexp.MustCompile(`^\s*<{5,9}\s*SEARCH\s*$`)
	dividerLine = regexp.MustCompile(`^\s*={5,9}\s*$`)
	replaceLine = regexp.MustCompile(`^\s*>{5,9}\s*REPLACE\s*$`)
	// fenceLine opens or closes a code block: three or more backticks (or tildes), then an
	// info string on an opening line.
	fenceLine = regexp.MustCompile("^(`{3,}|~{3,})(.*)$")
)

// readCodeAnswer reads the code of a reply for the file at filePath: SEARCH/REPLACE blocks
// if it has any, else the whole file in a code block. A reply with neither has no code
// (hasFile false, no edits) and is all rest. Code blocks named by one of others (files the
// answer may change too) are not taken for filePath's.
func readCodeAnswer(raw, filePath string, others []string) (codeAnswer, error) {
	raw = strings.ReplaceAll(raw, "\r\n", "\n")
	lines := strings.Split(raw, "\n")
	for _, l := range lines {
		if searchLine.MatchString(l) {
			return readEditBlocks(lines)
		}
	}
	return readFileBlock(lines, filePath, others)
}

// namedBlocks returns the whole files of the reply's code blocks named by one of paths
// (path → content).
func namedBlocks(raw string, paths []string) map[string]string {
	lines := strings.Split(strings.ReplaceAll(raw, "\r\n", "\n"), "\n")
	out := map[string]string{}
	for _, b := range fenceBlocks(lines) {
		if b.end < 0 {
			continue
		}
		for _, p := range paths {
			if _, seen := out[p]; !seen && infoNames(b.info, p, path.Base(p)) {
				out[p] = joinLines(lines[b.open+1 : b.end])
				break
			}
		}
	}
	return out
}

// readEditBlocks reads SEARCH/REPLACE blocks; fence lines around them and prose between
// them are the rest. Each part is whole lines, so old and new text end with a newline
// (an empty replacement is empty: the lines go).
func readEditBlocks(lines []string) (codeAnswer, error) {
	var a codeAnswer
	var rest []string
	const (
		outside = iota
		inSearch
		inReplace
	)
	state, opened := outside, 0
	var search, replace []string
	for i, l := range lines {
		switch state {
		case outside:
			if searchLine.MatchString(l) {
				state, opened, search, replace = inSearch, i+1, nil, nil
				continue
			}
			if !fenceLine.MatchString(strings.TrimSpace(l)) {
				rest = append(rest, l)
			}
		case inSearch:
			if dividerLine.MatchString(l) {
				state = inReplace
				continue
			}
			if replaceLine.MatchString(l) || searchLine.MatchString(l) {
				return a, fmt.Errorf("edit block %d (opened at line %d of the reply) has no ======= line between its SEARCH and REPLACE parts", len(a.edits)+1, opened)
			}
			search = append(search, l)
		case inReplace:
			if replaceLine.MatchString(l) {
				if len(search) == 0 || strings.TrimSpace(strings.Join(search, "")) == "" {
					return a, fmt.Errorf("edit block %d (opened at line %d of the reply) has an empty SEARCH part; copy the lines to change (or a neighbouring line, for an insertion) from the file", len(a.edits)+1, opened)
				}
				a.edits = append(a.edits, &typev1.Edit{OldText: joinLines(search), NewText: joinLines(replace)})
				state = outside
				continue
			}
			if searchLine.MatchString(l) {
				return a, fmt.Errorf("edit block %d (opened at line %d of the reply) is not closed with >>>>>>> REPLACE before the next SEARCH", len(a.edits)+1, opened)
			}
			replace = append(replace, l)
		}
	}
	if state != outside {
		return a, fmt.Errorf("edit block %d (opened at line %d of the reply) is not closed with >>>>>>> REPLACE (the reply may have been cut off)", len(a.edits)+1, opened)
	}
	a.rest = strings.TrimSpace(strings.Join(rest, "\n"))
	return a, nil
}

func joinLines(ls []string) string {
	if len(ls) == 0 {
		return ""
	}
	return strings.Join(ls, "\n") + "\n"
}

// fenceBlock is one code block of a reply: the lines of its opening and closing fences
// (end -1: not closed) and the opening's info string.
type fenceBlock struct {
	open, end int
	info      string
}

// fenceBlocks pairs the reply's fence lines into blocks, in order: a fence line outside a
// block opens one, and inside one a bare fence of the same character, at least as long,
// closes it.
func fenceBlocks(lines []string) []fenceBlock {
	var out []fenceBlock
	var fence string
	for i, l := range lines {
		m := fenceLine.FindStringSubmatch(strings.TrimRight(l, " \t"))
		if m == nil {
			continue
		}
		if fence == "" {
			fence = m[1]
			out = append(out, fenceBlock{open: i, end: -1, info: strings.TrimSpace(m[2])})
			continue
		}
		if strings.TrimSpace(m[2]) == "" && m[1][0] == fence[0] && len(m[1]) >= len(fence) {
			out[len(out)-1].end = i
			fence = ""
		}
	}
	return out
}

// readFileBlock reads the whole file from the reply's code block: the block whose info
// string names the file, else the first that is not a JSON object (the answer's other
// fields). A Markdown file may hold fences of its own, so its block runs to the last fence
// line of the reply.
func readFileBlock(lines []string, filePath string, others []string) (codeAnswer, error) {
	blocks := fenceBlocks(lines)
	pick := -1
	base := path.Base(filePath)
	for k, b := range blocks {
		if filePath != "" && infoNames(b.info, filePath, base) {
			pick = k
			break
		}
	}
	other := func(b fenceBlock) bool {
		for _, o := range others {
			if infoNames(b.info, o, path.Base(o)) {
				return true
			}
		}
		return false
	}
	if pick < 0 {
		for k, b := range blocks {
			if !jsonBlock(lines, b) && !other(b) {
				pick = k
				break
			}
		}
	}
	if pick < 0 {
		return codeAnswer{rest: strings.TrimSpace(strings.Join(lines, "\n"))}, nil
	}
	b := blocks[pick]
	if markdown(filePath) {
		for i := len(lines) - 1; i > b.open; i-- {
			if m := fenceLine.FindStringSubmatch(strings.TrimRight(lines[i], " \t")); m != nil && strings.TrimSpace(m[2]) == "" {
				b.end = i
				break
			}
		}
	}
	if b.end < 0 {
		return codeAnswer{}, fmt.Errorf("the file's code block (opened at line %d of the reply) is not closed (the reply may have been cut off)", b.open+1)
	}
	body := lines[b.open+1 : b.end]
	rest := append(append([]string{}, lines[:b.open]...), lines[b.end+1:]...)
	return codeAnswer{file: joinLines(body), hasFile: true, rest: strings.TrimSpace(strings.Join(rest, "\n"))}, nil
}

func markdown(p string) bool {
	switch strings.ToLower(path.Ext(p)) {
	case ".md", ".markdown", ".mdx":
		return true
	}
	return false
}

// infoNames reports whether a fence's info string ("go main.go", "main.go", "path=x/y.go")
// names the file.
func infoNames(info, filePath, base string) bool {
	for _, w := range strings.Fields(info) {
		w = strings.TrimPrefix(strings.TrimPrefix(w, "path="), "file=")
		w = strings.Trim(w, "`'\"")
		if w == filePath || w == base || strings.HasSuffix(w, "/"+filePath) {
			return true
		}
	}
	return false
}

// jsonBlock reports a code block that holds a JSON object (an answer's other fields)
// rather than a file.
func jsonBlock(lines []string, b fenceBlock) bool {
	if b.info != "" && !strings.EqualFold(b.info, "json") {
		return false
	}
	end := b.end
	if end < 0 {
		end = len(lines)
	}
	return isObject(strings.TrimSpace(strings.Join(lines[b.open+1:end], "\n")))
}

// isObject reports whether s is one JSON object (repairs as ExtractJSON makes allowed).
func isObject(s string) bool {
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return false
	}
	b, err := ExtractJSON(s)
	return err == nil && len(b) >= len(s)-1
}

// elisionLine matches a line that stands for code left out: a comment (or bare text) with
// an ellipsis and words such as "existing code", "rest of the file", "unchanged".
var elisionLine = regexp.MustCompile(`(?i)^\s*(//|#|/\*|<!--|--|;|\*)?\s*(\.\.\.|…)?\s*\(?\s*(` +
	`(the\s+)?(rest|remainder)\s+of\s+(the\s+)?(file|code|class|function|methods?|implementation)|` +
	`(existing|previous|other|remaining|original|unchanged|same)\s+(code|methods?|functions?|imports?|implementation|content|fields?|tests?|cases?)|` +
	`(code|everything)\s+(above|below)|unchanged|as\s+before|same\s+as\s+(before|above))` +
	`[^\n]*?(\.\.\.|…)`)

// elision returns the first line of content that stands for left-out code and is not in
// existing (a file may have such a comment of its own), 1-based, or 0.
func elision(content, existing string) (int, string) {
	for i, l := range strings.Split(content, "\n") {
		if !strings.Contains(l, "...") && !strings.Contains(l, "…") {
			continue
		}
		if elisionLine.MatchString(l) && !strings.Contains(existing, strings.TrimSpace(l)) {
			return i + 1, strings.TrimSpace(l)
		}
	}
	return 0, ""
}

// Lazy rewrites: a MODIFY whose whole file shrinks below shrinkRatio of a file of at least
// shrinkMinLines lines is taken for code left out by mistake; removing that much is asked
// for as edits that delete, which say so.
const (
	shrinkMinLines = 40
	shrinkRatio    = 0.5
)

// lazyWhole checks a whole-file answer for code left out: an elision comment, or (for a
// MODIFY) a file that shrank sharply.
func lazyWhole(content, existing string, modify bool) error {
	if n, l := elision(content, existing); n > 0 {
		return fmt.Errorf("the file leaves code out (line %d: %q); write every line of the file — nothing is filled in for you", n, fence.Truncate(l, 120))
	}
	if modify {
		before, after := lineCount(existing), lineCount(content)
		if before >= shrinkMinLines && float64(after) < shrinkRatio*float64(before) {
			return fmt.Errorf("the file went from %d lines to %d; if removing that much is intended, answer with SEARCH/REPLACE edits that delete it, otherwise write every line of the file", before, after)
		}
	}
	return nil
}

// lazyEdits checks edits for a replacement that leaves code out.
func lazyEdits(edits []*typev1.Edit, existing string) error {
	for i, e := range edits {
		if n, l := elision(e.GetNewText(), existing+e.GetOldText()); n > 0 {
			return fmt.Errorf("edit %d's replacement leaves code out (its line %d: %q); a replacement holds exactly the lines that take the SEARCH part's place", i+1, n, fence.Truncate(l, 120))
		}
	}
	return nil
}
