package backend

import (
	"errors"
	"strings"
	"testing"
)

func TestAutoPrefersTheMostIsolatingBackend(t *testing.T) {
	t.Parallel()
	if _, err := NewBwrap(WithLogger(quiet()), WithStateDir(t.TempDir())); err != nil {
		t.Skipf("bwrap cannot run on this machine, so Auto cannot choose it: %v", err)
	} // (its state lives in the test's temporary directory, removed with it)
	// A working local backend stands in for docker: what matters is that an offered,
	// working backend is preferred.
	offered := newLocal(t)
	cases := []struct {
		name        string
		opts        []Option
		want        string
		reasonsHave []string
	}{
		{name: "no docker offered", want: "bwrap", reasonsHave: []string{"docker: docker backend not built yet"}},
		{name: "docker fails", opts: []Option{WithDocker(func() (Backend, error) { return nil, errors.New("no engine answers") })},
			want: "bwrap", reasonsHave: []string{"docker: no engine answers"}},
		{name: "docker works", opts: []Option{WithDocker(func() (Backend, error) { return offered, nil })}, want: "local"},
		{name: "no bwrap", opts: []Option{WithBwrapPath("/nonexistent/bwrap")},
			want: "local", reasonsHave: []string{"docker: docker backend not built yet", "bwrap: bwrap backend: bubblewrap not installed"}},
	}
	for _, c := range cases {
		b, reasons := Auto(append(c.opts, WithLogger(quiet()), WithStateDir(t.TempDir()))...)
		if b != offered {
			t.Cleanup(func() { b.Close() })
		}
		if b.Name() != c.want {
			t.Errorf("%s: chose %s, want %s (reasons %q)", c.name, b.Name(), c.want, reasons)
		}
		if len(reasons) != len(c.reasonsHave) {
			t.Errorf("%s: reasons %q, want %d", c.name, reasons, len(c.reasonsHave))
			continue
		}
		for i, r := range c.reasonsHave {
			if !strings.HasPrefix(reasons[i], r) {
				t.Errorf("%s: reason %d is %q, want it to start %q", c.name, i, reasons[i], r)
			}
		}
	}
}
