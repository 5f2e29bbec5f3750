package docker

import (
	"context"
	"crypto/rand"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
)

// labelPool marks a container made ahead of need. A pooled container is fresh: it goes to
// exactly one sandbox, which removes it when it is destroyed, so no container is ever used
// by two sandboxes (or two owners). After a crash the pooled containers, and those handed
// out, carry no sandbox id: Reconcile removes them, and a live sandbox's next command makes
// its own.
const labelPool = "org.thefold.sandbox.pool"

// labelPoolToken names a pooled container before the engine has given it an id: from
// ContainerCreate until the pool records the id, Reconcile (which may run meanwhile, in the
// reaper) knows the container as this process's by its token. Without it, a container being
// made looked like a crashed process's pooled container and was removed under the pool,
// which then handed a sandbox a container that no longer existed.
const labelPoolToken = "org.thefold.sandbox.pool.token"

// PooledName is the container name a pooled container takes when it is handed to sandbox
// id: its labels were set before it had a sandbox and cannot change, so
// `docker ps --filter name=thefold-sandbox-<id>` finds it where the id label does not.
func PooledName(id string) string { return pooledPrefix + id }

const pooledPrefix = "thefold-sandbox-"

// sandboxOf is the sandbox id of a container: its label, else a pooled container's name.
func sandboxOf(c container.Summary) string {
	if id := c.Labels[labelID]; id != "" || c.Labels[labelPool] != "1" {
		return id
	}
	for _, n := range c.Names {
		if id, ok := strings.CutPrefix(strings.TrimPrefix(n, "/"), pooledPrefix); ok {
			return id
		}
	}
	return ""
}

// pool keeps started containers per image so that making a sandbox does not wait for the
// engine to create and start one.
type pool struct {
	size   int
	limits backend.Limits

	mu      sync.Mutex
	started bool
	closed  bool
	idle    map[string][]string // image → ready container ids
	filling map[string]int      // image → containers being made
	// mine holds every container the pool made that is idle or handed out and still
	// alive in this process, so Reconcile leaves them alone; making holds the tokens
	// (labelPoolToken) of those being made, which have no id yet.
	mine   map[string]bool
	making map[string]bool
	// made, when set (by a test), is called with each container made before it is
	// recorded: the window Reconcile must not remove it in.
	made func(id string)
	wg   sync.WaitGroup
}

func newPool(size int, l backend.Limits) *pool {
	return &pool{size: size, limits: l.WithDefaults(), idle: map[string][]string{}, filling: map[string]int{}, mine: map[string]bool{},
		making: map[string]bool{}}
}

// WithPool keeps size started containers of every configured image ready (0, the default,
// for none), made with limits l; a sandbox whose limits differ gets the pooled container
// updated to its own. Filling starts with the first Reconcile, which names the dir the
// pooled containers are labelled with, so a later process of the service removes them.
func WithPool(size int, l backend.Limits) Option {
	return func(c *config) { c.poolSize, c.poolLimits = size, l }
}

// startPool begins filling the pool for every configured image.
func (d *Docker) startPool() {
	p := d.pool
	if p == nil || p.size <= 0 {
		return
	}
	p.mu.Lock()
	if p.started || p.closed {
		p.mu.Unlock()
		return
	}
	p.started = true
	p.mu.Unlock()
	seen := map[string]bool{}
	for _, img := range d.cfg.images {
		if !seen[img] {
			seen[img] = true
			d.refill(img)
		}
	}
}

// refill makes containers of image until the pool holds size of them.
func (d *Docker) refill(image string) {
	p := d.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && len(p.idle[image])+p.filling[image] < p.size {
		p.filling[image]++
		p.wg.Add(1)
		token := rand.Text()
		p.making[token] = true
		go func() {
			defer p.wg.Done()
			id, err := d.makePooled(image, token)
			if p.made != nil {
				p.made(id)
			}
			p.mu.Lock()
			p.filling[image]--
			delete(p.making, token)
			switch {
			case err != nil:
				p.mu.Unlock()
				d.cfg.logger.Warn("docker: pool container", "image", image, "err", err)
				return
			case p.closed:
				p.mu.Unlock()
				d.removeID(id)
				return
			}
			p.idle[image] = append(p.idle[image], id)
			p.mine[id] = true
			p.mu.Unlock()
		}()
	}
}

// makePooled creates and starts one container of image with the pool's limits, labelled
// with token.
func (d *Docker) makePooled(image, token string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := &box{}
	labels := d.labels(b)
	labels[labelPool] = "1"
	labels[labelPoolToken] = token
	if err := d.create(ctx, b, image, d.pool.limits, labels); err != nil {
		return "", err
	}
	return b.id, nil
}

// take hands out a pooled container of image, if there is one, and starts a replacement.
func (d *Docker) take(image string) (string, backend.Limits, bool) {
	p := d.pool
	if p == nil || p.size <= 0 {
		return "", backend.Limits{}, false
	}
	p.mu.Lock()
	ids := p.idle[image]
	if len(ids) == 0 || p.closed {
		started := p.started
		p.mu.Unlock()
		if started {
			d.refill(image)
		}
		return "", backend.Limits{}, false
	}
	id := ids[0]
	p.idle[image] = ids[1:]
	p.mu.Unlock()
	d.refill(image)
	return id, p.limits, true
}

// pooled reports whether the pool of this process made (or is making) the container c and
// it is still in use here.
func (d *Docker) pooled(c container.Summary) bool {
	if d.pool == nil || c.Labels[labelPool] != "1" {
		return false
	}
	d.pool.mu.Lock()
	defer d.pool.mu.Unlock()
	return d.pool.mine[c.ID] || d.pool.making[c.Labels[labelPoolToken]]
}

// forget drops a removed container from the pool's records.
func (d *Docker) forget(id string) {
	if d.pool == nil {
		return
	}
	d.pool.mu.Lock()
	delete(d.pool.mine, id)
	d.pool.mu.Unlock()
}

// closePool stops filling and removes the idle containers.
func (d *Docker) closePool() {
	p := d.pool
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	var idle []string
	for _, ids := range p.idle {
		idle = append(idle, ids...)
	}
	p.idle = map[string][]string{}
	p.mu.Unlock()
	p.wg.Wait()
	for _, id := range idle {
		d.removeID(id)
	}
}

// PoolSize is how many started containers of image wait in the pool now.
func (d *Docker) PoolSize(image string) int {
	if d.pool == nil {
		return 0
	}
	d.pool.mu.Lock()
	defer d.pool.mu.Unlock()
	return len(d.pool.idle[image])
}
