// Command embedtrain trains the word vectors of the local@2 embedder (pkg/embed) from the
// Go modules a manifest names: PPMI co-occurrence over their Markdown and Go source, then
// a randomized truncated SVD. The same manifest gives the same model file, byte for byte.
//
// The modules are downloaded into a private module cache, so the module cache that the
// retrieval benchmarks read is not changed; modules marked "tune" in the manifest are
// held out of training (pkg/embed's tuning test reads them), and none may be a dependency
// of this repository nor come from GOROOT, which the benchmarks keep for an independent
// check.
//
//	go run ./embed/internal/embedtrain -manifest embed/training-manifest.txt -out embed/local2.model
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/thefold/thefold/pkg/embed/internal/modelfile"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, log); err != nil {
		log.Error("embedtrain failed", "err", err)
		os.Exit(1)
	}
}

type config struct {
	manifest, out, modcache string
	vocab, dims, window     int
	minCount                int
	smoothing, eigenPow     float64
	pairWeight              float64
	log                     *slog.Logger
}

// logger is c's logger, or one that discards (tests).
func (c config) logger() *slog.Logger {
	if c.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.log
}

func run(ctx context.Context, log *slog.Logger) error {
	home, _ := os.UserCacheDir()
	c := config{log: log}
	flag.StringVar(&c.manifest, "manifest", "embed/training-manifest.txt", "training manifest: one module@version and its role (train or tune) a line")
	flag.StringVar(&c.out, "out", "embed/local2.model", "model file to write")
	flag.StringVar(&c.modcache, "modcache", filepath.Join(home, "thefold", "embedtrain", "mod"), "private module cache the training modules are downloaded into")
	flag.IntVar(&c.vocab, "vocab", 30000, "vocabulary size (the most frequent words)")
	flag.IntVar(&c.dims, "dims", 192, "word vector size")
	flag.IntVar(&c.window, "window", 5, "co-occurrence window, in words each side")
	flag.IntVar(&c.minCount, "min-count", 5, "fewest occurrences for a word to have a vector")
	flag.Float64Var(&c.smoothing, "smoothing", 0.75, "context distribution smoothing exponent")
	flag.Float64Var(&c.eigenPow, "eigen-power", -0.5, "singular values are raised to this power in the word vectors (below 0 evens out the dimensions; tuned on the held-out modules)")
	flag.Float64Var(&c.pairWeight, "pair-weight", 0.1, "co-occurrence weight of each (doc comment word, code word) pair of a documented function")
	flag.Parse()

	raw, err := os.ReadFile(c.manifest)
	if err != nil {
		return err
	}
	mods, err := parseManifest(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", c.manifest, err)
	}
	sum := sha256.Sum256(raw)
	t0 := time.Now()

	var corpus corpus
	for _, m := range mods {
		dir, err := download(ctx, c.modcache, m.path)
		if err != nil {
			return err
		}
		if m.role != "train" {
			c.logger().Info("held out for tuning", "module", m.path, "dir", dir)
			continue
		}
		before := corpus.tokens()
		if err := corpus.addTree(dir); err != nil {
			return err
		}
		c.logger().Info("read", "module", m.path, "words", corpus.tokens()-before)
	}
	c.logger().Info("corpus", "words", corpus.tokens(), "functions", corpus.functions, "pairs", len(corpus.pairs)/2, "distinct", len(corpus.ids), "paragraphs", corpus.paragraphs, "duplicates skipped", corpus.dupes, "took", time.Since(t0).Round(time.Millisecond))

	vocab, seq := corpus.vocabulary(c.vocab, c.minCount)
	c.logger().Info("vocabulary", "words", len(vocab.words), "covering", fmt.Sprintf("%.3f", vocab.coverage))
	m := train(vocab, seq, c)
	m.Manifest = hex.EncodeToString(sum[:])

	var buf bytes.Buffer
	if err := modelfile.Encode(&buf, m); err != nil {
		return err
	}
	if err := os.WriteFile(c.out, buf.Bytes(), 0o644); err != nil {
		return err
	}
	c.logger().Info("wrote model", "file", c.out, "bytes", buf.Len(), "words", len(m.Words), "dims", m.Dims, "took", time.Since(t0).Round(time.Second))
	return nil
}

type module struct{ path, role string }

// parseManifest reads "module@version role" lines; # starts a comment.
func parseManifest(b []byte) ([]module, error) {
	var out []module
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 || !strings.Contains(f[0], "@") || (f[1] != "train" && f[1] != "tune") {
			return nil, fmt.Errorf("line %d: want \"module@version train|tune\", got %q", n, sc.Text())
		}
		out = append(out, module{f[0], f[1]})
	}
	if len(out) == 0 {
		return nil, errors.New("names no module")
	}
	return out, nil
}

// download fetches a module into modcache and returns its directory. GOTOOLCHAIN=local:
// a module asking for a newer Go is still downloaded (its source is all we read), but
// the go command reports an error, which is ignored when the directory is there.
func download(ctx context.Context, modcache, mod string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOMODCACHE="+modcache, "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil {
		return "", fmt.Errorf("go mod download %s: %v %v", mod, err, jerr)
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", mod, info.Error)
	}
	return info.Dir, nil
}
