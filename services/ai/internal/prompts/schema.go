package prompts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema is a compiled JSON Schema (draft 2020-12 unless it names another) and its compact
// text, which prompts quote to the model.
type Schema struct {
	compiled *jsonschema.Schema
	text     string
}

// maxViolations caps the violations an error lists: a repair prompt needs the first few,
// not hundreds from one wrong array.
const maxViolations = 20

const schemaURL = "mem://schema.json"

var printer = message.NewPrinter(language.English)

// errNoLoading refuses every external reference: a caller's schema must not make the
// service read files or fetch URLs.
type errNoLoading struct{}

func (errNoLoading) Load(url string) (any, error) {
	return nil, fmt.Errorf("external $ref %q is not allowed: the schema must be self-contained", url)
}

// CompileSchema compiles a JSON Schema, e.g. Complete's caller-supplied json_schema. The
// schema must be self-contained: a $ref to anything outside it is an error.
func CompileSchema(raw []byte) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("the schema is not JSON: %w", err)
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return nil, errors.New("the schema must be a JSON object")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(errNoLoading{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("the schema is invalid: %w", err)
	}
	compiled, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("the schema is invalid: %s", schemaErrorText(err))
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, fmt.Errorf("the schema is not JSON: %w", err)
	}
	return &Schema{compiled: compiled, text: compact.String()}, nil
}

// schemaErrorText keeps the compiler's message but drops the internal resource URL.
func schemaErrorText(err error) string {
	return strings.ReplaceAll(err.Error(), schemaURL, "schema")
}

// Text is the schema as compact JSON.
func (s *Schema) Text() string { return s.text }

// Validate checks a decoded JSON value (from encoding/json, numbers as float64 or
// json.Number) against the schema. The error lists the violations, one per line, each with
// the JSON pointer of the offending value ("at /steps/0/id: …"), so a repair prompt can
// quote it.
func (s *Schema) Validate(v any) error {
	err := s.compiled.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	var lines []string
	seen := map[string]bool{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(lines) >= maxViolations {
			return
		}
		if len(e.Causes) == 0 {
			line := fmt.Sprintf("at %s: %s", pointer(e.InstanceLocation), e.ErrorKind.LocalizedString(printer))
			if !seen[line] {
				seen[line] = true
				lines = append(lines, line)
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return &SchemaError{Violations: lines}
}

// SchemaError is a value that does not match a schema.
type SchemaError struct {
	// Violations are "at <JSON pointer>: <what is wrong>", at most maxViolations.
	Violations []string
}

func (e *SchemaError) Error() string {
	return "the JSON does not match the schema:\n- " + strings.Join(e.Violations, "\n- ")
}

// pointer renders a JSON pointer; the root is "/".
func pointer(tokens []string) string {
	if len(tokens) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return b.String()
}
