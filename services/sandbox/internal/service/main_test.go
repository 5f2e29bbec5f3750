package service_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
	"github.com/thefold/thefold/services/sandbox/internal/egress"
)

// TestMain lets this test binary serve as the bwrap sandbox's egress forwarder, as the
// service's own binary does, and waits for the machine's warm Go build cache.
func TestMain(m *testing.M) {
	egress.MaybeRunForwarder()
	waitWarmGoCache()
	os.Exit(m.Run())
}

// waitWarmGoCache waits until the machine's warm Go build cache of bwrap sandboxes
// (backend.WithWarmGoCache under DefaultWarmDir, which start and startPolicy use) is made:
// a minute or so, once per machine and toolchain, during which every bwrap command waits
// for it — on a new machine that would come out of the first tests' own deadlines. Where
// bwrap does not work, or the cache cannot be made, the tests find that out themselves.
func waitWarmGoCache() {
	state, err := os.MkdirTemp("", "sandbox-service-test-warm-")
	if err != nil {
		return
	}
	defer os.RemoveAll(state)
	b, err := backend.NewBwrap(backend.WithStateDir(state), backend.WithWarmGoCache(backend.DefaultWarmDir()))
	if err != nil {
		return
	}
	defer b.Close()
	ws := filepath.Join(state, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, _ = b.Run(ctx, ws, backend.Spec{Argv: []string{"true"}}, backend.Limits{})
}
