package testenv

import "testing"

// CPUBound marks a test whose time is computation on one goroutine (ranking a real
// repository, say): under the race detector it costs five to ten times the CPU and finds
// nothing, and the unit phase is CPU-bound, so every other package waits for it. Under -race
// it skips; `make test-unit` runs it again without -race (the Makefile's CPU_BOUND_TESTS,
// which TestCPUBoundTestsRunWithoutRace keeps in step with the calls of CPUBound).
func CPUBound(tb testing.TB) {
	tb.Helper()
	if Race {
		tb.Skip("CPU-bound: runs without -race in make test-unit's second pass (CPU_BOUND_TESTS)")
	}
}
