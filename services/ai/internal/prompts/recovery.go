package prompts

import (
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
)

// DiagnoseFailure builds the prompt that classifies a failed attempt. The task and the
// plan are the stable context (they stay the same across a task's attempts); the
// attempts, diagnostics, output and files are this call's.
func DiagnoseFailure(req *aiv1.DiagnoseFailureRequest) (*Prompt, error) {
	return build("DiagnoseFailure", "diagnose_failure", req, "", schemaFor("diagnose_failure"), 4000)
}

// ParseDiagnoseFailure converts DiagnoseFailure's answer. MISSING_CONTEXT needs at least
// one context request (the agent has nothing to fetch otherwise); the lists that do not
// belong to the category are dropped.
func ParseDiagnoseFailure(raw string) (*aiv1.DiagnoseFailureResponse, error) {
	const rpc = "DiagnoseFailure"
	var a struct {
		Reason              string   `json:"reason"`
		Category            string   `json:"category"`
		RecommendedRecovery string   `json:"recommended_recovery"`
		ContextRequests     []string `json:"context_requests"`
		RetryAfterSeconds   int64    `json:"retry_after_seconds"`
	}
	if err := decode(rpc, schemaFor("diagnose_failure"), raw, &a); err != nil {
		return nil, err
	}
	c, err := enum(rpc, "/category", a.Category, categories)
	if err != nil {
		return nil, err
	}
	out := &aiv1.DiagnoseFailureResponse{Category: c, Reason: a.Reason, RecommendedRecovery: a.RecommendedRecovery}
	switch c {
	case aiv1.FailureCategory_FAILURE_CATEGORY_MISSING_CONTEXT:
		out.ContextRequests = nonBlank(a.ContextRequests)
		if len(out.ContextRequests) == 0 {
			return nil, parseErr(rpc, "at /context_requests: category \"missing_context\" needs at least one path or search query to fetch")
		}
	case aiv1.FailureCategory_FAILURE_CATEGORY_ENVIRONMENT_ERROR:
		if a.RetryAfterSeconds > 0 {
			out.RetryAfter = durationpb.New(time.Duration(a.RetryAfterSeconds) * time.Second)
		}
	}
	return out, nil
}

// Intervene builds the prompt that decides what to do after repeated failures.
func Intervene(req *aiv1.InterveneRequest) (*Prompt, error) {
	return build("Intervene", "intervene", req, "", schemaFor("intervene"), 6000)
}

// ParseIntervene converts Intervene's answer: SPLIT_TASK needs at least two subtasks with
// sound keys and dependencies, REWRITE_TASK a new description; fields that do not belong
// to the action are dropped.
func ParseIntervene(raw string) (*aiv1.InterveneResponse, error) {
	const rpc = "Intervene"
	var a struct {
		Reason         string     `json:"reason"`
		Action         string     `json:"action"`
		NewTitle       string     `json:"new_title"`
		NewDescription string     `json:"new_description"`
		Subtasks       []taskJSON `json:"subtasks"`
	}
	if err := decode(rpc, schemaFor("intervene"), raw, &a); err != nil {
		return nil, err
	}
	action, err := enum(rpc, "/action", a.Action, interventions)
	if err != nil {
		return nil, err
	}
	out := &aiv1.InterveneResponse{Action: action, Reason: a.Reason}
	switch action {
	case aiv1.InterventionAction_INTERVENTION_ACTION_REWRITE_TASK:
		if strings.TrimSpace(a.NewDescription) == "" {
			return nil, parseErr(rpc, "at /new_description: action \"rewrite_task\" needs the rewritten task's description")
		}
		out.NewTitle, out.NewDescription = strings.TrimSpace(a.NewTitle), a.NewDescription
	case aiv1.InterventionAction_INTERVENTION_ACTION_SPLIT_TASK:
		if len(a.Subtasks) < 2 {
			return nil, parseErr(rpc, "at /subtasks: action \"split_task\" needs at least two subtasks, got %d", len(a.Subtasks))
		}
		if err := checkProposals(rpc, "/subtasks", a.Subtasks, nil, nil); err != nil {
			return nil, err
		}
		out.Subtasks = tasksFromJSON(a.Subtasks)
	}
	return out, nil
}
