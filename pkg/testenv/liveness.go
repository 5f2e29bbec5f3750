package testenv

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// Liveness is how long an end-to-end test waits for what must happen eventually (a job
// reaching a status, a reply, containers turning healthy) when d is enough on a quiet
// machine: d times Slack. The bounds only turn a hang into a failure; they are not
// performance checks (the benchmarks measure time).
func Liveness(d time.Duration) time.Duration { return time.Duration(float64(d) * Slack()) }

// Slack is THEFOLD_E2E_SLACK, by default 2, and 4 under CI (CI=true). The same suite has
// run 4.5 times slower on one CI machine than on another of the same size (a
// build-and-retry scenario: 81 s against 374 s), and a docker engine storing images with
// fuse-overlayfs under the e2e shards' load took 4 minutes to report ten containers healthy
// that take 21 s on their own. A value that is not a number ≥ 1 panics, naming the variable:
// a mistyped setting must not quietly become another bound.
func Slack() float64 {
	if s := os.Getenv("THEFOLD_E2E_SLACK"); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 1 {
			panic(fmt.Sprintf("THEFOLD_E2E_SLACK=%q: want a number ≥ 1", s))
		}
		return f
	}
	if InCI() {
		return 4
	}
	return 2
}
