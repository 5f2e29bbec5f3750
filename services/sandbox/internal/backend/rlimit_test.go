package backend

import (
	"context"
	"strings"
	"testing"
)

// The command runs under the run's rlimits, set before its first instruction: CPU seconds,
// file size, open files and processes (and data size where no memory cgroup bounds it), and
// a write past the file-size limit fails.
func TestRunAppliesRlimits(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b Backend) {
		ws := workspace(t)
		l := Limits{CPUSeconds: 7, FileSizeBytes: 11 * 512, OpenFiles: 13, Pids: 170}
		// dash's ulimit: -t seconds, -f 512-byte blocks, -n files, -p processes.
		res, err := b.Run(context.Background(), ws, Spec{Argv: []string{"/bin/sh", "-c",
			`ulimit -t; ulimit -f; ulimit -n; ulimit -p; head -c 100000 /dev/zero > big 2>/dev/null; wc -c < big`}}, l)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Fields(string(res.Stdout)); strings.Join(got, " ") != "7 11 13 170 5632" {
			t.Fatalf("limits seen by the command %q (stderr %q), want 7 11 13 170 and a file cut at 5632 bytes", got, res.Stderr)
		}
	})
}
