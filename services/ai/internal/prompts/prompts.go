// Package prompts turns each AIService request into the prompt sent to a model and the
// model's JSON answer back into the response: embedded text/template prompts, embedded JSON
// Schemas for the answers, sanitising and fencing of untrusted text, extraction and
// validation of the JSON a model returns, and the repair round's messages.
//
// Prompts are laid out for prompt caching: the RPC family's instructions, then stable
// guidance (skills, conventions, patterns), then the stable context (task, repository,
// dependency files, memories) — each marked as a cache breakpoint — and only then the call's
// specifics and the answer format. Everything is byte-for-byte deterministic.
package prompts

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"github.com/thefold/thefold/pkg/fence"
	"strings"
	"text/template"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/thefold/thefold/services/ai/internal/llm"
)

// Prompt is what the engine sends: llm.Request's System and Messages, the schema the answer
// must match and a cap on the answer's length.
type Prompt struct {
	// RPC is the AIService method, e.g. "PlanTask".
	RPC string
	// System: the instructions (cached), then skills/conventions/patterns (cached) if any.
	System []llm.Segment
	// Messages: one user message of the stable context (cached block) and the call's
	// specifics with the answer format.
	Messages []llm.Message
	Schema   *Schema
	// MaxTokens caps the reply.
	MaxTokens int
	// Text: the answer is not one JSON object (code comes in code blocks), so no provider
	// JSON mode may be asked for.
	Text bool
	// drop are indexes of context blocks (in Messages[0]) that Fit may leave out, first
	// first; dropNames says what each is.
	drop      []int
	dropNames map[int]string
}

// ParseError is a model answer that cannot be used: no JSON, a schema violation, or a
// semantic one (a plan cycle, edits that do not apply). The engine gives it one repair
// round (see Repair) before failing the call.
type ParseError struct {
	// RPC is the AIService method whose answer it is.
	RPC string
	Err error
}

func (e *ParseError) Error() string { return e.RPC + " answer: " + e.Err.Error() }

func (e *ParseError) Unwrap() error { return e.Err }

func parseErr(rpc, format string, args ...any) *ParseError {
	return &ParseError{RPC: rpc, Err: fmt.Errorf(format, args...)}
}

//go:embed templates/*.tmpl
var templateFS embed.FS

//go:embed schemas/*.json
var schemaFS embed.FS

var tmpl = template.Must(template.New("prompts").Funcs(funcs).ParseFS(templateFS, "templates/*.tmpl"))

// schemas holds the embedded answer schemas by file name without ".json".
var schemas = mustSchemas()

func mustSchemas() map[string]*Schema {
	entries, err := schemaFS.ReadDir("schemas")
	if err != nil {
		panic(err)
	}
	out := map[string]*Schema{}
	for _, e := range entries {
		raw, err := schemaFS.ReadFile("schemas/" + e.Name())
		if err != nil {
			panic(err)
		}
		s, err := CompileSchema(raw)
		if err != nil {
			panic(fmt.Sprintf("schemas/%s: %v", e.Name(), err))
		}
		out[strings.TrimSuffix(e.Name(), ".json")] = s
	}
	return out
}

func schemaFor(name string) *Schema {
	s, ok := schemas[name]
	if !ok {
		panic("prompts: no schema " + name)
	}
	return s
}

// render executes one named template.
func render(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := tmpl.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("prompt template %s: %w", name, err)
	}
	return strings.TrimSpace(b.String()), nil
}

// parts are the rendered pieces of a prompt before assembly.
type parts struct {
	rpc      string
	system   string
	guidance string
	// context is the stable context, one block each; the last ends the cached prefix.
	context   []string
	specifics string
	schema    *Schema
	maxTokens int
	// text: the specifics say how to answer; no JSON answer format is added.
	text bool
}

// assemble lays the parts out for caching (see the package comment) and ends the last
// block with the answer format.
func assemble(p parts) *Prompt {
	out := &Prompt{RPC: p.rpc, Schema: p.schema, MaxTokens: p.maxTokens, Text: p.text}
	out.System = []llm.Segment{{Text: p.system, Cache: true}}
	if p.guidance != "" {
		out.System = append(out.System, llm.Segment{Text: p.guidance, Cache: true})
	}
	specifics := p.specifics
	if !p.text {
		specifics = answerFormat(p.schema)
		if p.specifics != "" {
			specifics = p.specifics + "\n\n" + specifics
		}
	}
	var blocks []llm.Block
	for i, c := range p.context {
		// The first block (the task) and the last end cacheable prefixes: a later call that
		// shares the task but not the files still reads the first.
		cache := i == 0 || i == len(p.context)-1
		blocks = append(blocks, llm.Block{Kind: llm.BlockText, Text: c, Cache: cache})
	}
	blocks = append(blocks, llm.Text(specifics))
	out.Messages = []llm.Message{{Role: llm.RoleUser, Blocks: blocks}}
	return out
}

// build renders the templates "<name>.system", "<name>.context" and "<name>.specifics"
// (the last two may be empty) and assembles them.
func build(rpc, name string, data any, guidance string, schema *Schema, maxTokens int) (*Prompt, error) {
	p, err := renderParts(rpc, name, data, guidance, schema, maxTokens)
	if err != nil {
		return nil, err
	}
	return assemble(p), nil
}

// renderParts is build before assembly, for a prompt that adds context blocks of its own.
func renderParts(rpc, name string, data any, guidance string, schema *Schema, maxTokens int) (parts, error) {
	p := parts{rpc: rpc, guidance: guidance, schema: schema, maxTokens: maxTokens}
	var err error
	if p.system, err = render(name+".system", data); err != nil {
		return p, err
	}
	ctx, err := render(name+".context", data)
	if err != nil {
		return p, err
	}
	if ctx != "" {
		p.context = []string{ctx}
	}
	if p.specifics, err = render(name+".specifics", data); err != nil {
		return p, err
	}
	return p, nil
}

func answerFormat(s *Schema) string {
	return "Answer with one JSON object matching this JSON Schema, and nothing else (no prose, no markdown fence):\n" + s.Text()
}

// decode extracts the JSON object from a reply, validates it against the schema and
// unmarshals it into out. Every failure is a *ParseError.
func decode(rpc string, s *Schema, raw string, out any) error {
	b, err := ExtractJSON(raw)
	if err != nil {
		return &ParseError{RPC: rpc, Err: err}
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return parseErr(rpc, "the reply is not valid JSON: %v", err)
	}
	if err := s.Validate(v); err != nil {
		return &ParseError{RPC: rpc, Err: err}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return parseErr(rpc, "the JSON has a value of the wrong type: %v", err)
	}
	return nil
}

// maxRepairEcho caps the bad reply quoted back in a repair round.
const maxRepairEcho = 256 << 10

// Repair returns the messages to append to p's messages for one repair round: the model's
// unusable reply as its own turn, and a user turn quoting what was wrong and asking for the
// corrected JSON object only.
func Repair(p *Prompt, badReply string, problem error) []llm.Message {
	reply := strings.TrimSpace(badReply)
	if reply == "" {
		// Providers reject empty assistant turns.
		reply = "(empty reply)"
	}
	reply = fence.Truncate(reply, maxRepairEcho)
	var b strings.Builder
	b.WriteString("That answer cannot be used:\n")
	msg := "unknown problem"
	if problem != nil {
		msg = problem.Error()
	}
	b.WriteString(fence.Sanitize(msg, maxOutputBytes))
	b.WriteString("\n\nAnswer again with the complete, corrected JSON object only: no prose, no markdown fence")
	if p != nil && p.Schema != nil {
		b.WriteString(", matching the JSON Schema given above")
	}
	b.WriteString(".")
	return []llm.Message{
		{Role: llm.RoleAssistant, Blocks: []llm.Block{llm.Text(reply)}},
		llm.UserText(b.String()),
	}
}
