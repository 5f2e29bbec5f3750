package backend

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Paths of the warm cache inside a bwrap sandbox.
const (
	bwrapSharedGoCache = "/opt/thefold/gocache"
	bwrapGoCacheProg   = "/opt/thefold/gocacheprog"
)

// warmFormat versions the layout of a warm cache directory: change it with the layout.
const warmFormat = "1"

// warmCache is the bwrap backend's shared Go build cache: the standard library built,
// vetted and tested once per toolchain (GoCacheSeed) in a sandbox of the backend itself, kept
// in a directory of the machine, and mounted read-only into every sandbox, whose go command
// reads it through the GOCACHEPROG helper over its own private layer. Nothing a sandbox runs
// can write it.
type warmCache struct {
	done chan struct{}
	// Set before done is closed: the cache and the helper, or why there is none.
	shared, prog string
	err          error
}

// ready waits for the cache (or ctx) and returns its directory and helper; "" when there
// is none (disabled, or making it failed: commands then build cold).
func (w *warmCache) ready(ctx context.Context) (shared, prog string, err error) {
	if w == nil {
		return "", "", nil
	}
	select {
	case <-w.done:
		if w.err != nil {
			return "", "", nil
		}
		return w.shared, w.prog, nil
	case <-ctx.Done():
		return "", "", fmt.Errorf("wait for the sandbox's shared Go build cache: %w", ctx.Err())
	}
}

// WarmGoCache waits until b's shared Go build cache is ready, making it first when this
// machine has none for b's toolchain (the standard library built, vetted and tested once:
// a minute or two of compiling), and returns its directory. It returns "" and no error for
// a backend made without WithWarmGoCache, and the reason when the cache could not be made
// (sandboxes then build cold). `sandbox warm-cache` calls it, so that `make setup` pays for
// the cache once, before any test or service waits for it.
func (b *Bwrap) WarmGoCache(ctx context.Context) (string, error) {
	if b.warm == nil {
		return "", nil
	}
	select {
	case <-b.warm.done:
		if b.warm.err != nil {
			return "", b.warm.err
		}
		return filepath.Dir(b.warm.shared), nil
	case <-ctx.Done():
		return "", fmt.Errorf("wait for the sandbox's shared Go build cache: %w", ctx.Err())
	}
}

// startWarm finds the warm cache for b's toolchain under base, or starts making it in the
// background. A machine-wide lock lets one process make it while others wait for it.
func startWarm(b *Bwrap, base string) *warmCache {
	w := &warmCache{done: make(chan struct{})}
	key, seed, cmds, err := warmKey(b.cfg.goRoot)
	if err != nil {
		w.err = err
		close(w.done)
		return w
	}
	dir := filepath.Join(base, key)
	w.shared, w.prog = filepath.Join(dir, "cache"), filepath.Join(dir, "gocacheprog")
	if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
		close(w.done)
		return w
	}
	// The seed runs in a backend like b whose cache is writable; made here, before b is
	// handed out, so the goroutine never reads b itself.
	seeder := &Bwrap{cfg: b.cfg, st: b.st, bwrap: b.bwrap}
	go func() {
		defer close(w.done)
		start := time.Now()
		w.err = makeWarm(seeder, base, dir, seed, cmds)
		if w.err != nil {
			seeder.cfg.logger.Warn("sandbox: no shared Go build cache; bwrap sandboxes build the standard library themselves", "dir", dir, "err", w.err)
			return
		}
		seeder.cfg.logger.Info("sandbox: shared Go build cache ready", "dir", dir, "took", time.Since(start).Round(time.Millisecond))
	}()
	return w
}

// readyWarm returns the warm cache of the toolchain at goRoot under base, when one was made
// there (by a bwrap backend): for the local backend, which uses it but never makes it.
func readyWarm(goRoot, base string) (shared, prog string) {
	key, _, _, err := warmKey(goRoot)
	if err != nil {
		return "", ""
	}
	dir := filepath.Join(base, key)
	if _, err := os.Stat(filepath.Join(dir, "ready")); err != nil {
		return "", ""
	}
	return filepath.Join(dir, "cache"), filepath.Join(dir, "gocacheprog")
}

// warmKey names the cache of the toolchain at goRoot: its version, the helper's source and
// the seed.
func warmKey(goRoot string) (key string, seed map[string]string, cmds [][]string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seed, cmds, err = GoCacheSeed(ctx, goRoot)
	if err != nil {
		return "", nil, nil, err
	}
	version, _ := os.ReadFile(filepath.Join(goRoot, "VERSION"))
	h := sha256.New()
	fmt.Fprintf(h, "format %s\ngoroot %s\ngo %s\ngocacheprog %s\n", warmFormat, goRoot, version, GoCacheProgVersion())
	for _, name := range slices.Sorted(maps.Keys(seed)) {
		fmt.Fprintf(h, "seed %s %x\n", name, sha256.Sum256([]byte(seed[name])))
	}
	for _, c := range cmds {
		fmt.Fprintf(h, "cmd %q\n", c)
	}
	return "go-" + hex.EncodeToString(h.Sum(nil))[:24], seed, cmds, nil
}

// makeWarm makes dir: the helper, then the seed run through seeder with a writable cache
// (the only time it is writable), then a rename into place, so a half-made cache is never
// used.
func makeWarm(seeder *Bwrap, base, dir string, seed map[string]string, cmds [][]string) error {
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	unlock, err := lockFile(filepath.Join(base, filepath.Base(dir)+".lock"))
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
		return nil // another process made it while this one waited
	}
	// A process that exited while making it (a test binary done with its tests) left its
	// half-made directory; with the lock held, none is in use.
	if stale, err := filepath.Glob(filepath.Join(base, filepath.Base(dir)+".tmp-*")); err == nil {
		for _, d := range stale {
			_ = os.RemoveAll(d)
		}
	}
	tmp, err := os.MkdirTemp(base, filepath.Base(dir)+".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := BuildGoCacheProg(ctx, seeder.cfg.goRoot, filepath.Join(tmp, "gocacheprog")); err != nil {
		return err
	}
	cache, ws := filepath.Join(tmp, "cache"), filepath.Join(tmp, "seed")
	for _, d := range []string{cache, ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for name, body := range seed {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	seeder.cfg.goCache = cache
	for _, argv := range cmds {
		res, err := seeder.Run(ctx, ws, Spec{Argv: argv, Timeout: 15 * time.Minute},
			Limits{MemoryBytes: 4 << 30, CPUSeconds: 3600, Pids: 1024})
		if err != nil {
			return fmt.Errorf("seed %s: %w", strings.Join(argv, " "), err)
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("seed %s: exit %d: %s", strings.Join(argv, " "), res.ExitCode, tail(res.Stderr, 400))
		}
	}
	if err := seeder.Release(ws); err != nil {
		return err
	}
	if err := os.RemoveAll(ws); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "ready"), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// lockFile holds an exclusive lock on path until the returned function is called.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, errors.Join(errors.New("lock "+path), err)
	}
	return func() { f.Close() }, nil
}
