package mcpserver

import (
	"context"
	"fmt"
	"strings"

	mcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/validate"
)

type PlanProjectInput struct {
	Repo        string `json:"repo" jsonschema:"the repository, owner/name"`
	Request     string `json:"request" jsonschema:"the whole request, in the person's words"`
	Conventions string `json:"conventions,omitempty" jsonschema:"conventions every task follows (stack, layout, style); empty lets the planner derive them from the repository"`
}

type StartProjectInput struct {
	ProjectID string `json:"project_id" jsonschema:"the planned project's id (plan_project)"`
	Confirm   bool   `json:"confirm" jsonschema:"must be true: it says the person read the plan and said to start it. Never pass true on your own judgement."`
}

func checkPlanProject(in PlanProjectInput) (*agentv1.PlanProjectRequest, error) {
	repo := strings.TrimSpace(in.Repo)
	if err := validate.Repo("repo", repo, true); err != nil {
		return nil, err
	}
	req, err := validate.RequiredText("request", in.Request, maxText)
	if err != nil {
		return nil, err
	}
	conv := strings.TrimSpace(in.Conventions)
	if err := validate.MaxLen("conventions", conv, maxText); err != nil {
		return nil, err
	}
	return &agentv1.PlanProjectRequest{Repo: repo, Request: req, Conventions: conv}, nil
}

func (t *tools) planProject(ctx context.Context, _ *mcp.CallToolRequest, in PlanProjectInput) (Project, string, error) {
	req, err := checkPlanProject(in)
	if err != nil {
		return Project{}, "", callError("", err)
	}
	resp, err := t.c.Projects().PlanProject(ctx, req)
	if err != nil {
		return Project{}, "", callError("plan the project", err)
	}
	v := projectView(resp.GetProject())
	return v, planText(v), nil
}

// planText is a plan as the person should read it before saying to start it.
func planText(v Project) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Project %s for %s (%s): %s\n", v.ID, v.Repo, v.Status, v.Description)
	for _, ph := range v.Phases {
		fmt.Fprintf(&b, "\nPhase %d: %s\n", ph.Number, ph.Name)
		for _, task := range ph.Tasks {
			fmt.Fprintf(&b, "  - %s\n", task.Title)
		}
	}
	if v.Next != "" {
		b.WriteString("\n" + v.Next)
	}
	return b.String()
}

func checkStartProject(in StartProjectInput) (string, error) {
	projectID, err := id("project_id", in.ProjectID)
	if err != nil {
		return "", err
	}
	if !in.Confirm {
		return "", errs.Invalid("confirm", "must be true: start a project only after the person read its plan and said to start it")
	}
	return projectID, nil
}

func (t *tools) startProject(ctx context.Context, _ *mcp.CallToolRequest, in StartProjectInput) (Project, string, error) {
	projectID, err := checkStartProject(in)
	if err != nil {
		return Project{}, "", callError("", err)
	}
	resp, err := t.c.Projects().StartProject(ctx, &agentv1.StartProjectRequest{Id: projectID})
	if err != nil {
		return Project{}, "", callError("start the project", err)
	}
	v := projectView(resp.GetProject())
	return v, fmt.Sprintf("Started project %s on %s (%s): %d tasks in %d phases. Its one review comes to the person when all phases ran.",
		v.ID, v.Repo, v.Status, v.TaskCount, len(v.Phases)), nil
}
