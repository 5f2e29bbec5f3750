package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
	"github.com/thefold/thefold/services/sandbox/internal/store"
)

// reconciler is a backend that keeps resources beyond a command (the docker backend's
// containers, the kubernetes backend's pods) and can find those of this service's sandboxes
// that are no longer live.
type reconciler interface {
	Reconcile(ctx context.Context, dir string, live func(ctx context.Context, ids []string) (map[string]bool, error)) (int, error)
}

// identity labels a sandbox's backend resources: its id, its owner, and this server's
// workspace root, which tells this server's resources from another's on a shared engine.
func (s *Server) identity(sb *store.Sandbox) backend.Identity {
	return backend.Identity{ID: sb.Id, Owner: sb.OwnerId, Dir: s.cfg.Dir}
}

// reconcile removes the backend resources of this server's workspace root that no live
// sandbox uses: those of sandboxes destroyed, failed or never recorded, and those a killed
// process of the service made (see docker.Reconcile). A sandbox whose container goes that
// way keeps its workspace and gets a new container at its next command.
func (s *Server) reconcile(ctx context.Context) error {
	var problems []error
	for kind, b := range s.backends {
		r, ok := b.(reconciler)
		if !ok {
			continue
		}
		n, err := r.Reconcile(ctx, s.cfg.Dir, s.store.Live)
		if n > 0 {
			s.log.InfoContext(ctx, "sandbox reaper: removed backend resources no live sandbox uses", "backend", backendName(kind), "count", n)
		}
		if err != nil {
			problems = append(problems, fmt.Errorf("reconcile the %s backend: %w", backendName(kind), err))
		}
	}
	return errors.Join(problems...)
}
