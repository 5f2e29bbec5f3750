package main

import (
	"testing"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
)

// The progress line: the build's phase, the step of those known (never past the total), the
// file, and a fix round's outcome.
func TestProgressText(t *testing.T) {
	implement := builderv1.BuildPhase_BUILD_PHASE_IMPLEMENT
	for _, c := range []struct {
		p    *agentv1.JobProgress
		want string
	}{
		{&agentv1.JobProgress{BuildPhase: implement, CurrentStep: 1, TotalSteps: 3, FilePath: "health.go"}, "implement step 1/3 health.go"},
		{&agentv1.JobProgress{BuildPhase: builderv1.BuildPhase_BUILD_PHASE_INTEGRATE, CurrentStep: 4, TotalSteps: 3}, "integrate step 4/4"},
		{&agentv1.JobProgress{BuildPhase: implement, CurrentStep: 2, TotalSteps: 3, FilePath: "a.go", FixRound: 1}, "implement step 2/3 a.go · fix round 1 still failing"},
		{&agentv1.JobProgress{BuildPhase: implement, CurrentStep: 2, TotalSteps: 3, FilePath: "a.go", FixRound: 2, FixPassed: true}, "implement step 2/3 a.go · fix round 2 fixed"},
	} {
		if got := progressText(c.p); got != c.want {
			t.Errorf("%v: %q, want %q", c.p, got, c.want)
		}
	}
}
