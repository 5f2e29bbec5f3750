package backend

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// alive reports whether pid is a live (not zombie) process on the host.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may itself hold spaces.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

func TestLocalKillsWholeGroup(t *testing.T) {
	t.Parallel()
	for _, cg := range []bool{true, false} {
		t.Run(fmt.Sprintf("cgroups=%v", cg), func(t *testing.T) {
			t.Parallel()
			b := NewLocal(WithLogger(quiet()), WithStateDir(t.TempDir()), WithCgroups(cg))
			defer b.Close()
			ws := workspace(t)
			pidfile := filepath.Join(ws, "pids")
			res, err := b.Run(context.Background(), ws, Spec{Argv: []string{"./helper", "stubborn", pidfile}, Timeout: time.Second}, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.TimedOut || res.Signal == "" {
				t.Fatalf("timed out %v signal %q, want true and killed: %+v", res.TimedOut, res.Signal, res)
			}
			var child, grandchild int
			raw, err := os.ReadFile(pidfile)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fmt.Sscanf(string(raw), "%d %d", &child, &grandchild); err != nil {
				t.Fatalf("pidfile %q: %v", raw, err)
			}
			for _, pid := range []int{child, grandchild} {
				if alive(pid) {
					t.Errorf("pid %d outlived Run", pid)
				}
			}

			// A background process left behind by a command that exited is killed too.
			res, err = b.Run(context.Background(), ws, Spec{Argv: []string{"sh", "-c", "./helper sleeper >/dev/null 2>&1 & echo $!"}}, Limits{})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("%v %+v", err, res)
			}
			var bg int
			if _, err := fmt.Sscanf(string(res.Stdout), "%d", &bg); err != nil {
				t.Fatal(err)
			}
			if alive(bg) {
				t.Errorf("background pid %d outlived Run", bg)
			}
		})
	}
}

// A background process holding stdin unread (sh gives & jobs /dev/null unless told) must
// not keep Run from returning.
func TestRunReturnsWhenStdinIsHeld(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b Backend) {
		ws := workspace(t)
		stdin := make([]byte, 4<<20) // beyond any pipe buffer
		res, err := b.Run(context.Background(), ws, Spec{Argv: []string{"sh", "-c", "exec 3<&0; ./helper sleeper <&3 & exit 0"}, Stdin: stdin, Timeout: time.Minute}, Limits{})
		if err != nil || res.ExitCode != 0 || res.TimedOut {
			t.Fatalf("%v %+v", err, res)
		}
	})
}
