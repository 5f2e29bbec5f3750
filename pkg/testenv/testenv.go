// Package testenv decides what a test does when the machine lacks something it needs (a
// module in the module cache, git, a browser): skip on a developer's machine, fail in CI.
// A test that skips in CI tests nothing while it looks green, so CI must either provide what
// it needs or say that it did not.
package testenv

import (
	"os"
	"strconv"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true, as CI services set it).
func InCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// SkipOrFail skips tb with the reason, or fails it when InCI.
func SkipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if InCI() {
		tb.Fatalf("CI must provide what this test needs: "+format, args...)
	}
	tb.Skipf(format, args...)
}
