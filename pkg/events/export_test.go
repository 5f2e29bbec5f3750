package events

import "time"

// SetPollInterval replaces the fallback poll interval and returns a function restoring it.
// Tests that use it must not run in parallel.
func SetPollInterval(d time.Duration) (restore func()) {
	old := pollInterval
	pollInterval = d
	return func() { pollInterval = old }
}
