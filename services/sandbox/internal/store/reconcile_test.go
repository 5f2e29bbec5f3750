package store

import (
	"maps"
	"strings"
	"testing"
)

func TestLiveNamesOnlyCreatingAndReadySandboxes(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	mk := func() string {
		sb, _, err := s.Create(ctx, newSandbox("alice"), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		return sb.Id
	}
	creating, ready, failed, destroyed := mk(), mk(), mk(), mk()
	if err := s.MarkReady(ctx, ready, "", "", "go"); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkFailed(ctx, failed, "boom"); err != nil {
		t.Fatal(err)
	}
	if err := s.Destroyed(ctx, destroyed); err != nil {
		t.Fatal(err)
	}
	other, _, err := s.Create(ctx, newSandbox("bob"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	unknown := "00000000-0000-4000-8000-000000000000"
	upper := strings.ToUpper(ready)

	got, err := s.Live(ctx, []string{creating, ready, failed, destroyed, other.Id, unknown, "not-a-uuid", "", upper, ready})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{creating: true, ready: true, other.Id: true, upper: true}
	if !maps.Equal(got, want) {
		t.Errorf("Live = %v, want %v", got, want)
	}

	if got, err := s.Live(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("Live(nil) = %v, %v", got, err)
	}
}
