package backend

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// State kept per workspace (the build cache) survives between runs and goes with Release.
func TestReleaseRemovesWorkspaceState(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b Backend) {
		ws := workspace(t)
		// The go command makes $GOCACHE when it first needs it; so does this.
		write := Spec{Argv: []string{"sh", "-c", `mkdir -p "$GOCACHE" && echo kept > "$GOCACHE/marker"`}}
		read := Spec{Argv: []string{"sh", "-c", `cat "$GOCACHE/marker"`}}
		for _, s := range []Spec{write, read} {
			if res, err := b.Run(context.Background(), ws, s, Limits{}); err != nil || res.ExitCode != 0 {
				t.Fatalf("%v %+v", err, res)
			}
		}
		if err := b.(interface{ Release(string) error }).Release(ws); err != nil {
			t.Fatal(err)
		}
		res, err := b.Run(context.Background(), ws, read, Limits{})
		if err != nil || res.ExitCode == 0 {
			t.Fatalf("state survived Release: %v %+v", err, res)
		}
		// Another workspace never shares it.
		other := workspace(t)
		b.Run(context.Background(), ws, write, Limits{})
		if res, _ := b.Run(context.Background(), other, read, Limits{}); res == nil || res.ExitCode == 0 {
			t.Fatalf("state shared between workspaces: %+v", res)
		}
	})
}

// Release takes a workspace's state away at once and removes it in the background; close
// waits for what is still being removed.
func TestStateReleaseIsDeferredAndCloseWaits(t *testing.T) {
	t.Parallel()
	st, err := newState(t.TempDir(), quiet())
	if err != nil {
		t.Fatal(err)
	}
	d, err := st.dir("/some/workspace", "home")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "home", "kept"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := st.release("/some/workspace"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d); !os.IsNotExist(err) {
		t.Fatalf("the state is still there when release returns: %v", err)
	}
	// A new sandbox over the same path starts afresh.
	if d2, err := st.dir("/some/workspace"); err != nil {
		t.Fatal(err)
	} else if _, err := os.Stat(filepath.Join(d2, "home", "kept")); !os.IsNotExist(err) {
		t.Fatalf("the released state came back: %v", err)
	}
	st.settle()
	if left, _ := filepath.Glob(filepath.Join(st.root, "released-*")); len(left) > 0 {
		t.Fatalf("released state not removed: %q", left)
	}

	// A removal still going on holds close up.
	unblock := make(chan struct{})
	st.later(func() { <-unblock })
	closed := make(chan error, 1)
	go func() { closed <- st.close() }()
	select {
	case err := <-closed:
		t.Fatalf("close returned (%v) while a removal was going on", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(unblock)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(st.root); !os.IsNotExist(err) {
		t.Fatalf("the state root is still there after close: %v", err)
	}
}

// A backend started where another process's backend left its state (killed, crashed)
// removes that state and the groups that process made, killing what runs in them; a live
// backend's state and groups, and a root without a lock file, are left alone.
func TestStateReapsWhatADeadProcessLeft(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	live, err := newState(base, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer live.close()
	// What a dead owner left: its root, its lock file (nobody holds it), its groups.
	dead := randomHex(4)
	root := filepath.Join(base, stateRootPrefix+dead)
	for _, f := range []string{ownerLock, "0123456789abcdef/home/file"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lockless := filepath.Join(base, stateRootPrefix+randomHex(4))
	if err := os.Mkdir(lockless, 0o700); err != nil {
		t.Fatal(err)
	}
	deadCg, _ := makeCgroup(dead, false)
	liveCg, _ := makeCgroup(live.id, false)
	defer liveCg.remove()
	// Something still running in the dead owner's groups.
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleeper.Process.Kill()
	if err := deadCg.join(sleeper.Process.Pid); err != nil {
		t.Fatal(err)
	}
	sleeperDone := make(chan struct{})
	go func() { sleeper.Wait(); close(sleeperDone) }()

	st, err := newState(base, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("the dead owner's state is still there: %v", err)
	}
	for _, d := range deadCg.dirs() {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("the dead owner's group %s is still there: %v", d, err)
		}
	}
	if len(deadCg.dirs()) > 0 {
		select {
		case <-sleeperDone:
		case <-time.After(5 * time.Second):
			t.Error("the process in the dead owner's groups still runs")
		}
	}
	for _, d := range append(liveCg.dirs(), live.root, filepath.Join(live.root, ownerLock), lockless) {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s (a live owner's, or without a lock) was removed: %v", d, err)
		}
	}
}

// A workspace's first run gets a fresh directory made ahead (home in it), its own: a later
// run of the same workspace keeps it, another workspace gets another, and after Release
// the workspace starts afresh.
func TestStateDirsAreFresh(t *testing.T) {
	t.Parallel()
	st, err := newState(t.TempDir(), quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	ready := func() {
		t.Helper()
		st.settle()
		if len(st.fresh) != freshDirs {
			t.Fatalf("%d fresh directories ready, want %d", len(st.fresh), freshDirs)
		}
	}
	mark := func(d string) string { return filepath.Join(d, "home", "mark") }
	ready()
	a, err := st.dir("/ws/a")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mark(a), nil, 0o644); err != nil {
		t.Fatalf("no home in a fresh state directory: %v", err)
	}
	ready()
	if again, err := st.dir("/ws/a"); err != nil || again != a {
		t.Fatalf("second run of a: %q %v", again, err)
	} else if _, err := os.Stat(mark(a)); err != nil {
		t.Fatalf("a's state was replaced by a fresh one: %v", err)
	}
	b, err := st.dir("/ws/b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mark(b)); !os.IsNotExist(err) {
		t.Fatalf("b got a's state: %v", err)
	}
	if err := st.release("/ws/a"); err != nil {
		t.Fatal(err)
	}
	ready()
	if a2, err := st.dir("/ws/a"); err != nil {
		t.Fatal(err)
	} else if _, err := os.Stat(mark(a2)); !os.IsNotExist(err) {
		t.Fatalf("a's released state came back: %v", err)
	}
	// The take above started a refill in the background: compare once it is done.
	st.settle()
	if left, _ := filepath.Glob(filepath.Join(st.root, "fresh-*")); len(left) != len(st.fresh) {
		t.Fatalf("fresh directories %q, %d ready", left, len(st.fresh))
	}
}
