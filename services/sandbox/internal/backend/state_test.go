package backend

import (
	"context"
	"testing"
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
