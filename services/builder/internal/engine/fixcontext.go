package engine

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/builder/internal/store"
)

// What a fix round is told beside the file's errors: the errors a later step of the build
// will fix, and the file's earlier rounds.

const (
	// maxDiagnostics is the ai service's bound on a list of diagnostics.
	maxDiagnostics = 200
	// maxPreviousRounds is the contract's bound on FixFileRequest.previous_rounds.
	maxPreviousRounds = 20
	// maxRoundErrors bounds the diagnostics told of one earlier round, maxRoundText (bytes)
	// its explanation and error (the ai service's bound).
	maxRoundErrors = 50
	maxRoundText   = 64 << 10
)

// laterChanges are the files that a later, not yet finished file step of the build will
// modify or delete, each with the first such step: their errors are that step's to fix.
func (r *run) laterChanges(st *store.Step) map[string]*store.Step {
	out := map[string]*store.Step{}
	for _, o := range r.steps {
		if o.StepNumber <= st.StepNumber || o.Kind != builderv1.StepKind_STEP_KIND_FILE || o.Path == st.Path ||
			(o.Status != stepPending && o.Status != stepRunning) ||
			(o.Action != typev1.FileAction_FILE_ACTION_MODIFY && o.Action != typev1.FileAction_FILE_ACTION_DELETE) {
			continue
		}
		if _, ok := out[o.Path]; !ok {
			out[o.Path] = o
		}
	}
	return out
}

// splitExpected splits diagnostics ds of st's file: expected are the error diagnostics in
// other files that a later step changes (laterChanges), rest everything else.
func (r *run) splitExpected(st *store.Step, ds []*typev1.Diagnostic) (rest, expected []*typev1.Diagnostic) {
	later := r.laterChanges(st)
	for _, d := range ds {
		if _, ok := later[d.Path]; ok && d.Path != "" && d.Severity >= typev1.Severity_SEVERITY_ERROR {
			expected = append(expected, d)
		} else {
			rest = append(rest, d)
		}
	}
	return rest, expected
}

// stepPassed says whether st's file passes for its step: its validation passed, or the
// only errors left are expected ones (a later step's to fix; the integrate phase's full
// validation still checks everything). deferred describes the expected errors left when
// it passes with some, for the build's log.
func (r *run) stepPassed(st *store.Step) (ok bool, deferred string) {
	v := st.Validation
	rest, expected := r.splitExpected(st, v.GetDiagnostics())
	ok = v.GetPassed() ||
		(len(expected) > 0 && !slices.ContainsFunc(rest, func(d *typev1.Diagnostic) bool { return d.Severity >= typev1.Severity_SEVERITY_ERROR }))
	if !ok || len(expected) == 0 {
		return ok, ""
	}
	return true, r.describeExpected(st, expected)
}

// describeExpected names the expected errors and the steps that will change their files.
func (r *run) describeExpected(st *store.Step, expected []*typev1.Diagnostic) string {
	later := r.laterChanges(st)
	var files []string
	for _, d := range expected {
		o := later[d.Path]
		f := fmt.Sprintf("%s (step %d %s)", d.Path, o.StepNumber, strings.ToLower(strings.TrimPrefix(o.Action.String(), "FILE_ACTION_")))
		if !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	return fmt.Sprintf("%s passes for its step: %d error(s) left in files later steps change, left to them and to the integrate phase's validation: %s; %s",
		st.Path, len(expected), strings.Join(files, ", "), summarize(expected))
}

// previousRounds is the history of st's file for a fix: the fix rounds of the earlier
// steps on the same file and st's own, oldest first, numbered from 1, the last
// maxPreviousRounds of them. The errors left after each are those the fix is asked about
// (the expected ones are told apart once, in the request).
func (r *run) previousRounds(st *store.Step) []*aiv1.FixHistory {
	var rounds []*builderv1.FixRound
	for _, o := range r.steps {
		if o.StepNumber < st.StepNumber && o.Path == st.Path {
			rounds = append(rounds, o.FixRounds...)
		}
	}
	rounds = append(rounds, st.FixRounds...)
	var out []*aiv1.FixHistory
	for i, fr := range rounds {
		left, _ := r.splitExpected(st, fr.DiagnosticsAfter)
		out = append(out, &aiv1.FixHistory{Round: int32(i + 1), Explanation: cutBytes(fr.Explanation, maxRoundText),
			Error: cutBytes(fr.Error, maxRoundText), ErrorsAfter: errorsOnly(left, maxRoundErrors)})
	}
	if len(out) > maxPreviousRounds {
		out = out[len(out)-maxPreviousRounds:]
	}
	return out
}

// errorsOnly is the first n error diagnostics of ds.
func errorsOnly(ds []*typev1.Diagnostic, n int) []*typev1.Diagnostic {
	var out []*typev1.Diagnostic
	for _, d := range ds {
		if d.Severity >= typev1.Severity_SEVERITY_ERROR && len(out) < n {
			out = append(out, d)
		}
	}
	return out
}

// firstN is at most n of ds.
func firstN(ds []*typev1.Diagnostic, n int) []*typev1.Diagnostic {
	if len(ds) > n {
		return ds[:n]
	}
	return ds
}

// cutBytes is at most n bytes of s, cut at a character.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
