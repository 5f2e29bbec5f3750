package linearsync

import (
	"errors"
	"fmt"
	"strings"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/linear"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// pushed are the task statuses written back to Linear.
var pushed = []tasksv1.TaskStatus{tasksv1.TaskStatus_TASK_STATUS_IN_PROGRESS, tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW,
	tasksv1.TaskStatus_TASK_STATUS_DONE, tasksv1.TaskStatus_TASK_STATUS_BLOCKED}

// push writes the status of each synced issue's task that changed since it was last written:
// a state and, where it says more, a comment. The candidates come from one listing of the
// connection's Linear tasks in the statuses written back.
func (x *syncRun) push() error {
	tasks := map[string]*tasksv1.Task{}
	token := ""
	for range maxTaskPages {
		resp, err := x.s.tasks.ListTasks(x.ctx, &tasksv1.ListTasksRequest{Repo: x.rec.Repo, Source: tasksv1.TaskSource_TASK_SOURCE_LINEAR,
			Statuses: pushed, PageSize: 200, PageToken: token})
		if err != nil {
			return err
		}
		for _, t := range resp.GetTasks() {
			tasks[t.GetId()] = t
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(tasks) == 0 {
		return nil
	}
	recs, err := x.s.st.LinearIssues(x.ctx, x.rec.Id)
	if err != nil {
		return err
	}
	for _, r := range recs {
		task := tasks[r.TaskID]
		if task == nil || statusName(task.GetStatus()) == r.PushedStatus {
			continue
		}
		st := task.GetStatus()
		if err := x.pushStatus(r, task); err != nil {
			if linear.IsRetryable(err) || errors.Is(err, linear.ErrUnauthorized) {
				return err
			}
			x.problem("%s: its status %s could not be written to Linear: %v", r.Identifier, statusName(st), err)
			continue
		}
		r.PushedStatus = statusName(st)
		r.TaskUpdatedAt = task.GetUpdateTime().AsTime()
		if err := x.s.st.PutLinearIssue(x.ctx, r); err != nil {
			return err
		}
		x.out.Pushed++
	}
	return nil
}

// maxTaskPages bounds the listing of a connection's tasks (200 each).
const maxTaskPages = 50

// pushStatus writes task's status to r's issue: in progress and in review move it to a
// started state (in review: one named "In Review" where the team has it, with a comment
// linking the pull request), done to a completed state; blocked leaves the state and
// comments the reason.
func (x *syncRun) pushStatus(r *store.LinearIssueRecord, task *tasksv1.Task) error {
	var (
		stateType, prefer, comment string
	)
	switch task.GetStatus() {
	case tasksv1.TaskStatus_TASK_STATUS_IN_PROGRESS:
		stateType, prefer = linear.StateStarted, "in progress"
	case tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW:
		stateType, prefer = linear.StateStarted, "in review"
		comment = "TheFold finished this task; it waits for review."
		if pr := task.GetPullRequest(); pr.GetNumber() > 0 {
			comment = fmt.Sprintf("TheFold opened a pull request for review: %s#%d %s", pr.GetRepo(), pr.GetNumber(), pr.GetUrl())
		}
	case tasksv1.TaskStatus_TASK_STATUS_DONE:
		stateType, prefer = linear.StateCompleted, "done"
	case tasksv1.TaskStatus_TASK_STATUS_BLOCKED:
		comment = "TheFold is blocked on this task: " + firstNonEmpty(task.GetStatusReason(), "no reason was given")
	}
	// An issue people completed or canceled in Linear is not moved back.
	if stateType != "" && r.StateType != linear.StateCompleted && r.StateType != linear.StateCanceled {
		state, err := x.state(r.TeamID, stateType, prefer)
		if err != nil {
			return err
		}
		if state != nil && state.Name != r.StateName {
			if _, err := x.client.UpdateIssueState(x.ctx, r.IssueID, state.ID); err != nil {
				return err
			}
			r.StateName, r.StateType = state.Name, state.Type
		}
	}
	if comment != "" {
		if _, err := x.client.CreateComment(x.ctx, r.IssueID, comment); err != nil {
			return err
		}
	}
	return nil
}

// state is the team's workflow state of stateType to move an issue to: the one named
// prefer (any case) when there is one, else the first of that type; nil when the team has
// none.
func (x *syncRun) state(team, stateType, prefer string) (*linear.WorkflowState, error) {
	if x.teams == nil {
		teams, err := x.client.Teams(x.ctx)
		if err != nil {
			return nil, err
		}
		x.teams = teams
	}
	for _, t := range x.teams {
		if t.ID != team {
			continue
		}
		var first *linear.WorkflowState
		for i, s := range t.States {
			if s.Type != stateType {
				continue
			}
			if strings.EqualFold(s.Name, prefer) {
				return &t.States[i], nil
			}
			if first == nil {
				first = &t.States[i]
			}
		}
		return first, nil
	}
	return nil, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
