package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/services/sandbox/internal/backend"
)

// Reconcile removes, with their volumes, the sandbox containers of the service whose
// workspaces are under dir that no live sandbox of this backend uses, and says how many it
// removed. live answers which of the sandbox ids found in the labels are live (creating or
// ready); it is asked once per call. Removed are the containers
//
//   - without a sandbox id or whose sandbox is not live (destroyed, failed, unknown), unless
//     this backend made it for a workspace without an identity (a Run without Prepare);
//   - of a live sandbox whose workspace this backend does not know: a process of the
//     service that was killed made it, and a command of that process may still run in it.
//     It is removed rather than adopted: the host workspace is the sandbox's source of
//     truth and is copied into a new container at the next command (only /tmp and its
//     build caches are lost), while adopting would keep the dead process's command
//     running and need the container's image, limits and OOM count read back from the
//     engine. The identity in its labels labels that new container;
//   - of a known workspace that is not the workspace's container (a failed start left it).
//
// A workspace busy with a command, or with making its container, is looked at in a later
// call. Containers of another dir are never touched: several services may share one
// engine (tests run many at once), each reconciling only its own. Expiry is the caller's:
// destroy the expired sandboxes first (their rows then say destroyed), which waits for a
// command running in them.
//
// Reconcile also makes dir the dir label of the containers made later for workspaces
// without an identity, so that a later process of the same service finds them.
func (d *Docker) Reconcile(ctx context.Context, dir string, live func(ctx context.Context, ids []string) (map[string]bool, error)) (int, error) {
	dir = backend.CleanDir(dir)
	if dir == "" {
		return 0, fmt.Errorf("reconcile: no workspace dir: %w", errs.ErrInvalid)
	}
	d.mu.Lock()
	closed := d.closed
	d.dir = dir
	d.mu.Unlock()
	if closed {
		return 0, fmt.Errorf("docker backend is closed: %w", errs.ErrFailedPrecondition)
	}
	list, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", labelSandbox+"=1", labelDir+"="+dir)})
	if err != nil {
		return 0, fmt.Errorf("list the sandbox containers: %w: %w", err, errs.ErrUnavailable)
	}
	var ids []string
	for _, c := range list.Items {
		if id := sandboxOf(c); id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	keep := map[string]bool{}
	if len(ids) > 0 {
		if keep, err = live(ctx, ids); err != nil {
			return 0, fmt.Errorf("reconcile: which sandboxes are live: %w", err)
		}
	}
	removed := 0
	var problems []error
	for _, c := range list.Items {
		// The engine filtered by these labels already; a label value holding a '=' must
		// still match exactly.
		if c.Labels[labelSandbox] != "1" || c.Labels[labelDir] != dir {
			continue
		}
		ok, err := d.reconcileOne(ctx, c, keep)
		if err != nil {
			problems = append(problems, err)
		}
		if ok {
			removed++
		}
	}
	d.startPool()
	return removed, errors.Join(problems...)
}

// reconcileOne removes c when nothing live uses it (see Reconcile) and reports whether it
// did.
func (d *Docker) reconcileOne(ctx context.Context, c container.Summary, keep map[string]bool) (bool, error) {
	if d.pooled(c) {
		return false, nil // waiting in the pool, or handed out to a sandbox of this process
	}
	id, ws := sandboxOf(c), c.Labels[labelWorkspace]
	dead := id != "" && !keep[id]
	var b *box
	if ws != "" {
		d.mu.Lock()
		b = d.boxes[ws]
		d.mu.Unlock()
	}
	if b == nil {
		switch {
		case id == "":
			return d.removeContainer(ctx, c, "it names no sandbox and no workspace of this process")
		case dead:
			return d.removeContainer(ctx, c, "its sandbox is not live")
		}
		d.learn(ws, c.Labels)
		return d.removeContainer(ctx, c, "an earlier process of the service made it")
	}
	// A held box is running a command or making its container (which need not be in the
	// list yet): its containers wait for a later round.
	if !b.mu.TryLock() {
		return false, nil
	}
	defer b.mu.Unlock()
	why := "its sandbox is not live"
	switch {
	case b.id != c.ID:
		why = "it is not its workspace's container"
		if !dead && id != "" && b.who == (Identity{}) {
			b.who = identityOf(c.Labels)
		}
	case !dead:
		return false, nil
	}
	ok, err := d.removeContainer(ctx, c, why)
	if ok && b.id == c.ID {
		b.id = ""
	}
	if ok && dead {
		d.mu.Lock()
		if d.boxes[ws] == b {
			delete(d.boxes, ws)
		}
		d.mu.Unlock()
	}
	return ok, err
}

// learn keeps the identity of a live sandbox's container from an earlier process for the
// container its next command makes.
func (d *Docker) learn(ws string, labels map[string]string) {
	if ws == "" {
		return
	}
	b, err := d.box(ws)
	if err != nil || !b.mu.TryLock() {
		return
	}
	if b.who == (Identity{}) {
		b.who = identityOf(labels)
	}
	b.mu.Unlock()
}

func identityOf(labels map[string]string) Identity {
	return Identity{ID: labels[labelID], Owner: labels[labelOwner], Dir: labels[labelDir]}
}

// removeContainer force-removes c and its volumes; one already gone is not an error, but
// not counted either.
func (d *Docker) removeContainer(ctx context.Context, c container.Summary, why string) (bool, error) {
	err := forceRemove(ctx, d.cli, c.ID)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("remove the sandbox container %s: %w: %w", short(c.ID), err, errs.ErrUnavailable)
	}
	d.cfg.logger.InfoContext(ctx, "docker: removed a sandbox container", "container", short(c.ID),
		"sandbox", c.Labels[labelID], "owner", c.Labels[labelOwner], "state", c.State, "why", why)
	return true, nil
}

// short is the usual 12-character form of a container id.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
