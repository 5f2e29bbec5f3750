package engine

import (
	"testing"

	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// Only a failed check whose every finding is the environment's is environmental: an error
// of the code's, or a pass, is not.
func TestEnvironmental(t *testing.T) {
	env := &typev1.Diagnostic{Rule: "environment", Severity: typev1.Severity_SEVERITY_WARNING, Message: "environment: the sandbox lacks gcc (cgo needs a C compiler)\nmore"}
	codeErr := &typev1.Diagnostic{Path: "a.go", Line: 3, Severity: typev1.Severity_SEVERITY_ERROR, Message: "undefined: x"}
	lint := &typev1.Diagnostic{Path: "a.go", Line: 4, Severity: typev1.Severity_SEVERITY_WARNING, Rule: "vet"}
	cases := []struct {
		name string
		v    *builderv1.ValidationResult
		want bool
	}{
		{"environment only", &builderv1.ValidationResult{Diagnostics: []*typev1.Diagnostic{env, lint}}, true},
		{"and an error of the code", &builderv1.ValidationResult{Diagnostics: []*typev1.Diagnostic{env, codeErr}}, false},
		{"no environment finding", &builderv1.ValidationResult{Diagnostics: []*typev1.Diagnostic{lint}}, false},
		{"passed", &builderv1.ValidationResult{Passed: true, Diagnostics: []*typev1.Diagnostic{env}}, false},
		{"nothing", nil, false},
	}
	for _, c := range cases {
		if got := environmental(c.v); got != c.want {
			t.Errorf("%s: environmental = %v, want %v", c.name, got, c.want)
		}
	}
	if got := environmentText([]*typev1.Diagnostic{lint, env}); got != "environment: the sandbox lacks gcc (cgo needs a C compiler)" {
		t.Errorf("environmentText = %q", got)
	}
}
