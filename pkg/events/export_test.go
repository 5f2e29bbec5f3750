package events

import "time"

// SetPollInterval replaces h's fallback poll interval; call it before the first Watch.
// A test sets it very long to prove that notifications alone wake watchers.
func (h *Hub) SetPollInterval(d time.Duration) { h.poll = d }
