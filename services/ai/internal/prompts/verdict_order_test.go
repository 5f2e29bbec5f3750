package prompts

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// propertyOrder returns the property names of the object schema at path (keys into the
// schema, e.g. "properties", "tasks", "items"), in the order the schema's text has them.
func propertyOrder(t *testing.T, text string, path ...string) []string {
	t.Helper()
	raw := json.RawMessage(text)
	for _, k := range append(path, "properties") {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			t.Fatalf("at %s: %v", k, err)
		}
		raw = obj[k]
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("properties at %v is not an object", path)
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// A model without reasoning thinks as it writes: every answer schema puts its reasoning
// field before the verdict it justifies, in the schema text the prompt shows.
func TestReasoningBeforeVerdicts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		schema    string
		path      []string
		reasoning string
		verdicts  []string
	}{
		{"assess_confidence", nil, "reasoning", []string{"confidence", "decision", "questions", "subtasks"}},
		{"assess_complexity", nil, "reasoning", []string{"complexity", "tier", "tags", "budget_mode", "estimated_tokens"}},
		{"review_code", nil, "summary", []string{"quality_score"}},
		{"review_code", nil, "concerns", []string{"quality_score"}},
		{"review_project", nil, "summary", []string{"quality_score"}},
		{"review_project", nil, "concerns", []string{"quality_score"}},
		{"diagnose_failure", nil, "reason", []string{"category", "recommended_recovery", "context_requests", "retry_after_seconds"}},
		{"intervene", nil, "reason", []string{"action", "new_title", "new_description", "subtasks"}},
		{"revise_project_phase", nil, "reasoning", []string{"changed", "phase"}},
		{"plan_task_order", nil, "reasoning", []string{"tasks"}},
		{"plan_task_order", []string{"properties", "tasks", "items"}, "reasoning", []string{"complexity", "estimated_tokens"}},
	}
	for _, c := range cases {
		t.Run(c.schema+"/"+strings.Join(c.path, "/")+"/"+c.reasoning, func(t *testing.T) {
			t.Parallel()
			s := schemaFor(c.schema)
			// The prompt quotes Text(): check the order there, not in the file.
			if !strings.Contains(answerFormat(s), s.Text()) {
				t.Fatal("the answer format does not quote the schema text")
			}
			order := propertyOrder(t, s.Text(), c.path...)
			r := slices.Index(order, c.reasoning)
			if r < 0 {
				t.Fatalf("no %q in %v", c.reasoning, order)
			}
			for _, v := range c.verdicts {
				if i := slices.Index(order, v); i < 0 || i < r {
					t.Errorf("%q at %d, want it after %q (%d): %v", v, i, c.reasoning, r, order)
				}
			}
		})
	}
	// The score is what a review ends with.
	for _, name := range []string{"review_code", "review_project"} {
		if order := propertyOrder(t, schemaFor(name).Text()); order[len(order)-1] != "quality_score" {
			t.Errorf("%s: properties %v, want quality_score last", name, order)
		}
	}
}

// The schema text is the file compacted: the order written is the order shown.
func TestSchemaTextKeepsOrder(t *testing.T) {
	t.Parallel()
	raw, err := schemaFS.ReadFile("schemas/review_code.json")
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Compact(&want, raw); err != nil {
		t.Fatal(err)
	}
	if got := schemaFor("review_code").Text(); got != want.String() {
		t.Errorf("Text() = %s\nwant the file compacted: %s", got, want.String())
	}
}

// Answers written in the old order (the verdict first), and without the fields a schema
// leaves optional, still parse: the order is a request to the model, not a rule.
func TestVerdictFirstAnswersStillParse(t *testing.T) {
	t.Parallel()
	if r, err := ParseReviewCode(`{"quality_score": 6, "concerns": [], "documentation": "", "summary": "fine"}`); err != nil || r.QualityScore != 6 {
		t.Errorf("review: %v, %v", r, err)
	}
	if r, err := ParseAssessConfidence(`{"confidence": 90, "decision": "proceed", "reasoning": "clear"}`); err != nil || r.Confidence != 90 {
		t.Errorf("confidence: %v, %v", r, err)
	}
	if r, err := ParseIntervene(`{"action": "escalate", "reason": "needs a human"}`); err != nil || r.Reason != "needs a human" {
		t.Errorf("intervene: %v, %v", r, err)
	}
	if r, err := ParseDiagnoseFailure(`{"category": "implementation_error", "reason": "typo", "recommended_recovery": "fix it"}`); err != nil || r.Reason != "typo" {
		t.Errorf("diagnose: %v, %v", r, err)
	}
}
