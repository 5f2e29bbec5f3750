package store

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/errs"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"

	"github.com/thefold/thefold/services/sandbox/migrations"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newStore(t *testing.T) (*Store, *clock) {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "sandbox", migrations.FS)
	c := &clock{t: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
	return New(pool, WithClock(c.now)), c
}

func newSandbox(owner string) *Sandbox {
	return &Sandbox{
		Sandbox: &sandboxv1.Sandbox{OwnerId: owner, Repo: "local/demo", Backend: sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP,
			Language: "go", Limits: &sandboxv1.ResourceLimits{MemoryBytes: 512 << 20, Pids: 256}},
		TTL: 30 * time.Minute, Workspace: "/tmp/ws",
	}
}

func TestCreateGetAndOwnerScope(t *testing.T) {
	t.Parallel()
	s, c := newStore(t)
	ctx := t.Context()
	sb, existing, err := s.Create(ctx, newSandbox("alice"), 5, nil)
	if err != nil || existing {
		t.Fatal(err, existing)
	}
	if sb.Status != sandboxv1.SandboxStatus_SANDBOX_STATUS_CREATING || !sb.ExpireTime.AsTime().Equal(c.now().Add(30*time.Minute)) ||
		sb.Limits.GetPids() != 256 || sb.Workspace != "/tmp/ws" {
		t.Fatalf("created %+v", sb)
	}
	if err := s.MarkReady(ctx, sb.Id, "", "abc123", "go"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "alice", sb.Id)
	if err != nil || got.Status != sandboxv1.SandboxStatus_SANDBOX_STATUS_READY || got.BaseCommit != "abc123" {
		t.Fatalf("get %v %v", got, err)
	}
	for _, id := range []string{sb.Id, "not-a-uuid"} {
		if _, err := s.Get(ctx, "bob", id); !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("bob reads %s: %v", id, err)
		}
	}
}

func TestPerOwnerLimitAndRequestIDs(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	req := &CreateRequest{ID: "r1", Fingerprint: []byte{1}}
	first, existing, err := s.Create(ctx, newSandbox("alice"), 2, req)
	if err != nil || existing {
		t.Fatal(err)
	}
	again, existing, err := s.Create(ctx, newSandbox("alice"), 2, req)
	if err != nil || !existing || again.Id != first.Id {
		t.Fatalf("retry: %v %v %v", again, existing, err)
	}
	if _, _, err := s.Create(ctx, newSandbox("alice"), 2, &CreateRequest{ID: "r1", Fingerprint: []byte{2}}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("reused id: %v", err)
	}
	if _, _, err := s.Create(ctx, newSandbox("alice"), 2, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(ctx, newSandbox("alice"), 2, nil); !errors.Is(err, errs.ErrFailedPrecondition) {
		t.Fatalf("third live sandbox: %v", err)
	}
	// Bob has his own limit; a failed sandbox frees a place.
	if _, _, err := s.Create(ctx, newSandbox("bob"), 2, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkFailed(ctx, first.Id, "image missing"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(ctx, newSandbox("alice"), 2, nil); err != nil {
		t.Fatalf("after a failure: %v", err)
	}
}

// Concurrent creates of one owner cannot pass the limit together.
func TestLimitHoldsUnderConcurrency(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	var wg sync.WaitGroup
	errc := make(chan error, 6)
	for range 6 {
		wg.Go(func() {
			_, _, err := s.Create(t.Context(), newSandbox("alice"), 3, nil)
			errc <- err
		})
	}
	wg.Wait()
	close(errc)
	ok := 0
	for err := range errc {
		if err == nil {
			ok++
		} else if !errors.Is(err, errs.ErrFailedPrecondition) {
			t.Fatal(err)
		}
	}
	if ok != 3 {
		t.Fatalf("%d creates passed a limit of 3", ok)
	}
}

func TestIdleExpiryKeepAliveAndReaper(t *testing.T) {
	t.Parallel()
	s, c := newStore(t)
	ctx := t.Context()
	a, _, _ := s.Create(ctx, newSandbox("alice"), 0, nil)
	b, _, _ := s.Create(ctx, newSandbox("alice"), 0, nil)
	for _, sb := range []*Sandbox{a, b} {
		if err := s.MarkReady(ctx, sb.Id, "", "", ""); err != nil {
			t.Fatal(err)
		}
	}
	c.add(20 * time.Minute)
	if _, err := s.Use(ctx, "alice", a.Id); err != nil { // a is used: idle again from now
		t.Fatal(err)
	}
	c.add(15 * time.Minute)
	exp, err := s.Expired(ctx, 10)
	if err != nil || len(exp) != 1 || exp[0].Id != b.Id {
		t.Fatalf("expired %v %v, want only b", exp, err)
	}
	pinned, err := s.KeepAlive(ctx, "alice", b.Id, 0, true)
	if err != nil || !pinned.Pinned || pinned.ExpireTime != nil {
		t.Fatalf("pin: %v %v", pinned, err)
	}
	c.add(24 * time.Hour)
	exp, _ = s.Expired(ctx, 10)
	if len(exp) != 1 || exp[0].Id != a.Id {
		t.Fatalf("expired %v, want only a (b is pinned)", exp)
	}
	unpinned, err := s.KeepAlive(ctx, "alice", b.Id, time.Hour, false)
	if err != nil || unpinned.Pinned || !unpinned.ExpireTime.AsTime().Equal(c.now().Add(time.Hour)) {
		t.Fatalf("unpin: %v %v", unpinned, err)
	}
	if err := s.Destroyed(ctx, a.Id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Use(ctx, "alice", a.Id); !errors.Is(err, errs.ErrFailedPrecondition) {
		t.Fatalf("use a destroyed sandbox: %v", err)
	}
	if _, err := s.KeepAlive(ctx, "alice", a.Id, 0, true); !errors.Is(err, errs.ErrFailedPrecondition) {
		t.Fatalf("keep a destroyed sandbox alive: %v", err)
	}
	if _, err := s.KeepAlive(ctx, "bob", b.Id, 0, true); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("bob keeps alice's sandbox alive: %v", err)
	}
}

func TestListPagesNewestFirst(t *testing.T) {
	t.Parallel()
	s, c := newStore(t)
	ctx := t.Context()
	var ids []string
	for range 5 {
		sb, _, err := s.Create(ctx, newSandbox("alice"), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.Id)
		c.add(time.Second)
	}
	if _, _, err := s.Create(ctx, newSandbox("bob"), 0, nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	var after *Cursor
	for {
		page, next, err := s.List(ctx, Filter{Owner: "alice", PageSize: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, sb := range page {
			got = append(got, sb.Id)
		}
		if next == nil {
			break
		}
		after = next
	}
	if len(got) != 5 || got[0] != ids[4] || got[4] != ids[0] {
		t.Fatalf("pages %v, want %v reversed", got, ids)
	}
	ready, _, err := s.List(ctx, Filter{Owner: "alice", PageSize: 10, Statuses: []sandboxv1.SandboxStatus{sandboxv1.SandboxStatus_SANDBOX_STATUS_READY}})
	if err != nil || len(ready) != 0 {
		t.Fatalf("ready filter: %v %v", ready, err)
	}
}

func TestSnapshotsAndCommandLog(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	sb, _, _ := s.Create(ctx, newSandbox("alice"), 0, nil)
	info, err := s.SaveSnapshot(ctx, sb.Id, "before-fix", []byte(`{"a.go":{"sha256":"x"}}`), 1, 10)
	if err != nil || info.FileCount != 1 {
		t.Fatal(info, err)
	}
	if _, err := s.SaveSnapshot(ctx, sb.Id, "before-fix", []byte(`{}`), 0, 0); !errors.Is(err, errs.ErrAlreadyExists) {
		t.Fatalf("same name: %v", err)
	}
	got, files, err := s.Snapshot(ctx, sb.Id, info.Id)
	if err != nil || got.Name != "before-fix" || string(files) != `{"a.go": {"sha256": "x"}}` {
		t.Fatalf("snapshot %v %s %v", got, files, err)
	}
	if _, _, err := s.Snapshot(ctx, sb.Id, "nope"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("unknown snapshot: %v", err)
	}
	long := make([]byte, 3*maxTail)
	for i := range long {
		long[i] = 'a' + byte(i%26)
	}
	id, err := s.LogCommand(ctx, &Command{SandboxID: sb.Id, Argv: []string{"go", "vet", "./..."}, ExitCode: 1, Duration: 1500 * time.Millisecond, OutputTail: string(long)})
	if err != nil || id == "" {
		t.Fatal(err)
	}
	log, err := s.Commands(ctx, sb.Id, 10)
	if err != nil || len(log) != 1 || log[0].Argv[1] != "vet" || log[0].Duration != 1500*time.Millisecond ||
		len(log[0].OutputTail) != maxTail || log[0].OutputTail != string(long[len(long)-maxTail:]) {
		t.Fatalf("log %+v %v", log, err)
	}
}
