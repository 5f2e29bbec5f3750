package relevance

import (
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// File is one text file of a repository at one commit.
type File struct {
	Path    string // relative, '/'-separated
	Content string
}

// Index is the searchable form of one commit's files. It is immutable after Build, and
// Rank may be called on it from many goroutines at once.
type Index struct {
	docs   []doc
	byPath map[string]int32

	dict     map[string]uint32 // term → id
	postings [][]posting       // term id → documents whose content has the term, by doc
	defDocs  [][]uint32        // term id → documents defining a symbol with the term, by doc
	pathDF   []int32           // term id → documents whose path has the term
	avgLen   float64           // mean document length in terms

	imports    [][]int32 // doc → docs it imports
	importedBy [][]int32 // doc → docs importing it
}

type posting struct {
	doc uint32
	tf  uint32
}

type doc struct {
	path      string
	content   string
	lang      lang
	length    int32 // terms in the content (BM25 document length)
	test      bool
	generated bool
	vendored  bool
	symbols   []symbol
	fileTerms []uint32 // terms of the file name without extension
	dirTerms  []uint32 // terms of the directories

	// Computed on first need, once even under concurrent Rank calls.
	tokensOnce  sync.Once
	tokens      int // tokens of content
	outlineOnce sync.Once
	outline     *outline
}

// symbol is a name the file defines.
type symbol struct {
	name  string   // as displayed: "NewServer", "Server.Serve"
	terms []uint32 // terms of the defined name
}

// Len returns the number of files in the index.
func (ix *Index) Len() int { return len(ix.docs) }

// fileData is what a worker extracts from one file, with term ids local to the worker.
type fileData struct {
	worker  int
	termIDs []uint32
	tfs     []uint32
	imports []importRef
}

// Build indexes files. Files with the same path after the first are ignored. The work is
// spread over GOMAXPROCS goroutines; each keeps its own term dictionary, merged at the end,
// so the hot loop takes no lock.
func Build(files []File) *Index {
	ix := &Index{byPath: make(map[string]int32, len(files))}
	keep := make([]int, 0, len(files))
	for i, f := range files {
		if _, dup := ix.byPath[f.Path]; dup {
			continue
		}
		ix.byPath[f.Path] = int32(len(keep))
		keep = append(keep, i)
	}
	ix.docs = make([]doc, len(keep))
	data := make([]fileData, len(keep))

	nw := min(runtime.GOMAXPROCS(0), max(1, len(keep)/64))
	workers := make([]*worker, nw)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wk := &worker{id: w, dict: map[string]uint32{}}
		workers[w] = wk
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(keep) {
					return
				}
				f := files[keep[i]]
				d := &ix.docs[i]
				d.path, d.content = f.Path, f.Content
				data[i] = wk.file(d)
			}
		}()
	}
	wg.Wait()
	ix.merge(workers, data)
	ix.resolveImports(data)
	return ix
}

// worker tokenises files with a private dictionary.
type worker struct {
	id      int
	sp      splitter
	dict    map[string]uint32
	vocab   []string
	counts  []uint32
	touched []uint32
}

func (w *worker) term(t []byte) uint32 {
	if id, ok := w.dict[string(t)]; ok {
		return id
	}
	s := string(t)
	id := uint32(len(w.vocab))
	w.dict[s] = id
	w.vocab = append(w.vocab, s)
	w.counts = append(w.counts, 0)
	return id
}

// terms returns the distinct local term ids of s.
func (w *worker) terms(s string) []uint32 {
	var out []uint32
	w.sp.each(s, func(t []byte, _ string) {
		id := w.term(t)
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	})
	return out
}

func (w *worker) file(d *doc) fileData {
	fd := fileData{worker: w.id}
	d.lang = langOf(d.path)
	d.test = isTestPath(d.path)
	d.vendored = isVendoredPath(d.path)
	d.generated = isGenerated(d.lang, d.content)

	var length int32
	w.sp.each(d.content, func(t []byte, _ string) {
		id := w.term(t)
		if w.counts[id] == 0 {
			w.touched = append(w.touched, id)
		}
		w.counts[id]++
		length++
	})
	d.length = length
	fd.termIDs = make([]uint32, len(w.touched))
	fd.tfs = make([]uint32, len(w.touched))
	for k, id := range w.touched {
		fd.termIDs[k], fd.tfs[k] = id, w.counts[id]
		w.counts[id] = 0
	}
	w.touched = w.touched[:0]

	dir, base := path.Split(d.path)
	base = strings.TrimSuffix(base, path.Ext(base))
	d.fileTerms = w.terms(base)
	d.dirTerms = w.terms(dir)

	switch d.lang {
	case langGo:
		syms, imps, ok := goDecls(d.path, d.content)
		if ok {
			for _, s := range syms {
				d.symbols = append(d.symbols, symbol{name: s.display, terms: w.terms(s.name)})
			}
			for _, p := range imps {
				fd.imports = append(fd.imports, importRef{spec: p})
			}
			break
		}
		w.defSymbols(d)
	case langJS:
		w.defSymbols(d)
		fd.imports = jsImports(d.content)
	case langPython:
		w.defSymbols(d)
		fd.imports = pyImports(d.content)
	case langRust, langJVM:
		w.defSymbols(d)
	}
	return fd
}

func (w *worker) defSymbols(d *doc) {
	eachDefLine(d.lang, d.content, func(_ int, _ string, name string) {
		if name != "" {
			d.symbols = append(d.symbols, symbol{name: name, terms: w.terms(name)})
		}
	})
}

// merge maps the workers' term ids to global ids and builds the postings.
func (ix *Index) merge(workers []*worker, data []fileData) {
	ix.dict = map[string]uint32{}
	var vocab []string
	remap := make([][]uint32, len(workers))
	for w, wk := range workers {
		remap[w] = make([]uint32, len(wk.vocab))
		for local, t := range wk.vocab {
			id, ok := ix.dict[t]
			if !ok {
				id = uint32(len(vocab))
				ix.dict[t] = id
				vocab = append(vocab, t)
			}
			remap[w][local] = id
		}
		wk.dict, wk.vocab = nil, nil
	}
	nt := len(vocab)
	df := make([]int32, nt)
	var total int64
	for i := range ix.docs {
		d, fd := &ix.docs[i], &data[i]
		rm := remap[fd.worker]
		for k, id := range fd.termIDs {
			fd.termIDs[k] = rm[id]
			df[rm[id]]++
		}
		for s := range d.symbols {
			for k, id := range d.symbols[s].terms {
				d.symbols[s].terms[k] = rm[id]
			}
		}
		for k, id := range d.fileTerms {
			d.fileTerms[k] = rm[id]
		}
		for k, id := range d.dirTerms {
			d.dirTerms[k] = rm[id]
		}
		total += int64(d.length)
	}
	if len(ix.docs) > 0 {
		ix.avgLen = float64(total) / float64(len(ix.docs))
	}

	ix.postings = make([][]posting, nt)
	for id, n := range df {
		if n > 0 {
			ix.postings[id] = make([]posting, 0, n)
		}
	}
	ix.defDocs = make([][]uint32, nt)
	ix.pathDF = make([]int32, nt)
	// mark[id] == stamp: id already counted for the current document (a generated file may
	// define thousands of symbols, so no linear "seen" scan).
	mark := make([]uint32, nt)
	stamp := uint32(0)
	for i := range ix.docs {
		d, fd := &ix.docs[i], &data[i]
		for k, id := range fd.termIDs {
			ix.postings[id] = append(ix.postings[id], posting{doc: uint32(i), tf: fd.tfs[k]})
		}
		fd.termIDs, fd.tfs = nil, nil
		stamp++
		for _, s := range d.symbols {
			for _, id := range s.terms {
				if mark[id] != stamp {
					mark[id] = stamp
					ix.defDocs[id] = append(ix.defDocs[id], uint32(i))
				}
			}
		}
		stamp++
		for _, ids := range [][]uint32{d.fileTerms, d.dirTerms} {
			for _, id := range ids {
				if mark[id] != stamp {
					mark[id] = stamp
					ix.pathDF[id]++
				}
			}
		}
	}
}
