package main

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/thefold/thefold/pkg/embed"
)

// corpus is the training text as word ids, paragraphs separated by -1.
type corpus struct {
	ids        map[string]int32
	names      []string
	counts     []int64
	seq        []int32
	seen       map[[16]byte]bool
	paragraphs int
	dupes      int
	// pairs are (doc comment word, code word) pairs of documented functions, flattened:
	// they teach the vectors which code goes with which prose, which a window over the
	// text sees only where a comment meets its signature.
	pairs     []int32
	functions int
}

func (c *corpus) tokens() int { return len(c.seq) - c.paragraphs }

var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// addTree reads a module's Markdown and Go files in path order (WalkDir's), skipping test
// data, vendored and generated code.
func (c *corpus) addTree(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if p != root && (n == "testdata" || n == "vendor" || n == "node_modules" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		ext := strings.ToLower(filepath.Ext(p))
		if ext != ".md" && ext != ".go" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !utf8.Valid(b) || (ext == ".go" && generated.Match(b[:min(len(b), 2000)])) {
			return nil
		}
		c.addText(b)
		if ext == ".go" && !strings.HasSuffix(p, "_test.go") {
			c.addFunctions(b)
		}
		return nil
	})
}

// addText adds a file's paragraphs (blocks between blank lines), each once: licence
// headers and the docs of every release would otherwise count many times over.
// addFunctions pairs every documented function's doc comment words with the words of its
// signature and body (each distinct word once, at most maxSide of each).
func (c *corpus) addFunctions(src []byte) {
	const maxSide = 40
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.ParseComments)
	if err != nil {
		return
	}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Doc == nil || fn.Body == nil {
			continue
		}
		code := src[fset.Position(fn.Pos()).Offset:fset.Position(fn.End()).Offset]
		sum := sha256.Sum256(code)
		key := [16]byte(sum[:16])
		key[0] ^= 0xff // not a paragraph's key
		if c.seen[key] {
			continue
		}
		c.seen[key] = true
		doc, body := c.distinct(fn.Doc.Text(), maxSide), c.distinct(string(code), maxSide)
		if len(doc) == 0 || len(body) == 0 {
			continue
		}
		c.functions++
		for _, a := range doc {
			for _, b := range body {
				if a != b {
					c.pairs = append(c.pairs, a, b)
				}
			}
		}
	}
}

// distinct returns the ids of text's first n distinct useful words.
func (c *corpus) distinct(text string, n int) []int32 {
	var out []int32
	embed.Words(text, func(w string) {
		if len(out) >= n || !embed.Learnable(w) {
			return
		}
		id, ok := c.ids[w]
		if !ok || slices.Contains(out, id) {
			return
		}
		out = append(out, id)
	})
	return out
}

func (c *corpus) addText(b []byte) {
	if c.ids == nil {
		c.ids, c.seen = map[string]int32{}, map[[16]byte]bool{}
	}
	for para := range bytes.SplitSeq(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), []byte("\n\n")) {
		para = bytes.TrimSpace(para)
		if len(para) == 0 {
			continue
		}
		sum := sha256.Sum256(para)
		key := [16]byte(sum[:16])
		if c.seen[key] {
			c.dupes++
			continue
		}
		c.seen[key] = true
		n := 0
		embed.Words(string(para), func(w string) {
			if !embed.Learnable(w) {
				return
			}
			id, ok := c.ids[w]
			if !ok {
				id = int32(len(c.names))
				c.ids[w] = id
				c.names = append(c.names, w)
				c.counts = append(c.counts, 0)
			}
			c.counts[id]++
			c.seq = append(c.seq, id)
			n++
		})
		if n > 0 {
			c.seq = append(c.seq, -1)
			c.paragraphs++
		}
	}
}

type vocabulary struct {
	words    []string
	counts   []int64
	total    int64 // all kept words' occurrences, in vocabulary or not
	coverage float64
	pairs    []int32 // corpus.pairs within the vocabulary
}

// vocabulary keeps the n most frequent words seen at least minCount times (ties by the
// word, so the order is the same every run) and returns the corpus renumbered to them,
// -1 for a paragraph break and -2 for a word outside the vocabulary (it still takes a
// place in the window).
func (c *corpus) vocabulary(n, minCount int) (vocabulary, []int32) {
	order := make([]int32, len(c.names))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if x := cmp.Compare(c.counts[b], c.counts[a]); x != 0 {
			return x
		}
		return strings.Compare(c.names[a], c.names[b])
	})
	var v vocabulary
	remap := make([]int32, len(c.names))
	for i := range remap {
		remap[i] = -2
	}
	var covered int64
	for _, id := range order {
		v.total += c.counts[id]
		if len(v.words) < n && c.counts[id] >= int64(minCount) {
			remap[id] = int32(len(v.words))
			v.words = append(v.words, c.names[id])
			v.counts = append(v.counts, c.counts[id])
			covered += c.counts[id]
		}
	}
	v.coverage = float64(covered) / float64(v.total)
	seq := make([]int32, len(c.seq))
	for i, id := range c.seq {
		if id < 0 {
			seq[i] = -1
		} else {
			seq[i] = remap[id]
		}
	}
	for i := 0; i < len(c.pairs); i += 2 {
		if a, b := remap[c.pairs[i]], remap[c.pairs[i+1]]; a >= 0 && b >= 0 {
			v.pairs = append(v.pairs, a, b)
		}
	}
	return v, seq
}
