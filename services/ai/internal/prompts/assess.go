package prompts

import (
	"strings"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
)

// repoView is the stable context most RPCs share: the task and what the repository holds.
type repoView struct {
	Task     *aiv1.TaskSpec
	Tree     []string
	Files    []*aiv1.ContextFile
	Memories []*aiv1.MemoryFragment
	Strategy string
}

// AssessConfidence builds the prompt that judges whether a task is clear enough to start.
func AssessConfidence(req *aiv1.AssessConfidenceRequest) (*Prompt, error) {
	v := repoView{Task: req.GetTask(), Tree: req.GetProjectTree(), Files: req.GetContextFiles(), Memories: req.GetMemories()}
	return build("AssessConfidence", "assess_confidence", v, "", schemaFor("assess_confidence"), 4000)
}

// ParseAssessConfidence converts AssessConfidence's answer. CLARIFY needs questions and
// BREAK_DOWN at least two subtasks (with sound keys and dependencies); the lists that do
// not belong to the decision are dropped.
func ParseAssessConfidence(raw string) (*aiv1.AssessConfidenceResponse, error) {
	const rpc = "AssessConfidence"
	var a struct {
		Reasoning  string     `json:"reasoning"`
		Confidence int32      `json:"confidence"`
		Decision   string     `json:"decision"`
		Questions  []string   `json:"questions"`
		Subtasks   []taskJSON `json:"subtasks"`
	}
	if err := decode(rpc, schemaFor("assess_confidence"), raw, &a); err != nil {
		return nil, err
	}
	d, err := enum(rpc, "/decision", a.Decision, decisions)
	if err != nil {
		return nil, err
	}
	out := &aiv1.AssessConfidenceResponse{Confidence: a.Confidence, Decision: d, Reasoning: a.Reasoning}
	switch d {
	case aiv1.ConfidenceDecision_CONFIDENCE_DECISION_CLARIFY:
		for _, q := range a.Questions {
			if strings.TrimSpace(q) != "" {
				out.Questions = append(out.Questions, q)
			}
		}
		if len(out.Questions) == 0 {
			return nil, parseErr(rpc, "at /questions: decision \"clarify\" needs at least one question")
		}
	case aiv1.ConfidenceDecision_CONFIDENCE_DECISION_BREAK_DOWN:
		if len(a.Subtasks) < 2 {
			return nil, parseErr(rpc, "at /subtasks: decision \"break_down\" needs at least two subtasks, got %d", len(a.Subtasks))
		}
		if err := checkProposals(rpc, "/subtasks", a.Subtasks, nil, nil); err != nil {
			return nil, err
		}
		out.SuggestedSubtasks = tasksFromJSON(a.Subtasks)
	}
	return out, nil
}

// AssessComplexity builds the prompt that rates a task and suggests its model.
func AssessComplexity(req *aiv1.AssessComplexityRequest) (*Prompt, error) {
	v := repoView{Task: req.GetTask(), Tree: req.GetProjectTree(), Files: req.GetContextFiles()}
	return build("AssessComplexity", "assess_complexity", v, "", schemaFor("assess_complexity"), 2000)
}

// ParseAssessComplexity converts AssessComplexity's answer.
func ParseAssessComplexity(raw string) (*aiv1.AssessComplexityResponse, error) {
	const rpc = "AssessComplexity"
	var a struct {
		Reasoning       string   `json:"reasoning"`
		Complexity      int32    `json:"complexity"`
		Tier            int32    `json:"tier"`
		Tags            []string `json:"tags"`
		BudgetMode      string   `json:"budget_mode"`
		EstimatedTokens int64    `json:"estimated_tokens"`
	}
	if err := decode(rpc, schemaFor("assess_complexity"), raw, &a); err != nil {
		return nil, err
	}
	mode, err := enum(rpc, "/budget_mode", a.BudgetMode, budgetModes)
	if err != nil {
		return nil, err
	}
	return &aiv1.AssessComplexityResponse{Complexity: a.Complexity, Tier: a.Tier, Tags: a.Tags, BudgetMode: mode,
		EstimatedTokens: a.EstimatedTokens, Reasoning: a.Reasoning}, nil
}
