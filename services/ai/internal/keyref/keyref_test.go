package keyref

import "testing"

func TestAllow(t *testing.T) {
	t.Parallel()
	a := Default()
	lookup := a.Guard(func(name string) (string, bool) { return "value-of-" + name, true })
	for name, want := range map[string]bool{"ANTHROPIC_API_KEY": true, "THEFOLD_AI_API_KEY": true,
		"THEFOLD_DATABASE_URL": false, "PATH": false, "": false, "ANTHROPIC_API_KEY_X": false} {
		if _, ok := lookup(name); ok != want {
			t.Errorf("lookup(%q) found = %v, want %v", name, ok, want)
		}
		if err := a.Check("env:" + name); (err == nil) != want && name != "" {
			t.Errorf("Check(env:%s) = %v", name, err)
		}
	}
	if err := a.Check("vault:anything"); err != nil {
		t.Errorf("a non-env reference: %v", err)
	}
	if _, err := ParseAllow([]string{"[A-"}); err == nil {
		t.Error("bad pattern accepted")
	}
}
