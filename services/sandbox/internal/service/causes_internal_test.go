package service

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/errs"
)

// A backend's failure is told with its cause named and no host path in it.
func TestPublicCauseNamesTheProblemWithoutHostPaths(t *testing.T) {
	_, lookErr := exec.LookPath("python3-not-installed-here")
	cases := []struct {
		err        error
		want, hide []string
	}{
		{&exec.Error{Name: "/usr/local/bin/python3", Err: exec.ErrNotFound}, []string{"program not found: python3"}, []string{"/usr/local/bin"}},
		{fmt.Errorf("run: %w", lookErr), []string{"program not found: python3-not-installed-here"}, nil},
		{fmt.Errorf("sandbox state directory: stat /var/lib/thefold/sandboxes/.state/ab12: no such file or directory: %w", errs.ErrUnavailable),
			[]string{"sandbox state directory", "…/ab12", "no such file or directory"}, []string{"/var/lib", "unavailable"}},
		{fmt.Errorf(`workspace "/srv/thefold/sandboxes/x/ws": not a directory: %w`, errs.ErrFailedPrecondition),
			[]string{"workspace", "…/ws", "not a directory"}, []string{"/srv"}},
	}
	for _, c := range cases {
		got := publicCause(c.err)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("publicCause(%v) = %q, lacks %q", c.err, got, w)
			}
		}
		for _, h := range c.hide {
			if strings.Contains(got, h) {
				t.Errorf("publicCause(%v) = %q, shows %q", c.err, got, h)
			}
		}
	}
}
