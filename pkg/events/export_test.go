package events

import "time"

// SetPollInterval replaces h's fallback poll interval, also while Run runs (from its next
// wait on). A test sets it very long to prove that notifications alone wake watchers.
func (h *Hub) SetPollInterval(d time.Duration) { h.poll.Store(int64(d)) }

// LiveWatchers returns the number of watchers in h's fan-out (caught up and following it).
func (h *Hub) LiveWatchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}
