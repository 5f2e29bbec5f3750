package docker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
)

// A pool keeps started containers ready; a sandbox takes one (named after it, since its
// labels cannot change), a second sandbox of another owner gets another, fresh one, a
// destroyed sandbox's container is removed rather than pooled again, and the pool refills.
func TestPoolHandsOutEachContainerOnce(t *testing.T) {
	if shared == nil {
		t.Skip(skipReason)
	}
	t.Parallel()
	ctx := context.Background()
	limits := backend.Limits{MemoryBytes: 256 << 20, CPUs: 1, Pids: 128}
	d, err := New(ctx, WithClient(shared.Client()), WithPool(2, limits))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	defer func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
		list, _ := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelDir+"="+dir)})
		if len(list.Items) != 0 {
			t.Errorf("%d containers of the pool left after Close", len(list.Items))
		}
	}()
	if d.PoolSize(DefaultImage) != 0 {
		t.Fatal("the pool filled before Reconcile named its dir")
	}
	if _, err := d.Reconcile(ctx, dir, func(context.Context, []string) (map[string]bool, error) { return map[string]bool{}, nil }); err != nil {
		t.Fatal(err)
	}
	waitPool := func(n int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for d.PoolSize(DefaultImage) < n {
			if time.Now().After(deadline) {
				t.Fatalf("the pool holds %d containers after a minute, want %d", d.PoolSize(DefaultImage), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitPool(2)

	prepare := func(id, owner string) (string, string) {
		t.Helper()
		ws := t.TempDir()
		start := time.Now()
		if err := d.Prepare(ctx, ws, Identity{ID: id, Owner: owner, Dir: dir}, "go", limits); err != nil {
			t.Fatal(err)
		}
		t.Logf("Prepare from the pool: %v", time.Since(start))
		b, _ := d.box(ws)
		info, err := d.cli.ContainerInspect(ctx, b.id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if info.Container.Name != "/"+PooledName(id) || info.Container.Config.Labels[labelPool] != "1" {
			t.Fatalf("sandbox %s got container %q labelled %v, want a pooled one named %s", id, info.Container.Name, info.Container.Config.Labels, PooledName(id))
		}
		return ws, b.id
	}
	wsA, a := prepare("sandbox-a", "alice")
	res, err := d.Run(ctx, wsA, backend.Spec{Argv: sh("echo alice > /tmp/mark")}, limits)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run in a: %v %+v", err, res)
	}
	// The reaper's Reconcile leaves a handed-out container alone.
	if _, err := d.Reconcile(ctx, dir, func(context.Context, []string) (map[string]bool, error) {
		return map[string]bool{"sandbox-a": true}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := d.Destroy(ctx, wsA); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cli.ContainerInspect(ctx, a, client.ContainerInspectOptions{}); err == nil {
		t.Fatal("the destroyed sandbox's container is still there")
	}
	waitPool(2)
	wsB, bID := prepare("sandbox-b", "bob")
	if bID == a {
		t.Fatal("bob's sandbox got alice's container")
	}
	res, err = d.Run(ctx, wsB, backend.Spec{Argv: sh("cat /tmp/mark 2>/dev/null || echo fresh")}, limits)
	if err != nil || string(res.Stdout) != "fresh\n" {
		t.Fatalf("bob's container: %v %q", err, res.Stdout)
	}
	if err := d.Destroy(ctx, wsB); err != nil {
		t.Fatal(err)
	}
}

// A Reconcile that runs while the pool is making a container (after the engine created it,
// before the pool recorded its id) leaves it alone: the reaper of a busy service used to
// remove it there, and the pool then handed a sandbox a container that no longer existed
// ("No such container" in the middle of a job).
func TestReconcileLeavesAContainerThePoolIsMaking(t *testing.T) {
	if shared == nil {
		t.Skip(skipReason)
	}
	t.Parallel()
	ctx := context.Background()
	limits := backend.Limits{MemoryBytes: 256 << 20, CPUs: 1, Pids: 128}
	d, err := New(ctx, WithClient(shared.Client()), WithPool(1, limits))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	dir := t.TempDir()
	none := func(context.Context, []string) (map[string]bool, error) { return map[string]bool{}, nil }
	removed := make(chan int, 1)
	var once sync.Once
	d.pool.made = func(string) {
		// The first container made only: the pool refills after the test takes it, maybe
		// after the backend is closed.
		once.Do(func() {
			n, err := d.Reconcile(ctx, dir, none)
			if err != nil {
				t.Error(err)
			}
			removed <- n
		})
	}
	if _, err := d.Reconcile(ctx, dir, none); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-removed:
		if n != 0 {
			t.Fatalf("Reconcile in the window removed %d containers, want 0", n)
		}
	case <-time.After(time.Minute):
		t.Fatal("the pool made no container in a minute")
	}
	deadline := time.Now().Add(time.Minute)
	for d.PoolSize(DefaultImage) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the pool holds no container after a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ws := t.TempDir()
	if err := d.Prepare(ctx, ws, Identity{ID: "sandbox-made", Owner: "alice", Dir: dir}, "go", limits); err != nil {
		t.Fatal(err)
	}
	res, err := d.Run(ctx, ws, backend.Spec{Argv: sh("echo ok")}, limits)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run in the pooled container: %v %+v", err, res)
	}
}
