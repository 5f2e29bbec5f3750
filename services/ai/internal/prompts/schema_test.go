package prompts

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCompileSchema(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		schema string
		err    string
	}{
		{"object schema", `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`, ""},
		{"local ref", `{"$defs":{"n":{"type":"integer"}},"type":"object","properties":{"a":{"$ref":"#/$defs/n"}}}`, ""},
		{"not JSON", `{"type":`, "not JSON"},
		{"not an object", `[1]`, "JSON object"},
		{"invalid keyword value", `{"type":"nonsense"}`, "invalid"},
		{"file ref refused", `{"$ref":"file:///etc/passwd"}`, "not allowed"},
		{"http ref refused", `{"$ref":"https://example.com/s.json"}`, "not allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, err := CompileSchema([]byte(c.schema))
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if s.Text() == "" || strings.ContainsAny(s.Text(), "\n ") {
					t.Errorf("Text() is not compact JSON: %q", s.Text())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("got %v, want an error containing %q", err, c.err)
			}
		})
	}
}

func TestSchemaValidate(t *testing.T) {
	t.Parallel()
	s, err := CompileSchema([]byte(`{"type":"object","additionalProperties":false,"required":["steps"],
		"properties":{"steps":{"type":"array","items":{"type":"object","required":["id"],"properties":{"id":{"type":"string"},"n":{"type":"integer","maximum":3}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		doc  string
		want []string
	}{
		{"valid", `{"steps":[{"id":"s1","n":2}]}`, nil},
		{"missing required", `{"steps":[{"n":1}]}`, []string{"at /steps/0: missing property 'id'"}},
		{"wrong type and range", `{"steps":[{"id":1},{"id":"x","n":9}]}`, []string{"at /steps/0/id:", "at /steps/1/n:"}},
		{"extra property at the root", `{"steps":[],"x":1}`, []string{"at /:", "'x'"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var v any
			if err := json.Unmarshal([]byte(c.doc), &v); err != nil {
				t.Fatal(err)
			}
			err := s.Validate(v)
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("want a violation")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestEmbeddedSchemas: every RPC's schema is embedded and compiles (mustSchemas panics at
// init otherwise), and each answer schema is a closed object.
func TestEmbeddedSchemas(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"assess_confidence", "assess_complexity", "plan_task", "review_code", "diagnose_failure", "intervene", "decompose_project",
		"revise_project_phase", "review_project", "plan_task_order"} {
		s, ok := schemas[name]
		if !ok {
			t.Errorf("no schema %s", name)
			continue
		}
		if !strings.Contains(s.Text(), `draft/2020-12/schema"`) || !strings.Contains(s.Text(), `"additionalProperties":false`) {
			t.Errorf("%s: not a closed draft 2020-12 object schema", name)
		}
	}
}
