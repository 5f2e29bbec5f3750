package service

import (
	"context"

	"github.com/thefold/thefold/pkg/wait"
)

// The reaper: sandboxes idle past their TTL are destroyed.

// RunReaper destroys expired sandboxes every interval until ctx ends. A failing round is
// logged and tried again; only the end of ctx stops it.
func (s *Server) RunReaper(ctx context.Context) error {
	round := func(ctx context.Context) {
		if n, err := s.Reap(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "sandbox reaper", "err", err)
		} else if n > 0 {
			s.log.InfoContext(ctx, "sandbox reaper: destroyed expired sandboxes", "count", n)
		}
	}
	round(ctx)
	wait.Every(ctx, s.cfg.ReapInterval, round)
	return nil
}

// Reap destroys the sandboxes whose idle time has run out and returns how many, then
// removes the backend resources no live sandbox uses (reconcile). RunReaper's first round,
// at start, so cleans up after a process of the service that was killed.
func (s *Server) Reap(ctx context.Context) (int, error) {
	n := 0
	for {
		expired, err := s.store.Expired(ctx, 50)
		if err != nil {
			return n, err
		}
		if len(expired) == 0 {
			// Now that the expired ones say destroyed, what no live sandbox uses goes: the
			// containers a killed process of the service left behind.
			return n, s.reconcile(ctx)
		}
		for _, sb := range expired {
			if err := s.destroy(ctx, sb); err != nil {
				return n, err
			}
			n++
		}
	}
}
