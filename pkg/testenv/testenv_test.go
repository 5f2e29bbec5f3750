package testenv

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestInCI(t *testing.T) {
	for v, want := range map[string]bool{"true": true, "1": true, "": false, "false": false, "nonsense": false} {
		t.Setenv("CI", v)
		if got := InCI(); got != want {
			t.Errorf("CI=%q: InCI = %v, want %v", v, got, want)
		}
	}
}

func TestLivenessStretchesByTheSlack(t *testing.T) {
	for _, c := range []struct {
		ci, slack string
		want      time.Duration
	}{
		{"", "", 2 * time.Minute},
		{"true", "", 4 * time.Minute},
		{"true", "1.5", 90 * time.Second},
		{"", "3", 3 * time.Minute},
	} {
		t.Setenv("CI", c.ci)
		t.Setenv("THEFOLD_E2E_SLACK", c.slack)
		if got := Liveness(time.Minute); got != c.want {
			t.Errorf("CI=%q THEFOLD_E2E_SLACK=%q: Liveness(1m) = %s, want %s", c.ci, c.slack, got, c.want)
		}
	}
	for _, bad := range []string{"0.5", "fast", "-2"} {
		t.Setenv("THEFOLD_E2E_SLACK", bad)
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "THEFOLD_E2E_SLACK") {
					t.Errorf("THEFOLD_E2E_SLACK=%q: recovered %v, want a panic naming the variable", bad, r)
				}
			}()
			Liveness(time.Minute)
		}()
	}
}
