package evalset

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Markdown returns the ## and ### sections of at least 40 words of the Markdown files under
// root, as memory's retrieval benchmark cuts them: the query is the heading and the body's
// first sentence, the document the body with the heading's words removed.
func Markdown(root string) []Pair {
	var out []Pair
	seen := map[string]bool{}
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			n := d.Name()
			if p != root && (n == "testdata" || n == "vendor" || n == "node_modules" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.EqualFold(filepath.Ext(p), ".md") || strings.HasPrefix(strings.ToUpper(d.Name()), "CODE_OF_CONDUCT") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		for _, s := range sections(string(data)) {
			doc := removeWords(s.body, s.heading)
			q := s.heading + " " + firstSentence(s.body)
			if seen[doc] || seen[q] {
				continue
			}
			seen[doc], seen[q] = true, true
			out = append(out, Pair{Source: filepath.ToSlash(rel) + " § " + s.heading, Query: q, Doc: doc})
		}
		return nil
	})
	return out
}

var (
	atxHeading = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$`)
	mdLink     = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	asciiWord  = regexp.MustCompile(`[A-Za-z0-9]+`)
	sentence   = regexp.MustCompile(`[.!?](?:\s|$)`)
)

type section struct{ heading, body string }

func sections(doc string) []section {
	var out []section
	var heading string
	var level int
	var body []string
	flush := func() {
		b := strings.TrimSpace(strings.Join(body, "\n"))
		if (level == 2 || level == 3) && heading != "" && len(strings.Fields(b)) >= 40 {
			out = append(out, section{heading, b})
		}
		body = body[:0]
	}
	fence := ""
	sc := bufio.NewScanner(strings.NewReader(doc))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		t := strings.TrimSpace(line)
		switch {
		case fence != "":
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
		case strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"):
			fence = t[:3]
		default:
			if m := atxHeading.FindStringSubmatch(line); m != nil && len(m[1]) <= 3 {
				flush()
				level = len(m[1])
				heading = strings.Join(strings.Fields(strings.NewReplacer("`", "", "*", "").Replace(mdLink.ReplaceAllString(m[2], "$1"))), " ")
				continue
			}
		}
		body = append(body, line)
	}
	flush()
	return out
}

func removeWords(body, heading string) string {
	var words []string
	for _, w := range asciiWord.FindAllString(heading, -1) {
		if len(w) >= 3 && !slices.Contains(words, strings.ToLower(w)) {
			words = append(words, regexp.QuoteMeta(strings.ToLower(w)))
		}
	}
	if len(words) == 0 {
		return body
	}
	return regexp.MustCompile(`(?i)\b(?:`+strings.Join(words, "|")+`)\b`).ReplaceAllString(body, "")
}

func firstSentence(body string) string {
	for para := range strings.SplitSeq(body, "\n\n") {
		t := strings.TrimSpace(para)
		if t == "" || strings.HasPrefix(t, "```") || strings.HasPrefix(t, "|") || strings.HasPrefix(t, "<") || strings.HasPrefix(t, "#") {
			continue
		}
		t = mdLink.ReplaceAllString(strings.Join(strings.Fields(t), " "), "$1")
		if loc := sentence.FindStringIndex(t); loc != nil {
			t = t[:loc[0]+1]
		}
		if r := []rune(t); len(r) > 300 {
			t = string(r[:300])
		}
		return t
	}
	return ""
}
