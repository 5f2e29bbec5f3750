package prompts

import (
	"fmt"
	"strings"

	"github.com/thefold/thefold/pkg/fence"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
)

// subAgentRPC is the AIService method the sub-agents' prompts and answers belong to.
const subAgentRPC = "RunSubAgents"

// subAgentCaps are the roles' output caps in tokens: what each role's answer needs when it
// is concise, which is what a reader sharing its context window with the code wants.
var subAgentCaps = map[aiv1.SubAgentRole]int{
	aiv1.SubAgentRole_SUB_AGENT_ROLE_PLANNER:     2000,
	aiv1.SubAgentRole_SUB_AGENT_ROLE_IMPLEMENTER: 2000,
	aiv1.SubAgentRole_SUB_AGENT_ROLE_TESTER:      1500,
	aiv1.SubAgentRole_SUB_AGENT_ROLE_REVIEWER:    1200,
	aiv1.SubAgentRole_SUB_AGENT_ROLE_DOCUMENTER:  1000,
	aiv1.SubAgentRole_SUB_AGENT_ROLE_RESEARCHER:  1200,
}

// MergeMaxTokens caps the AI merge's answer.
const MergeMaxTokens = 2500

// maxSubAgentOutputBytes caps one role's output shown to another prompt (its token cap
// keeps it far below).
const maxSubAgentOutputBytes = maxOutputBytes

// SubAgentName is a role's name as prompts and ledger readers see it, e.g. "planner"; ""
// for UNSPECIFIED or an unknown value.
func SubAgentName(r aiv1.SubAgentRole) string {
	if _, ok := subAgentCaps[r]; !ok {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(r.String(), "SUB_AGENT_ROLE_"))
}

// SubAgentTitle is a role's section header in the merged context, e.g. "Planner".
func SubAgentTitle(r aiv1.SubAgentRole) string {
	n := SubAgentName(r)
	if n == "" {
		return ""
	}
	return strings.ToUpper(n[:1]) + n[1:]
}

// SubAgentMaxTokens is a role's output cap in tokens (0 for no role).
func SubAgentMaxTokens(r aiv1.SubAgentRole) int { return subAgentCaps[r] }

// SubAgentInput is the output of a role another role depends on: its Markdown, or Failed
// when it failed (the dependent is told to work without it).
type SubAgentInput struct {
	Role   aiv1.SubAgentRole
	Output string
	Failed bool
}

// Name is the input's role name, for the templates.
func (i SubAgentInput) Name() string { return SubAgentName(i.Role) }

type subAgentView struct {
	repoView
	Role aiv1.SubAgentRole
	Deps []SubAgentInput
}

// Name is the role's name, for the templates.
func (v subAgentView) Name() string { return SubAgentName(v.Role) }

// SubAgent builds role's prompt for req's task: the role's instructions (a system text of
// its own, holding the line "Sub-agent role: <role>"), the task and repository context
// every role shares (the cached prefix), and the outputs of the roles it depends on, fenced
// as data, with a note for each that failed.
func SubAgent(req *aiv1.RunSubAgentsRequest, role aiv1.SubAgentRole, deps []SubAgentInput) (*Prompt, error) {
	name := SubAgentName(role)
	if name == "" {
		return nil, fmt.Errorf("prompts: no sub-agent role %v", role)
	}
	v := subAgentView{
		repoView: repoView{Task: req.GetTask(), Tree: req.GetProjectTree(), Files: req.GetContextFiles(), Memories: req.GetMemories()},
		Role:     role, Deps: deps,
	}
	p := parts{rpc: subAgentRPC, schema: schemaFor("sub_agent_" + name), maxTokens: subAgentCaps[role]}
	var err error
	if p.system, err = render("sub_agent_"+name+".system", v); err != nil {
		return nil, err
	}
	ctx, err := render("sub_agent.context", v)
	if err != nil {
		return nil, err
	}
	p.context = []string{ctx}
	if p.specifics, err = render("sub_agent.specifics", v); err != nil {
		return nil, err
	}
	return assemble(p), nil
}

// FixedTokens counts, with count, the prompt's tokens besides its context blocks: the
// system text and the call's specifics (the answer format included). For a prompt built
// from an empty request that is what a call costs on top of what it reads.
func (p *Prompt) FixedTokens(count func(string) int) int {
	n := 0
	for _, s := range p.System {
		n += count(s.Text)
	}
	if len(p.Messages) > 0 {
		if bs := p.Messages[0].Blocks; len(bs) > 0 {
			n += count(bs[len(bs)-1].Text)
		}
	}
	return n
}

// ContextText is the prompt's stable context (the blocks before the specifics), joined.
func (p *Prompt) ContextText() string {
	if len(p.Messages) == 0 || len(p.Messages[0].Blocks) == 0 {
		return ""
	}
	bs := p.Messages[0].Blocks
	texts := make([]string, 0, len(bs)-1)
	for _, b := range bs[:len(bs)-1] {
		texts = append(texts, b.Text)
	}
	return strings.Join(texts, "\n\n")
}

type plannerJSON struct {
	Steps      []string `json:"steps"`
	Interfaces []string `json:"interfaces"`
	Risks      []string `json:"risks"`
}

type implementerJSON struct {
	PerFileGuidance []struct {
		Path     string `json:"path"`
		Guidance string `json:"guidance"`
	} `json:"per_file_guidance"`
	Pitfalls []string `json:"pitfalls"`
}

type testerJSON struct {
	TestCases []struct {
		Name   string `json:"name"`
		Checks string `json:"checks"`
	} `json:"test_cases"`
	EdgeCases []string `json:"edge_cases"`
	HowToRun  string   `json:"how_to_run"`
}

type reviewerJSON struct {
	Checks   []string `json:"checks"`
	Concerns []string `json:"concerns"`
}

type documenterJSON struct {
	Docs []struct {
		Path           string `json:"path"`
		ContentOutline string `json:"content_outline"`
	} `json:"docs"`
}

type researcherJSON struct {
	Findings      []string `json:"findings"`
	RelevantPaths []string `json:"relevant_paths"`
}

// ParseSubAgent converts role's JSON answer to the Markdown that is the role's output: one
// "### " section per part of the answer, empty parts left out. A reply that breaks the
// role's schema is a *ParseError (a repair round follows).
func ParseSubAgent(role aiv1.SubAgentRole, raw string) (string, error) {
	name := SubAgentName(role)
	if name == "" {
		return "", fmt.Errorf("prompts: no sub-agent role %v", role)
	}
	s := schemaFor("sub_agent_" + name)
	var md roleDoc
	switch role {
	case aiv1.SubAgentRole_SUB_AGENT_ROLE_PLANNER:
		var a plannerJSON
		if err := decode(subAgentRPC, s, raw, &a); err != nil {
			return "", err
		}
		md.numbered("Steps", a.Steps)
		md.bullets("Interfaces", a.Interfaces)
		md.bullets("Risks", a.Risks)
	case aiv1.SubAgentRole_SUB_AGENT_ROLE_IMPLEMENTER:
		var a implementerJSON
		if err := decode(subAgentRPC, s, raw, &a); err != nil {
			return "", err
		}
		items := make([]string, 0, len(a.PerFileGuidance))
		for _, g := range a.PerFileGuidance {
			items = append(items, code(g.Path)+": "+g.Guidance)
		}
		md.bullets("Per file", items)
		md.bullets("Pitfalls", a.Pitfalls)
	case aiv1.SubAgentRole_SUB_AGENT_ROLE_TESTER:
		var a testerJSON
		if err := decode(subAgentRPC, s, raw, &a); err != nil {
			return "", err
		}
		items := make([]string, 0, len(a.TestCases))
		for _, c := range a.TestCases {
			items = append(items, "**"+oneLine(c.Name)+"**: "+c.Checks)
		}
		md.bullets("Test cases", items)
		md.bullets("Edge cases", a.EdgeCases)
		if strings.TrimSpace(a.HowToRun) != "" {
			md.section("How to run", code(a.HowToRun))
		}
	case aiv1.SubAgentRole_SUB_AGENT_ROLE_REVIEWER:
		var a reviewerJSON
		if err := decode(subAgentRPC, s, raw, &a); err != nil {
			return "", err
		}
		md.bullets("Checks", a.Checks)
		md.bullets("Concerns", a.Concerns)
	case aiv1.SubAgentRole_SUB_AGENT_ROLE_DOCUMENTER:
		var a documenterJSON
		if err := decode(subAgentRPC, s, raw, &a); err != nil {
			return "", err
		}
		items := make([]string, 0, len(a.Docs))
		for _, d := range a.Docs {
			items = append(items, code(d.Path)+": "+d.ContentOutline)
		}
		if len(nonBlank(items)) == 0 {
			md.section("Documentation", "No documentation to add or update.")
		}
		md.bullets("Documentation", items)
	case aiv1.SubAgentRole_SUB_AGENT_ROLE_RESEARCHER:
		var a researcherJSON
		if err := decode(subAgentRPC, s, raw, &a); err != nil {
			return "", err
		}
		md.bullets("Findings", a.Findings)
		paths := make([]string, 0, len(a.RelevantPaths))
		for _, p := range a.RelevantPaths {
			paths = append(paths, code(p))
		}
		md.bullets("Relevant paths", paths)
	}
	out := md.String()
	if out == "" {
		return "", parseErr(subAgentRPC, "the answer holds nothing but blank text; give the %s's analysis", name)
	}
	return out, nil
}

// roleDoc builds a role's output. Every text in it is the model's: sanitised (no control
// characters) and kept to one list item each.
type roleDoc struct{ sections []string }

func (m *roleDoc) section(title, body string) {
	m.sections = append(m.sections, "### "+title+"\n"+body)
}

func (m *roleDoc) list(title string, items []string, marker func(int) string) {
	var b strings.Builder
	n := 0
	for _, it := range items {
		it = strings.TrimSpace(fence.Sanitize(it, maxShortBytes))
		if it == "" {
			continue
		}
		n++
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(marker(n) + strings.ReplaceAll(it, "\n", "\n   "))
	}
	if n > 0 {
		m.section(title, b.String())
	}
}

func (m *roleDoc) bullets(title string, items []string) {
	m.list(title, items, func(int) string { return "- " })
}

func (m *roleDoc) numbered(title string, items []string) {
	m.list(title, items, func(i int) string { return fmt.Sprintf("%d. ", i) })
}

func (m *roleDoc) String() string { return strings.Join(m.sections, "\n\n") }

// code shows a path or command as inline code (without backticks of its own, which would
// end it early).
func code(s string) string {
	return "`" + strings.ReplaceAll(oneLine(s), "`", "'") + "`"
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(fence.Sanitize(s, maxShortBytes)), " ")
}

// SubAgentSection is a role's output to merge.
type SubAgentSection struct {
	Role   aiv1.SubAgentRole
	Output string
}

// Name is the section's role name, for the templates.
func (s SubAgentSection) Name() string { return SubAgentName(s.Role) }

// MergeSubAgents builds the prompt of RunSubAgents' AI merge: the task, then the roles'
// outputs (fenced as data, in the team's order), answered in Markdown.
func MergeSubAgents(task *aiv1.TaskSpec, sections []SubAgentSection) (*Prompt, error) {
	v := struct {
		Task     *aiv1.TaskSpec
		Sections []SubAgentSection
	}{task, sections}
	p := parts{rpc: subAgentRPC, maxTokens: MergeMaxTokens, text: true}
	var err error
	if p.system, err = render("merge_sub_agents.system", v); err != nil {
		return nil, err
	}
	ctx, err := render("merge_sub_agents.context", v)
	if err != nil {
		return nil, err
	}
	p.context = []string{ctx}
	if p.specifics, err = render("merge_sub_agents.specifics", v); err != nil {
		return nil, err
	}
	return assemble(p), nil
}

// ParseMerge takes the AI merge's Markdown answer: sanitised, a fence around the whole
// answer removed. A blank answer is an error (RunSubAgents then concatenates).
func ParseMerge(raw string) (string, error) {
	s := strings.TrimSpace(fence.Sanitize(raw, 0))
	if strings.HasPrefix(s, "```") && strings.HasSuffix(s, "```") && strings.Count(s, "```") == 2 {
		s = strings.TrimSpace(strings.TrimSuffix(s, "```"))
		if _, body, ok := strings.Cut(s, "\n"); ok {
			s = strings.TrimSpace(body)
		} else {
			s = ""
		}
	}
	if s == "" {
		return "", fmt.Errorf("%s merge answer: blank", subAgentRPC)
	}
	return s, nil
}
