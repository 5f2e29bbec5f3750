package prompts

import (
	"fmt"
	"strings"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
)

// PlanTaskOrder builds the prompt that orders tasks for execution. The answer grows with
// the number of tasks, and so does its cap.
func PlanTaskOrder(req *aiv1.PlanTaskOrderRequest) (*Prompt, error) {
	maxTokens := min(max(2000, 1000+200*len(req.GetTasks())), 32000)
	return build("PlanTaskOrder", "plan_task_order", req, "", schemaFor("plan_task_order"), maxTokens)
}

// ParsePlanTaskOrder converts PlanTaskOrder's answer against the request: every requested
// task exactly once, none before a task of the list it is blocked by. Order is the position
// in the answer, from 1.
func ParsePlanTaskOrder(raw string, req *aiv1.PlanTaskOrderRequest) (*aiv1.PlanTaskOrderResponse, error) {
	const rpc = "PlanTaskOrder"
	var a struct {
		Reasoning string `json:"reasoning"`
		Tasks     []struct {
			TaskID          string `json:"task_id"`
			Reasoning       string `json:"reasoning"`
			Complexity      int32  `json:"complexity"`
			EstimatedTokens int64  `json:"estimated_tokens"`
		} `json:"tasks"`
	}
	if err := decode(rpc, schemaFor("plan_task_order"), raw, &a); err != nil {
		return nil, err
	}
	requested := map[string]*aiv1.OrderableTask{}
	for _, t := range req.GetTasks() {
		requested[t.GetId()] = t
	}
	position := map[string]int{}
	out := &aiv1.PlanTaskOrderResponse{Reasoning: a.Reasoning}
	for i, t := range a.Tasks {
		if _, ok := requested[t.TaskID]; !ok {
			return nil, parseErr(rpc, "at /tasks/%d/task_id: %q is not one of the tasks to order", i, t.TaskID)
		}
		if j, dup := position[t.TaskID]; dup {
			return nil, parseErr(rpc, "at /tasks/%d/task_id: task %q is listed twice (also at /tasks/%d); list each once", i, t.TaskID, j)
		}
		position[t.TaskID] = i
		out.Tasks = append(out.Tasks, &aiv1.TaskOrder{TaskId: t.TaskID, Order: int32(i + 1), Complexity: t.Complexity,
			EstimatedTokens: t.EstimatedTokens, Reasoning: t.Reasoning})
	}
	var missing []string
	for _, t := range req.GetTasks() {
		if _, ok := position[t.GetId()]; !ok {
			missing = append(missing, fmt.Sprintf("%q", t.GetId()))
		}
	}
	if len(missing) > 0 {
		return nil, parseErr(rpc, "at /tasks: every task must be listed once; missing %s", strings.Join(missing, ", "))
	}
	for i, t := range a.Tasks {
		for _, b := range requested[t.TaskID].GetBlockedBy() {
			if j, ok := position[b]; ok && j > i {
				return nil, parseErr(rpc, "at /tasks/%d: task %q is blocked by %q, which comes later (at /tasks/%d); put it after its blockers", i, t.TaskID, b, j)
			}
		}
	}
	return out, nil
}
