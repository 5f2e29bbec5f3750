package backend

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The helper process of TestBwrapRunDiesWithTheService reads its marker and directory here.
const (
	crashMarkerEnv = "THEFOLD_TEST_CRASH_MARKER"
	crashDirEnv    = "THEFOLD_TEST_CRASH_DIR"
)

// A kill -9 of the service in the middle of a bwrap command leaves no process of that
// command behind: bwrap runs with --die-with-parent (PR_SET_PDEATHSIG), and what runs inside
// dies with its pid namespace when bwrap goes. The service is played by a helper process
// (this test binary again) that runs `sleep` through the bwrap backend; every process of
// that run carries a unique argument, searched for in /proc.
func TestBwrapRunDiesWithTheService(t *testing.T) {
	if os.Getenv(crashMarkerEnv) != "" {
		t.Skip("inside the helper process")
	}
	t.Parallel()
	newBwrap(t) // skips when bwrap cannot make a sandbox here
	n, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	// An argument sleep accepts (it adds its arguments up) and nothing else carries.
	marker := fmt.Sprintf("0.0000%d", n)
	t.Cleanup(func() {
		for _, p := range processesWith(marker) {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	})

	var out bytes.Buffer
	helper := exec.Command(os.Args[0], "-test.run=^TestBwrapCrashHelper$", "-test.v")
	crashDir := t.TempDir()
	helper.Env = append(os.Environ(), crashMarkerEnv+"="+marker, crashDirEnv+"="+crashDir)
	helper.Stdout, helper.Stderr = &out, &out
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	helperDone := make(chan error, 1)
	go func() { helperDone <- helper.Wait() }()

	// The helper's TestMain builds the test helper binary first: allow for it.
	deadline := time.Now().Add(2 * time.Minute)
	for !slices.ContainsFunc(processesWith(marker), func(p process) bool { return filepath.Base(p.argv[0]) == "sleep" }) {
		select {
		case err := <-helperDone:
			t.Fatalf("the helper ended (%v) before its command ran:\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = helper.Process.Kill()
			t.Fatalf("the command did not start within 2 minutes:\n%s", out.String())
		}
	}
	before := processesWith(marker)
	t.Logf("the run, before the kill:\n%s", describe(before))

	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-helperDone

	deadline = time.Now().Add(10 * time.Second)
	for {
		left := processesWith(marker)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after a kill -9 of the service, processes of its bwrap run are alive:\n%s\n(before the kill:\n%s)",
				describe(left), describe(before))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(before) < 2 {
		t.Errorf("only %d process of the run was seen (bwrap and sleep at least were expected):\n%s", len(before), describe(before))
	}

	// The killed service left its state and its groups (its run's, its launchers'): the
	// next backend over the same state directory removes them.
	state := filepath.Join(crashDir, "state")
	roots, _ := filepath.Glob(filepath.Join(state, stateRootPrefix+"*"))
	if len(roots) != 1 {
		t.Fatalf("the killed service's state roots: %q, want one", roots)
	}
	owner := strings.TrimPrefix(filepath.Base(roots[0]), stateRootPrefix)
	left := ownerGroups(owner)
	if cg, _ := makeCgroup(testOwner(t), false); len(cg.dirs()) == 2 {
		cg.remove()
		if len(left) == 0 {
			t.Fatal("the killed service left no group: nothing here tests their removal")
		}
	}
	b, err := NewBwrap(WithLogger(quiet()), WithStateDir(state))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := os.Stat(roots[0]); !os.IsNotExist(err) {
		t.Errorf("the killed service's state %s is still there: %v", roots[0], err)
	}
	if g := ownerGroups(owner); len(g) > 0 {
		t.Errorf("the killed service's groups are still there: %q (before: %q)", g, left)
	}
}

// ownerGroups lists the groups of owner beneath this process's own.
func ownerGroups(owner string) []string {
	own, err := ownCgroups()
	if err != nil {
		return nil
	}
	var out []string
	for _, ctrl := range []string{"pids", "memory"} {
		if base, ok := own[ctrl]; ok {
			m, _ := filepath.Glob(filepath.Join(cgroupRoot, ctrl, base, cgroupPrefix+owner+"-*"))
			out = append(out, m...)
		}
	}
	return out
}

// TestBwrapCrashHelper is the service of TestBwrapRunDiesWithTheService: it runs a long
// sleep through the bwrap backend until it is killed.
func TestBwrapCrashHelper(t *testing.T) {
	marker, dir := os.Getenv(crashMarkerEnv), os.Getenv(crashDirEnv)
	if marker == "" || dir == "" {
		t.Skip("the helper process of TestBwrapRunDiesWithTheService")
	}
	state, ws := filepath.Join(dir, "state"), filepath.Join(dir, "ws")
	for _, d := range []string{state, ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := NewBwrap(WithLogger(quiet()), WithStateDir(state))
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Run(context.Background(), ws, Spec{Argv: []string{"sleep", "3600", marker}, Timeout: time.Hour}, Limits{})
	t.Fatalf("the command ended (%+v, %v): it should have run until this process was killed", res, err)
}

// process is a live process of the host.
type process struct {
	pid  int
	argv []string
}

// processesWith lists the live processes one of whose arguments is arg (this one aside).
// A zombie has no command line and is not listed: it holds no resource but its pid.
func processesWith(arg string) []process {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []process
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if slices.Contains(argv, arg) && alive(pid) {
			out = append(out, process{pid: pid, argv: argv})
		}
	}
	return out
}

func describe(ps []process) string {
	var b strings.Builder
	for _, p := range ps {
		argv := p.argv
		if len(argv) > 8 {
			argv = append(slices.Clone(argv[:4]), "…", argv[len(argv)-3], argv[len(argv)-2], argv[len(argv)-1])
		}
		fmt.Fprintf(&b, "  pid %d: %q\n", p.pid, argv)
	}
	return b.String()
}
