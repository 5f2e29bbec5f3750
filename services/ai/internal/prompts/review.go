package prompts

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// ReviewCode builds the prompt that reviews one task's changes. The changed files share a
// size budget (largest cut first) so a big change still fits.
func ReviewCode(req *aiv1.ReviewCodeRequest) (*Prompt, error) {
	v := struct {
		Task              *aiv1.TaskSpec
		Files             []*aiv1.ReviewFile
		ValidationSummary string
	}{req.GetTask(), req.GetFiles(), req.GetValidationSummary()}
	return build("ReviewCode", "review_code", v, "", schemaFor("review_code"), 8000)
}

// reviewJSON is in the schemas' order: the summary first, the score last.
type reviewJSON struct {
	Summary                string        `json:"summary"`
	Concerns               []concernJSON `json:"concerns"`
	Documentation          string        `json:"documentation"`
	ArchitecturalDecisions []string      `json:"architectural_decisions"`
	MemoriesExtracted      []string      `json:"memories_extracted"`
	QualityScore           int32         `json:"quality_score"`
}

// ParseReviewCode converts ReviewCode's answer. Concerns become Diagnostics with tool
// "review", most serious first.
func ParseReviewCode(raw string) (*aiv1.ReviewCodeResponse, error) {
	const rpc = "ReviewCode"
	var a reviewJSON
	if err := decode(rpc, schemaFor("review_code"), raw, &a); err != nil {
		return nil, err
	}
	concerns, err := concernsFromJSON(rpc, a.Concerns)
	if err != nil {
		return nil, err
	}
	return &aiv1.ReviewCodeResponse{QualityScore: a.QualityScore, Concerns: concerns, Documentation: a.Documentation,
		Summary: a.Summary, MemoriesExtracted: nonBlank(a.MemoriesExtracted)}, nil
}

// ReviewProject builds the prompt that reviews a whole project. Files share a size budget
// (largest cut first, with a visible marker) to fit the context window.
func ReviewProject(req *aiv1.ReviewProjectRequest) (*Prompt, error) {
	v := struct {
		Request  string
		Plan     *aiv1.ProjectPlan
		Outcomes []*aiv1.TaskOutcome
		Files    []*aiv1.ReviewFile
	}{req.GetRequest(), req.GetPlan(), req.GetOutcomes(), req.GetFiles()}
	return build("ReviewProject", "review_project", v, "", schemaFor("review_project"), 16000)
}

// ParseReviewProject converts ReviewProject's answer.
func ParseReviewProject(raw string) (*aiv1.ReviewProjectResponse, error) {
	const rpc = "ReviewProject"
	var a reviewJSON
	if err := decode(rpc, schemaFor("review_project"), raw, &a); err != nil {
		return nil, err
	}
	concerns, err := concernsFromJSON(rpc, a.Concerns)
	if err != nil {
		return nil, err
	}
	return &aiv1.ReviewProjectResponse{QualityScore: a.QualityScore, Concerns: concerns, Documentation: a.Documentation,
		Summary: a.Summary, ArchitecturalDecisions: nonBlank(a.ArchitecturalDecisions),
		MemoriesExtracted: nonBlank(a.MemoriesExtracted)}, nil
}

// concernsFromJSON converts review concerns, checking their paths, and orders them most
// serious first as the proto promises (the model's order kept within a severity).
func concernsFromJSON(rpc string, cs []concernJSON) ([]*typev1.Diagnostic, error) {
	out := make([]*typev1.Diagnostic, 0, len(cs))
	for i, c := range cs {
		at := fmt.Sprintf("/concerns/%d", i)
		sev, err := enum(rpc, at+"/severity", c.Severity, severities)
		if err != nil {
			return nil, err
		}
		if c.Path != "" {
			if err := checkRelPath(c.Path); err != nil {
				return nil, parseErr(rpc, "at %s/path: %v", at, err)
			}
		}
		out = append(out, &typev1.Diagnostic{Path: c.Path, Line: c.Line, Severity: sev, Message: c.Message, Tool: "review"})
	}
	slices.SortStableFunc(out, func(a, b *typev1.Diagnostic) int { return cmp.Compare(b.Severity, a.Severity) })
	return out, nil
}

func nonBlank(ss []string) []string {
	var out []string
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
}
