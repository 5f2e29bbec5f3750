// Package stacktest lets the tests that build the real stack (cmd/thefold's, tests/e2e) share
// its binaries instead of each linking all ten again: linking them takes about 20 s of CPU,
// and each such test builds into a data directory of its own, where nothing is up to date.
package stacktest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/thefold/thefold/pkg/stack"
)

// Prebuild puts binaries of src's services and launcher in s.BinDir() that s.Build then
// finds up to date, so that it links nothing.
//
// They are built (stack.Build, the same go build) into a directory shared by every test
// process of this user, then hard-linked (or copied) into s.BinDir(). Nothing is trusted
// without the go command's say: go build relinks into the shared directory whatever is
// stale there (other sources, another toolchain), as it would in s.BinDir(), and s.Build
// still runs — it checks each binary's build ID against its sources, as go install does,
// and relinks any that differ. A lock serializes test processes that build at once; a
// replaced binary is renamed over its path, so a test's links keep the files they had.
func Prebuild(ctx context.Context, s *stack.Stack, src string) error {
	root := sharedRoot()
	if err := os.MkdirAll(root, 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close() // releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("stacktest: lock %s: %w", lock.Name(), err)
	}
	shared := &stack.Stack{DataDir: root}
	if err := shared.Build(ctx, src); err != nil {
		return err
	}
	if err := os.MkdirAll(s.BinDir(), 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(shared.BinDir())
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		from, to := filepath.Join(shared.BinDir(), e.Name()), filepath.Join(s.BinDir(), e.Name())
		_ = os.Remove(to)
		if os.Link(from, to) == nil {
			continue
		}
		if err := copyFile(from, to); err != nil {
			return err
		}
	}
	return nil
}

// sharedRoot is the directory shared by this user's test processes (a test of this package
// sets another).
var sharedRoot = func() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("thefold-test-stack-%d", os.Getuid()))
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
