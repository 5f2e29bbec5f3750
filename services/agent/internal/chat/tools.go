package chat

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/thefold/thefold/pkg/auth"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// A tool is a function the model may call in a reply. It runs as the conversation's owner:
// the services it calls check ownership and limits as for the person's own calls.
type tool struct {
	name        string
	description string
	// schema is the JSON Schema of its input.
	schema string
	// methods are the RPCs it makes as the person: a message sent with an API key whose
	// scopes do not allow one of them cannot use the tool (auth.ScopesAllow), so a
	// conversation never does more than the credential that wrote to it may.
	methods []string
	run     func(ctx context.Context, x *toolCall) (string, error)
}

// outOfScope is the first RPC of t that scopes do not allow, "" when they allow them all
// (no scopes: a full login, or an integration, allows everything its owner may do).
func outOfScope(t *tool, scopes []string) string {
	for _, m := range t.methods {
		if !auth.ScopesAllow(scopes, m) {
			return m
		}
	}
	return ""
}

// toolCall is one call of a tool in a reply.
type toolCall struct {
	r     *Runner
	owner string
	conv  *agentv1.Conversation
	reply string
	id    string
	input map[string]any
	refs  *agentv1.NoticeRefs
	// notice are messages the call adds after its result (a proposed plan).
	notice []*agentv1.ConversationMessage
	// history is the conversation so far (start_project looks for the person's
	// confirmation in it).
	history []*agentv1.ConversationMessage
}

// requestID is the idempotency key of the call's side effect: the same for a resumed reply's
// call, so it takes effect once.
func (x *toolCall) requestID(what string) string {
	sum := sha256.Sum256([]byte(x.reply + "\x00" + x.id + "\x00" + what))
	return "chat-" + hex.EncodeToString(sum[:16])
}

// str is the string input name ("" when absent); a value of another type is an error.
func (x *toolCall) str(name string, required bool) (string, error) {
	v, ok := x.input[name]
	if !ok || v == nil {
		if required {
			return "", fmt.Errorf("input %q is required", name)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("input %q must be a string", name)
	}
	s = strings.TrimSpace(s)
	if required && s == "" {
		return "", fmt.Errorf("input %q is required", name)
	}
	return s, nil
}

// repo is the repository input, or the conversation's.
func (x *toolCall) repo() (string, error) {
	r, err := x.str("repo", false)
	if err != nil {
		return "", err
	}
	if r == "" {
		r = x.conv.Repo
	}
	if r == "" {
		return "", fmt.Errorf(`input "repo" is required: this conversation has no repository (say which, as owner/name)`)
	}
	if err := validate.Repo("repo", r, true); err != nil {
		return "", fmt.Errorf("input %q: %s", "repo", status.Convert(err).Message())
	}
	return r, nil
}

var marshal = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false}

// refused are the tools a model may ask for that no tool does, with why.
var refused = map[string]string{
	"approve_review":     "no tool approves a review: the person approves it themselves (the review page, or ReviewService.ApproveReview)",
	"reject_review":      "no tool rejects a review: the person decides that themselves",
	"request_changes":    "no tool sends a review back: the person does that themselves",
	"merge_pull_request": "no tool merges a pull request: the person merges it",
	"delete_task":        "no tool deletes data: the person deletes it themselves",
	"delete_repo":        "no tool deletes data: the person deletes it themselves",
	"delete_memory":      "no tool deletes data: the person deletes it themselves",
	"update_settings":    "no tool changes settings: the person changes them themselves",
}

// refusal is the reason a call of name is refused, "" when name is a tool.
func refusal(name string) string {
	if why, ok := refused[name]; ok {
		return why
	}
	for _, prefix := range []string{"delete_", "approve_", "merge_", "update_setting", "set_setting"} {
		if strings.HasPrefix(name, prefix) {
			return "no tool approves reviews, merges, deletes data or changes settings: those stay with the person"
		}
	}
	return ""
}

// tools are the tools of a reply, by name.
var tools = map[string]*tool{}

func init() {
	for _, t := range toolList {
		tools[t.name] = t
	}
}

// definitions are the tools as the model is told of them.
func definitions() ([]*aiv1.Tool, error) {
	out := make([]*aiv1.Tool, 0, len(toolList))
	for _, t := range toolList {
		schema := &structpb.Struct{}
		if err := schema.UnmarshalJSON([]byte(t.schema)); err != nil {
			return nil, fmt.Errorf("chat: tool %s: schema: %w", t.name, err)
		}
		out = append(out, &aiv1.Tool{Name: t.name, Description: t.description, InputSchema: schema})
	}
	return out, nil
}

// callError is what the model is told when a service refused a call: the status message,
// which names the field or the precondition.
func callError(err error) error {
	st := status.Convert(err)
	switch st.Code() {
	case codes.NotFound:
		return fmt.Errorf("not found among the person's resources: %s", st.Message())
	case codes.PermissionDenied:
		return fmt.Errorf("the person may not do this: %s", st.Message())
	}
	return fmt.Errorf("%s: %s", strings.ToLower(strings.ReplaceAll(st.Code().String(), "_", " ")), st.Message())
}

var toolList = []*tool{
	{
		name:        "create_task",
		methods:     []string{tasksv1.TaskService_CreateTask_FullMethodName},
		description: "Create a task (a unit of coding work) in a repository the person owns or may write to. It does not start it: call start_task for that.",
		schema: `{"type":"object","properties":{
			"repo":{"type":"string","description":"owner/name; default the conversation's repository"},
			"title":{"type":"string","description":"a short imperative title"},
			"description":{"type":"string","description":"what to do and how to know it is done"},
			"labels":{"type":"array","items":{"type":"string"}}},
			"required":["title"]}`,
		run: func(ctx context.Context, x *toolCall) (string, error) {
			repo, err := x.repo()
			if err != nil {
				return "", err
			}
			title, err := x.str("title", true)
			if err != nil {
				return "", err
			}
			desc, err := x.str("description", false)
			if err != nil {
				return "", err
			}
			var labels []string
			if raw, ok := x.input["labels"].([]any); ok {
				for _, l := range raw {
					if s, ok := l.(string); ok {
						labels = append(labels, s)
					}
				}
			}
			resp, err := x.r.c.Tasks.CreateTask(ctx, &tasksv1.CreateTaskRequest{RequestId: x.requestID("create_task"), Repo: repo, Title: title,
				Description: desc, Labels: labels, Source: tasksv1.TaskSource_TASK_SOURCE_CHAT})
			if err != nil {
				return "", callError(err)
			}
			t := resp.GetTask()
			x.refs.TaskId, x.refs.Repo = t.GetId(), t.GetRepo()
			x.r.estimate(ctx, x.owner, t)
			return protoJSON(t)
		},
	},
	{
		name:        "start_task",
		methods:     []string{agentv1.AgentService_StartTask_FullMethodName},
		description: "Start a job that does a task: it plans, builds and validates the change in a sandbox, then stops at a review for the person. The job's progress comes back into this conversation.",
		schema:      `{"type":"object","properties":{"task_id":{"type":"string"}},"required":["task_id"]}`,
		run: func(ctx context.Context, x *toolCall) (string, error) {
			id, err := x.str("task_id", true)
			if err != nil {
				return "", err
			}
			resp, err := x.r.c.Agent.StartTask(ctx, &agentv1.StartTaskRequest{RequestId: x.requestID("start_task"), TaskId: id})
			if err != nil {
				return "", callError(err)
			}
			j := resp.GetJob()
			x.refs.TaskId, x.refs.JobId, x.refs.Repo = j.GetTaskId(), j.GetId(), j.GetRepo()
			if err := x.r.st.LinkConversation(ctx, "job", j.GetId(), x.conv.Id); err != nil {
				return "", err
			}
			if err := x.r.st.AddNoticeOnce(ctx, x.conv.Id, startedKey("job", j.GetId()), notice(agentv1.NoticeKind_NOTICE_KIND_JOB_STARTED,
				&agentv1.NoticeRefs{JobId: j.GetId(), TaskId: j.GetTaskId(), Repo: j.GetRepo()}, "Job "+short(j.GetId())+" started on "+j.GetRepo()+"."), store.MomentNone); err != nil {
				return "", err
			}
			return protoJSON(&agentv1.Job{Id: j.Id, TaskId: j.TaskId, Repo: j.Repo, Status: j.Status, Phase: j.Phase, Branch: j.Branch})
		},
	},
	{
		name:        "list_tasks",
		methods:     []string{tasksv1.TaskService_ListTasks_FullMethodName},
		description: "List the person's tasks, optionally of one repository and with given statuses (backlog, planned, in_progress, in_review, done, blocked, cancelled).",
		schema: `{"type":"object","properties":{"repo":{"type":"string"},
			"statuses":{"type":"array","items":{"type":"string"}},"limit":{"type":"integer","minimum":1,"maximum":50}}}`,
		run: func(ctx context.Context, x *toolCall) (string, error) {
			repo, err := x.str("repo", false)
			if err != nil {
				return "", err
			}
			req := &tasksv1.ListTasksRequest{Repo: repo, PageSize: 20}
			if n, ok := x.input["limit"].(float64); ok && n >= 1 && n <= 50 {
				req.PageSize = int32(n)
			}
			if raw, ok := x.input["statuses"].([]any); ok {
				for _, v := range raw {
					s, _ := v.(string)
					st, ok := tasksv1.TaskStatus_value["TASK_STATUS_"+strings.ToUpper(s)]
					if !ok {
						return "", fmt.Errorf("input %q: unknown status %q", "statuses", s)
					}
					req.Statuses = append(req.Statuses, tasksv1.TaskStatus(st))
				}
			}
			resp, err := x.r.c.Tasks.ListTasks(ctx, req)
			if err != nil {
				return "", callError(err)
			}
			type row struct {
				ID, Title, Repo, Status string
			}
			rows := make([]row, 0, len(resp.Tasks))
			for _, t := range resp.Tasks {
				rows = append(rows, row{t.Id, t.Title, t.Repo, strings.ToLower(strings.TrimPrefix(t.Status.String(), "TASK_STATUS_"))})
			}
			b, err := json.Marshal(rows)
			return string(b), err
		},
	},
	{
		name:        "read_file",
		methods:     []string{githubv1.RepoService_GetFiles_FullMethodName},
		description: "Read one file of a repository at its default branch (or a ref).",
		schema:      `{"type":"object","properties":{"repo":{"type":"string"},"path":{"type":"string"},"ref":{"type":"string"}},"required":["path"]}`,
		run: func(ctx context.Context, x *toolCall) (string, error) {
			repo, err := x.repo()
			if err != nil {
				return "", err
			}
			path, err := x.str("path", true)
			if err != nil {
				return "", err
			}
			ref, err := x.str("ref", false)
			if err != nil {
				return "", err
			}
			resp, err := x.r.c.Repos.GetFiles(ctx, &githubv1.GetFilesRequest{Repo: repo, Ref: ref, Paths: []string{path}})
			if err != nil {
				return "", callError(err)
			}
			if len(resp.Files) == 0 {
				return "", fmt.Errorf("%s has no file %s", repo, path)
			}
			x.refs.Repo = repo
			return string(resp.Files[0].GetContent()), nil
		},
	},
	{
		name:        "search_code",
		methods:     []string{githubv1.RepoService_FindRelevantFiles_FullMethodName},
		description: "Find the files of a repository most relevant to a description, with their contents (ranked).",
		schema:      `{"type":"object","properties":{"repo":{"type":"string"},"query":{"type":"string"},"max_files":{"type":"integer","minimum":1,"maximum":20}},"required":["query"]}`,
		run: func(ctx context.Context, x *toolCall) (string, error) {
			repo, err := x.repo()
			if err != nil {
				return "", err
			}
			q, err := x.str("query", true)
			if err != nil {
				return "", err
			}
			max := int32(5)
			if n, ok := x.input["max_files"].(float64); ok && n >= 1 && n <= 20 {
				max = int32(n)
			}
			resp, err := x.r.c.Repos.FindRelevantFiles(ctx, &githubv1.FindRelevantFilesRequest{Repo: repo, Task: q, MaxFiles: max, TokenBudget: 8000})
			if err != nil {
				return "", callError(err)
			}
			x.refs.Repo = repo
			return protoJSON(resp)
		},
	},
	{
		name:        "get_job",
		methods:     []string{agentv1.AgentService_GetJob_FullMethodName},
		description: "Get a job's status, phase, cost so far and, when it waits, its question or review.",
		schema:      `{"type":"object","properties":{"job_id":{"type":"string"}},"required":["job_id"]}`,
		run: func(ctx context.Context, x *toolCall) (string, error) {
			id, err := x.str("job_id", true)
			if err != nil {
				return "", err
			}
			resp, err := x.r.c.Agent.GetJob(ctx, &agentv1.GetJobRequest{Id: id})
			if err != nil {
				return "", callError(err)
			}
			j := resp.GetJob()
			x.refs.JobId, x.refs.TaskId = j.GetId(), j.GetTaskId()
			return protoJSON(&agentv1.Job{Id: j.Id, TaskId: j.TaskId, Repo: j.Repo, Status: j.Status, StatusReason: j.StatusReason, Phase: j.Phase,
				Usage: j.Usage, Branch: j.Branch, ReviewId: j.ReviewId, PullRequest: j.PullRequest, ClarificationQuestion: j.ClarificationQuestion})
		},
	},
	{
		name:        "search_memory",
		methods:     []string{memoryv1.MemoryService_SearchMemories_FullMethodName},
		description: "Search what TheFold remembers (decisions, errors and their fixes, patterns) for a query, optionally within a repository.",
		schema:      `{"type":"object","properties":{"query":{"type":"string"},"repo":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":20}},"required":["query"]}`,
		run: func(ctx context.Context, x *toolCall) (string, error) {
			q, err := x.str("query", true)
			if err != nil {
				return "", err
			}
			repo, err := x.str("repo", false)
			if err != nil {
				return "", err
			}
			limit := int32(5)
			if n, ok := x.input["limit"].(float64); ok && n >= 1 && n <= 20 {
				limit = int32(n)
			}
			resp, err := x.r.c.Memory.SearchMemories(ctx, &memoryv1.SearchMemoriesRequest{Query: q, Repo: repo, Limit: limit})
			if err != nil {
				return "", callError(err)
			}
			return protoJSON(resp)
		},
	},
	{
		name:        "list_repos",
		methods:     []string{githubv1.RepoService_ListRepos_FullMethodName},
		description: "List the repositories the person can work in.",
		schema:      `{"type":"object","properties":{}}`,
		run: func(ctx context.Context, x *toolCall) (string, error) {
			resp, err := x.r.c.Repos.ListRepos(ctx, &githubv1.ListReposRequest{PageSize: 100})
			if err != nil {
				return "", callError(err)
			}
			names := make([]string, 0, len(resp.Repos))
			for _, r := range resp.Repos {
				names = append(names, r.GetRepo())
			}
			b, err := json.Marshal(names)
			return string(b), err
		},
	},
	{
		name:    "plan_project",
		methods: []string{agentv1.ProjectService_PlanProject_FullMethodName},
		description: "Plan a large piece of work (several systems, many files, or a long request) as a project: phases of tasks. The plan is shown to the person; " +
			"nothing starts until they confirm in a later message. Use it instead of create_task when the request is big.",
		schema: `{"type":"object","properties":{"repo":{"type":"string"},"request":{"type":"string","description":"the whole request, in the person's words"}},"required":["request"]}`,
		run: func(ctx context.Context, x *toolCall) (string, error) {
			repo, err := x.repo()
			if err != nil {
				return "", err
			}
			req, err := x.str("request", true)
			if err != nil {
				return "", err
			}
			resp, err := x.r.c.Projects.PlanProject(ctx, &agentv1.PlanProjectRequest{RequestId: x.requestID("plan_project"), Repo: repo, Request: req})
			if err != nil {
				return "", callError(err)
			}
			p := resp.GetProject()
			x.refs.ProjectId, x.refs.Repo = p.GetId(), p.GetRepo()
			if err := x.r.st.LinkConversation(ctx, "project", p.GetId(), x.conv.Id); err != nil {
				return "", err
			}
			x.notice = append(x.notice, &agentv1.ConversationMessage{Text: planText(p),
				Notice: &agentv1.Notice{Kind: agentv1.NoticeKind_NOTICE_KIND_PLAN_PROPOSED, Refs: &agentv1.NoticeRefs{ProjectId: p.Id, Repo: p.Repo}}})
			return protoJSON(&agentv1.Project{Id: p.Id, Repo: p.Repo, Description: p.Description, Status: p.Status, Phases: p.Phases})
		},
	},
	{
		name:        "start_project",
		methods:     []string{agentv1.ProjectService_StartProject_FullMethodName},
		description: "Start a planned project, only after the person confirmed its plan in a message written after the plan was shown.",
		schema:      `{"type":"object","properties":{"project_id":{"type":"string"}},"required":["project_id"]}`,
		run: func(ctx context.Context, x *toolCall) (string, error) {
			id, err := x.str("project_id", true)
			if err != nil {
				return "", err
			}
			if !x.confirmed(id) {
				return "", fmt.Errorf("refused: the person has not confirmed project %s; show them the plan and wait for their answer in a later message", id)
			}
			resp, err := x.r.c.Projects.StartProject(ctx, &agentv1.StartProjectRequest{RequestId: x.requestID("start_project"), Id: id})
			if err != nil {
				return "", callError(err)
			}
			p := resp.GetProject()
			x.refs.ProjectId, x.refs.Repo = p.GetId(), p.GetRepo()
			if err := x.r.st.LinkConversation(ctx, "project", p.GetId(), x.conv.Id); err != nil {
				return "", err
			}
			if err := x.r.st.AddNoticeOnce(ctx, x.conv.Id, startedKey("project", p.GetId()), notice(agentv1.NoticeKind_NOTICE_KIND_PROJECT_STARTED,
				&agentv1.NoticeRefs{ProjectId: p.GetId(), Repo: p.GetRepo()}, "Project "+short(p.GetId())+" started."), store.MomentNone); err != nil {
				return "", err
			}
			return protoJSON(&agentv1.Project{Id: p.Id, Repo: p.Repo, Status: p.Status})
		},
	},
	{
		name:        "answer_clarification",
		methods:     []string{agentv1.AgentService_RespondToClarification_FullMethodName},
		description: "Pass the person's answer to a job that asked a question (status waiting_clarification).",
		schema:      `{"type":"object","properties":{"job_id":{"type":"string"},"answer":{"type":"string"}},"required":["job_id","answer"]}`,
		run: func(ctx context.Context, x *toolCall) (string, error) {
			id, err := x.str("job_id", true)
			if err != nil {
				return "", err
			}
			answer, err := x.str("answer", true)
			if err != nil {
				return "", err
			}
			resp, err := x.r.c.Agent.RespondToClarification(ctx, &agentv1.RespondToClarificationRequest{RequestId: x.requestID("answer"), Id: id, Answer: answer})
			if err != nil {
				return "", callError(err)
			}
			j := resp.GetJob()
			x.refs.JobId = j.GetId()
			return protoJSON(&agentv1.Job{Id: j.Id, Status: j.Status})
		},
	},
}

// estimate assesses task t's complexity and tokens in the background and records them on
// the task, as the seed's chat does: the reply does not wait for it, and a failure only
// leaves the task unassessed (logged).
func (r *Runner) estimate(ctx context.Context, owner string, t *tasksv1.Task) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.CallTimeout)
	go func() {
		defer cancel()
		a, err := r.c.AI.AssessComplexity(ctx, &aiv1.AssessComplexityRequest{RequestId: "chat-estimate-" + t.GetId(),
			Task:        &aiv1.TaskSpec{Title: t.GetTitle(), Description: t.GetDescription(), Labels: t.GetLabels()},
			Attribution: &aiv1.Attribution{TaskId: t.GetId(), Repo: t.GetRepo()}})
		if err == nil {
			_, err = r.c.Tasks.UpdateTask(ctx, &tasksv1.UpdateTaskRequest{Id: t.GetId(),
				Task:       &tasksv1.Task{Complexity: a.GetComplexity(), EstimatedTokens: a.GetEstimatedTokens()},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"complexity", "estimated_tokens"}}})
		}
		if err != nil {
			r.log.WarnContext(ctx, "chat: estimate a task", "task", t.GetId(), "owner", owner, "err", err)
		}
	}()
}

// confirmed reports whether the person wrote a message after the plan of project id was
// proposed in this conversation.
func (x *toolCall) confirmed(id string) bool {
	proposed := false
	for _, m := range x.history {
		switch {
		case m.GetNotice().GetKind() == agentv1.NoticeKind_NOTICE_KIND_PLAN_PROPOSED && m.GetNotice().GetRefs().GetProjectId() == id:
			proposed = true
		case proposed && m.Role == agentv1.ChatRole_CHAT_ROLE_USER:
			return true
		}
	}
	return false
}

// planText is a project plan as the person reads it in the conversation.
func planText(p *agentv1.Project) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Project plan for %s: %s\n", p.Repo, p.Description)
	for _, ph := range p.Phases {
		fmt.Fprintf(&b, "\nPhase %d: %s\n", ph.Number, ph.Name)
		for _, t := range ph.Tasks {
			fmt.Fprintf(&b, "  - %s\n", t.Title)
		}
	}
	b.WriteString("\nReply to confirm (or say what to change); nothing starts before that.")
	return b.String()
}

// protoJSON is m as compact JSON with proto field names (protojson's own output varies its
// spacing from build to build; compacted, the model is sent the same bytes every time).
func protoJSON(m interface{ ProtoReflect() protoreflect.Message }) (string, error) {
	b, err := marshal.Marshal(m)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return "", err
	}
	return out.String(), nil
}
