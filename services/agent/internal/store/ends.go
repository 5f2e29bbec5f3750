package store

import "sync"

// jobEnds wakes this process's waiters on a job's end (the project runner's on its task's
// job) as soon as a write of this process that ended the job commits. The events hub wakes
// them too, for an end written by another process, but a notification and a read later.
type jobEnds struct {
	mu sync.Mutex
	w  map[string]map[chan struct{}]struct{}
}

// wait returns a channel closed once job id ends by a write of this process, and the
// function that stops waiting.
func (e *jobEnds) wait(id string) (<-chan struct{}, func()) {
	c := make(chan struct{})
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.w == nil {
		e.w = map[string]map[chan struct{}]struct{}{}
	}
	if e.w[id] == nil {
		e.w[id] = map[chan struct{}]struct{}{}
	}
	e.w[id][c] = struct{}{}
	return c, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if ws := e.w[id]; ws != nil {
			delete(ws, c)
			if len(ws) == 0 {
				delete(e.w, id)
			}
		}
	}
}

// ended wakes job id's waiters.
func (e *jobEnds) ended(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for c := range e.w[id] {
		close(c)
	}
	delete(e.w, id)
}
