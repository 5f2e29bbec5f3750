package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	mcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/thefold/thefold/pkg/client"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/validate"
)

// tools are the handlers, calling TheFold through c.
type tools struct {
	c *client.Client
}

// Input limits checked here before a call; the services check the rest.
const (
	maxTitle = 500
	maxText  = 20000
)

// register adds every tool to s. Read-only tools say so (ReadOnlyHint), so a client may run
// them without asking; none of the others is destructive.
func register(s *mcp.Server, t *tools) {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}
	writes := &mcp.ToolAnnotations{DestructiveHint: new(false), OpenWorldHint: new(false)}

	add(s, &mcp.Tool{Name: "create_task", Annotations: writes,
		Description: "Create a task (a unit of coding work) in a repository the person may write to. It does not start it: start_task does, or use create_and_start_task."},
		t.createTask)
	add(s, &mcp.Tool{Name: "start_task", Annotations: writes,
		Description: "Start a job for one of the person's tasks: the agent plans, builds and validates the change in a sandbox, then stops at a review for the person. Returns the job; follow it with watch_job."},
		t.startTask)
	add(s, &mcp.Tool{Name: "create_and_start_task", Annotations: writes,
		Description: "Create a task and start its job in one call (create_task then start_task). Returns both; follow the job with watch_job."},
		t.createAndStartTask)
	add(s, &mcp.Tool{Name: "get_job", Annotations: readOnly,
		Description: "Get a job: its status and phase, what it spent, its clarification question while it waits for an answer, its review id and pull request, and what can be done next."},
		t.getJob)
	add(s, &mcp.Tool{Name: "watch_job", Annotations: readOnly, InputSchema: watchSchema,
		Description: "Wait for a job to stop — waiting_clarification, pending_review, human_needed, paused or an end (completed, failed, cancelled, skipped, rejected) — or for the timeout, and return the job. " +
			"Sends progress notifications (phases, build steps, the agent's thoughts) when the call carries a progress token."},
		t.watchJob)
	add(s, &mcp.Tool{Name: "answer_clarification", Annotations: writes,
		Description: "Pass the person's answer to a job that asked a question (status waiting_clarification); the job runs on with it. Answer with the person's words, not your own guess."},
		t.answerClarification)
	add(s, &mcp.Tool{Name: "get_review", Annotations: readOnly,
		Description: "Read a review (read only): the files changed with their diffs (shortened when long), the reviewing model's quality score and concerns, and its status. Deciding on it is the person's, in TheFold itself."},
		t.getReview)
	add(s, &mcp.Tool{Name: "search_memory", Annotations: readOnly, InputSchema: searchMemorySchema,
		Description: "Search what TheFold remembers — decisions, errors and their fixes, code patterns, strategies — for a query, optionally within one repository."},
		t.searchMemory)
	add(s, &mcp.Tool{Name: "find_relevant_files", Annotations: readOnly, InputSchema: relevantFilesSchema,
		Description: "Rank a repository's files by relevance to a description (as the agent does to gather context), with the contents or outlines of the best ones."},
		t.findRelevantFiles)
	add(s, &mcp.Tool{Name: "list_repos", Annotations: readOnly,
		Description: "List the repositories the person can work in, as owner/name."},
		t.listRepos)
	add(s, &mcp.Tool{Name: "list_tasks", Annotations: readOnly, InputSchema: listTasksSchema,
		Description: "List the person's tasks, newest first, optionally of one repository and with given statuses."},
		t.listTasks)
	add(s, &mcp.Tool{Name: "plan_project", Annotations: writes,
		Description: "Plan a large piece of work (several systems, many files, a long request) as a project: phases of tasks. It only plans: nothing runs. " +
			"Show the whole plan to the person; start_project starts it once they have read it and said so."},
		t.planProject)
	add(s, &mcp.Tool{Name: "start_project", Annotations: writes,
		Description: "Start a planned project. Call it only after the person read the plan (plan_project) and said to start it, and pass confirm: true to say so; the project then runs its tasks and spends its budget."},
		t.startProject)
}

// add registers a tool whose handler returns its structured result and a one-line text.
// A failure becomes a tool result with IsError set (toolError), not a protocol error.
func add[In, Out any](s *mcp.Server, tool *mcp.Tool, run func(context.Context, *mcp.CallToolRequest, In) (Out, string, error)) {
	mcp.AddTool(s, tool, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		out, text, err := run(ctx, req, in)
		if err != nil {
			if te := (*toolError)(nil); !errors.As(err, &te) {
				err = callError("", err)
			}
			var zero Out
			return nil, zero, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
	})
}

// schemaOf is In's inferred input schema with edit applied to its properties (bounds, enums
// and defaults the Go types cannot say).
func schemaOf[In any](edit func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: schema of %T: %v", *new(In), err))
	}
	edit(s.Properties)
	return s
}

// bounds sets an integer property's range and default.
func bounds(p *jsonschema.Schema, lo, hi, def float64) {
	p.Minimum, p.Maximum = &lo, &hi
	p.Default = []byte(fmt.Sprint(def))
}

// The inputs: their json names are the tools' argument names, their jsonschema tags the
// descriptions a client shows. A field without omitempty is required.

type CreateTaskInput struct {
	Repo        string `json:"repo" jsonschema:"the repository, owner/name (list_repos)"`
	Title       string `json:"title" jsonschema:"a short imperative title, e.g. Add a /healthz endpoint"`
	Description string `json:"description,omitempty" jsonschema:"what to do and how to know it is done; the agent works from it"`
}

type TaskIDInput struct {
	TaskID string `json:"task_id" jsonschema:"the task's id"`
}

type JobIDInput struct {
	JobID string `json:"job_id" jsonschema:"the job's id"`
}

type AnswerInput struct {
	JobID  string `json:"job_id" jsonschema:"the job waiting for an answer"`
	Answer string `json:"answer" jsonschema:"the person's answer to the job's clarification_question"`
}

// TaskAndJob is create_and_start_task's result.
type TaskAndJob struct {
	Task Task `json:"task"`
	Job  Job  `json:"job"`
}

// checkTask checks a new task's input; the tasks service checks it again.
func checkTask(in CreateTaskInput) (CreateTaskInput, error) {
	in.Repo = strings.TrimSpace(in.Repo)
	if err := validate.Repo("repo", in.Repo, true); err != nil {
		return in, err
	}
	var err error
	if in.Title, err = validate.RequiredText("title", in.Title, maxTitle); err != nil {
		return in, err
	}
	in.Description = strings.TrimSpace(in.Description)
	return in, validate.MaxLen("description", in.Description, maxText)
}

// id checks a required id input.
func id(field, v string) (string, error) {
	return validate.UUID(field, strings.TrimSpace(v), true)
}

func (t *tools) createTask(ctx context.Context, _ *mcp.CallToolRequest, in CreateTaskInput) (Task, string, error) {
	in, err := checkTask(in)
	if err != nil {
		return Task{}, "", callError("", err)
	}
	resp, err := t.c.Tasks().CreateTask(ctx, &tasksv1.CreateTaskRequest{Repo: in.Repo, Title: in.Title, Description: in.Description})
	if err != nil {
		return Task{}, "", callError("create the task", err)
	}
	v := taskView(resp.GetTask())
	return v, fmt.Sprintf("Created task %s in %s: %q (%s). Start it with start_task.", v.ID, v.Repo, v.Title, v.Status), nil
}

func (t *tools) startTask(ctx context.Context, _ *mcp.CallToolRequest, in TaskIDInput) (Job, string, error) {
	taskID, err := id("task_id", in.TaskID)
	if err != nil {
		return Job{}, "", callError("", err)
	}
	resp, err := t.c.Agent().StartTask(ctx, &agentv1.StartTaskRequest{TaskId: taskID})
	if err != nil {
		return Job{}, "", callError("start the job", err)
	}
	v := jobView(resp.GetJob())
	return v, fmt.Sprintf("Started job %s for task %s on %s (%s). Follow it with watch_job.", v.ID, v.TaskID, v.Repo, v.Status), nil
}

func (t *tools) createAndStartTask(ctx context.Context, _ *mcp.CallToolRequest, in CreateTaskInput) (TaskAndJob, string, error) {
	in, err := checkTask(in)
	if err != nil {
		return TaskAndJob{}, "", callError("", err)
	}
	created, err := t.c.Tasks().CreateTask(ctx, &tasksv1.CreateTaskRequest{Repo: in.Repo, Title: in.Title, Description: in.Description})
	if err != nil {
		return TaskAndJob{}, "", callError("create the task", err)
	}
	task := created.GetTask()
	started, err := t.c.Agent().StartTask(ctx, &agentv1.StartTaskRequest{TaskId: task.GetId()})
	if err != nil {
		// The task stands: say so, so that the caller starts it rather than making another.
		return TaskAndJob{}, "", callError(fmt.Sprintf("start a job for task %s, which was created (start it with start_task)", task.GetId()), err)
	}
	out := TaskAndJob{Task: taskView(task), Job: jobView(started.GetJob())}
	return out, fmt.Sprintf("Created task %s in %s and started job %s (%s). Follow it with watch_job.", out.Task.ID, out.Task.Repo, out.Job.ID, out.Job.Status), nil
}

func (t *tools) getJob(ctx context.Context, _ *mcp.CallToolRequest, in JobIDInput) (Job, string, error) {
	jobID, err := id("job_id", in.JobID)
	if err != nil {
		return Job{}, "", callError("", err)
	}
	job, err := t.job(ctx, jobID)
	if err != nil {
		return Job{}, "", err
	}
	v := jobView(job)
	return v, jobText(v), nil
}

func (t *tools) job(ctx context.Context, jobID string) (*agentv1.Job, error) {
	resp, err := t.c.Agent().GetJob(ctx, &agentv1.GetJobRequest{Id: jobID})
	if err != nil {
		return nil, callError("get the job", err)
	}
	return resp.GetJob(), nil
}

// jobText is the one-line account of job v.
func jobText(v Job) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Job %s on %s: %s", v.ID, v.Repo, v.Status)
	if v.Phase != "" && !v.Stopped {
		fmt.Fprintf(&b, " (phase %s)", v.Phase)
	}
	fmt.Fprintf(&b, ", cost %s.", v.Cost)
	switch {
	case v.ClarificationQuestion != "" && v.Status == "waiting_clarification":
		fmt.Fprintf(&b, " Question: %s", v.ClarificationQuestion)
	case v.Error != "":
		fmt.Fprintf(&b, " Error: %s", cutText(v.Error, 300))
	case v.StatusReason != "":
		fmt.Fprintf(&b, " Reason: %s", cutText(v.StatusReason, 300))
	}
	if v.Next != "" {
		b.WriteString(" " + v.Next)
	}
	return b.String()
}

func (t *tools) answerClarification(ctx context.Context, _ *mcp.CallToolRequest, in AnswerInput) (Job, string, error) {
	jobID, err := id("job_id", in.JobID)
	if err != nil {
		return Job{}, "", callError("", err)
	}
	answer, err := validate.RequiredText("answer", in.Answer, maxText)
	if err != nil {
		return Job{}, "", callError("", err)
	}
	resp, err := t.c.Agent().RespondToClarification(ctx, &agentv1.RespondToClarificationRequest{Id: jobID, Answer: answer})
	if err != nil {
		return Job{}, "", callError("answer the job", err)
	}
	v := jobView(resp.GetJob())
	return v, fmt.Sprintf("Answered job %s; it is %s. Follow it with watch_job.", v.ID, v.Status), nil
}
