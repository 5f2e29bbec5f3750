package embed

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/embed/internal/evalset"
	"github.com/thefold/thefold/pkg/embed/internal/modelfile"
)

// TestTune prints retrieval figures of local@2 over a grid of its run-time weights, on
// the modules training-manifest.txt holds out for tuning ("tune"), which make embed-model
// has downloaded into its private module cache. The constants in trained.go come from
// it. It runs only when THEFOLD_EMBED_TUNE=1:
//
//	THEFOLD_EMBED_TUNE=1 go test -run TestTune -v ./embed/
func TestTune(t *testing.T) {
	if os.Getenv("THEFOLD_EMBED_TUNE") != "1" {
		t.Skip("set THEFOLD_EMBED_TUNE=1 to tune")
	}
	dirs := tuningDirs(t)
	var code, md []evalset.Pair
	for _, d := range dirs {
		code = append(code, evalset.CodeDoc(d, nil)...)
		md = append(md, evalset.Markdown(d)...)
	}
	code = evalset.Sample(code, 3000)
	t.Logf("tuning modules %d: %d code↔description pairs, %d Markdown sections", len(dirs), len(code), len(md))
	if len(code) < 100 || len(md) < 50 {
		t.Fatalf("too few pairs: code %d, Markdown %d", len(code), len(md))
	}
	report := func(name string, e func([]string) [][]float32) {
		c := evalset.Evaluate(e, code, 1000)
		m := evalset.Evaluate(e, md, 1000)
		t.Logf("%-40s code r@1 %.3f r@10 %.3f mrr %.3f | md r@1 %.3f r@10 %.3f mrr %.3f", name, c.R1, c.R10, c.MRR, m.R1, m.R10, m.MRR)
	}
	report("local@1", NewLocal(0).Embed)
	path := cmp.Or(os.Getenv("THEFOLD_EMBED_MODEL"), "local2.model")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mod, err := modelfile.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	sublin := os.Getenv("THEFOLD_EMBED_SUBLIN") != "0"
	oov := subwordWeight
	if v := os.Getenv("THEFOLD_EMBED_OOV"); v != "" {
		oov, _ = strconv.ParseFloat(v, 64)
	}
	grid := func(sifs, shares, lexAs []float64, concat bool) {
		for _, a := range sifs {
			wv := newWordVectors(mod, a)
			for _, share := range shares {
				for _, lexA := range lexAs {
					p := trainedParams{lexShare: share, lexA: lexA, removed: 1, concat: concat, sublin: sublin, oov: oov}
					tr, err := newTrained(wv, DefaultDims, p)
					if err != nil {
						t.Fatal(err)
					}
					report(fmt.Sprintf("sif %.0e lex %.2f lexSIF %.0e concat %v", a, share, lexA, concat), tr.Embed)
				}
			}
		}
	}
	if g := os.Getenv("THEFOLD_EMBED_GRID"); g == "final" {
		grid([]float64{3e-4, 1e-3}, []float64{0.7, 0.75, 0.8}, []float64{0, 3e-2}, false)
		return
	} else if g == "fine" {
		grid([]float64{3e-4, 1e-3, 3e-3}, []float64{0.7, 0.75, 0.8, 0.85}, []float64{0, 1e-2, 3e-2}, false)
		return
	} else if g == "quick" {
		grid([]float64{1e-3}, []float64{0, 0.65, 0.8}, []float64{0, 1e-2}, false)
		return
	}
	grid([]float64{1e-3}, []float64{0.35, 0.5, 0.65, 1}, []float64{0, 1e-3}, true)
	grid([]float64{1e-3}, []float64{0.5, 0.65, 0.8, 0.9, 1}, []float64{0, 1e-4, 1e-3, 1e-2}, false)
}

// tuningDirs are the "tune" modules' directories in embedtrain's private module cache.
func tuningDirs(t *testing.T) []string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	modcache := filepath.Join(cache, "thefold", "embedtrain", "mod")
	f, err := os.Open("training-manifest.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fs := strings.Fields(line)
		if len(fs) != 2 || fs[1] != "tune" {
			continue
		}
		d := filepath.Join(modcache, escapePath(fs[0]))
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("tuning module %s is not downloaded (run make embed-model): %v", fs[0], err)
		}
		dirs = append(dirs, d)
	}
	return dirs
}

// escapePath is the module cache's case encoding: an upper-case letter becomes ! and its
// lower case.
func escapePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
