package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/thefold/thefold/pkg/client"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/mcpserver"
)

// mcpTools are the tools the MCP server offers; none decides what the person decides.
var mcpTools = []string{"answer_clarification", "create_and_start_task", "create_task", "find_relevant_files", "get_job", "get_review",
	"list_repos", "list_tasks", "plan_project", "search_memory", "start_project", "start_task", "watch_job"}

// mcpSession connects the SDK's own client to mcpserver.NewServer(c) over the SDK's
// in-memory transport.
func mcpSession(t *testing.T, c *client.Client, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := mcpserver.NewServer(c, "e2e").Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "e2e"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// mcpCall calls a tool and decodes its structured result into out; a tool error fails the
// test.
func mcpCall(t *testing.T, cs *mcp.ClientSession, params *mcp.CallToolParams, out any) string {
	t.Helper()
	res := mcpCallResult(t, cs, params)
	if res.IsError {
		t.Fatalf("%s %v: tool error: %s", params.Name, params.Arguments, mcpText(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: structured content %s: %v", params.Name, b, err)
	}
	return mcpText(res)
}

func mcpCallResult(t *testing.T, cs *mcp.ClientSession, params *mcp.CallToolParams) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveness(11*time.Minute))
	defer cancel()
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("%s %v: %v", params.Name, params.Arguments, err)
	}
	return res
}

func mcpText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func mcpToolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// An MCP client drives a task through TheFold as the person: create and start it, follow
// the job to its question, answer, follow it to the review gate and read the review —
// and it can do nothing the person decides.
func TestMCPDrivesATaskToItsReview(t *testing.T) {
	parallel(t)
	c := meshClient(t, client.Config{Token: token})
	var (
		mu       sync.Mutex
		progress []string
	)
	cs := mcpSession(t, c, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, r.Params.Message)
	}})

	if got := mcpToolNames(t, cs); !slices.Equal(got, mcpTools) {
		t.Fatalf("tools = %v, want %v", got, mcpTools)
	}
	for _, name := range []string{"approve_review", "reject_review", "request_changes", "merge_pull_request", "delete_task"} {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}}); err == nil {
			t.Errorf("%s was called", name)
		}
	}

	// Bad input is a tool error that names the field.
	for _, args := range []map[string]any{{}, {"task_id": ""}} {
		res := mcpCallResult(t, cs, &mcp.CallToolParams{Name: "start_task", Arguments: args})
		if !res.IsError || !strings.Contains(mcpText(res), "task_id") {
			t.Errorf("start_task %v = %v %q, want an error naming task_id", args, res.IsError, mcpText(res))
		}
	}

	repo := agentRepo(t, "mcp-"+time.Now().Format("150405.000000"))
	var started mcpserver.TaskAndJob
	mcpCall(t, cs, &mcp.CallToolParams{Name: "create_and_start_task", Arguments: map[string]any{
		"repo": repo, "title": "Write package clarify [AGENT-CLARIFY]", "description": "F returns a colour."}}, &started)
	if started.Task.ID == "" || started.Task.Repo != repo || started.Job.ID == "" || started.Job.TaskID != started.Task.ID {
		t.Fatalf("create_and_start_task = %+v", started)
	}
	jobID := started.Job.ID
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), liveness(30*time.Second))
		defer cancel()
		_, _ = c.Agent().CancelJob(ctx, &agentv1.CancelJobRequest{Id: jobID, Reason: "test done"})
	})

	var job mcpserver.Job
	text := mcpCall(t, cs, &mcp.CallToolParams{Name: "get_job", Arguments: map[string]any{"job_id": jobID}}, &job)
	if job.ID != jobID || job.TaskID != started.Task.ID || job.Repo != repo || job.Status == "" || job.Cost == "" || !strings.Contains(text, jobID) {
		t.Fatalf("get_job = %+v, %q", job, text)
	}

	// The job asks a question: watch_job stops there, with progress on the way.
	watch := &mcp.CallToolParams{Name: "watch_job", Arguments: map[string]any{"job_id": jobID, "timeout_seconds": 240}}
	watch.SetProgressToken("mcp-e2e")
	var w mcpserver.WatchResult
	mcpCall(t, cs, watch, &w)
	if w.TimedOut || w.Job.Status != "waiting_clarification" || w.Job.ClarificationQuestion != "Which colour should F use?" {
		t.Fatalf("watch_job to the question = %+v", w)
	}
	// Each event seen was a progress notification (a job that asked before the watch began
	// stops it at once, without events). The SDK's client handles notifications on its own
	// goroutine: the last may come after the call returned.
	if w.Events > 0 {
		got := func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(progress)
		}
		for deadline := time.Now().Add(5 * time.Second); !slices.Contains(got(), "question: Which colour should F use?"); {
			if time.Now().After(deadline) {
				t.Fatalf("%d events, progress notifications %q", w.Events, got())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if len(got()) < w.Events {
			t.Errorf("%d events, progress notifications %q", w.Events, got())
		}
	}

	mcpCall(t, cs, &mcp.CallToolParams{Name: "answer_clarification", Arguments: map[string]any{"job_id": jobID, "answer": "use blue"}}, &job)
	if job.ID != jobID {
		t.Fatalf("answer_clarification = %+v", job)
	}
	watch = &mcp.CallToolParams{Name: "watch_job", Arguments: map[string]any{"job_id": jobID, "timeout_seconds": 240}}
	mcpCall(t, cs, watch, &w)
	if w.TimedOut || w.Job.Status != "pending_review" || w.Job.ReviewID == "" || !w.Job.Stopped {
		t.Fatalf("watch_job to the review = %+v", w)
	}

	var review mcpserver.Review
	mcpCall(t, cs, &mcp.CallToolParams{Name: "get_review", Arguments: map[string]any{"review_id": w.Job.ReviewID}}, &review)
	if review.Status != "pending" || review.QualityScore != 8 || len(review.Files) != 1 || review.Files[0].Path != "clarify/f.go" ||
		!strings.Contains(review.Files[0].Diff, "+func F() int") || !strings.Contains(review.Next, "person") {
		t.Fatalf("get_review = %+v", review)
	}

	var tasks struct {
		Tasks []mcpserver.Task `json:"tasks"`
	}
	mcpCall(t, cs, &mcp.CallToolParams{Name: "list_tasks", Arguments: map[string]any{"repo": repo, "statuses": []string{"in_review"}}}, &tasks)
	if len(tasks.Tasks) != 1 || tasks.Tasks[0].ID != started.Task.ID {
		t.Fatalf("list_tasks in_review = %+v", tasks)
	}
	var repos struct {
		Repos []mcpserver.Repo `json:"repos"`
	}
	mcpCall(t, cs, &mcp.CallToolParams{Name: "list_repos", Arguments: map[string]any{"owner": "local"}}, &repos)
	if !slices.ContainsFunc(repos.Repos, func(r mcpserver.Repo) bool { return r.Repo == repo }) {
		t.Errorf("list_repos does not list %s: %+v", repo, repos)
	}
	var files struct {
		Files []mcpserver.RelevantFile `json:"files"`
	}
	mcpCall(t, cs, &mcp.CallToolParams{Name: "find_relevant_files", Arguments: map[string]any{"repo": repo, "query": "the Go module definition", "max_files": 5}}, &files)
	if !slices.ContainsFunc(files.Files, func(f mcpserver.RelevantFile) bool { return f.Path == "go.mod" }) {
		t.Errorf("find_relevant_files = %+v", files)
	}
	var memories struct {
		Memories []mcpserver.Memory `json:"memories"`
	}
	mcpCall(t, cs, &mcp.CallToolParams{Name: "search_memory", Arguments: map[string]any{"query": "package clarify colour", "repo": repo, "limit": 5}}, &memories)

	// A project is planned, not started, and starts only with confirm: true.
	var project mcpserver.Project
	text = mcpCall(t, cs, &mcp.CallToolParams{Name: "plan_project", Arguments: map[string]any{"repo": repo, "request": "Report the server version over HTTP"}}, &project)
	if project.ID == "" || project.Status != "planned" || len(project.Phases) == 0 || project.TaskCount == 0 || !strings.Contains(text, "Phase 1") {
		t.Fatalf("plan_project = %+v, %q", project, text)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), liveness(30*time.Second))
		defer cancel()
		_, _ = c.Projects().CancelProject(ctx, &agentv1.CancelProjectRequest{Id: project.ID, Reason: "test done"})
	})
	res := mcpCallResult(t, cs, &mcp.CallToolParams{Name: "start_project", Arguments: map[string]any{"project_id": project.ID, "confirm": false}})
	if !res.IsError || !strings.Contains(mcpText(res), "confirm") {
		t.Fatalf("start_project without confirm = %v %q", res.IsError, mcpText(res))
	}
	ctx, cancel := context.WithTimeout(context.Background(), liveness(30*time.Second))
	defer cancel()
	if got, err := c.Projects().GetProject(ctx, &agentv1.GetProjectRequest{Id: project.ID}); err != nil || got.GetProject().GetStatus() != agentv1.ProjectStatus_PROJECT_STATUS_PLANNED {
		t.Fatalf("the project after start_project without confirm: %v, %v", got.GetProject().GetStatus(), err)
	}

	// What TheFold refuses is a tool error with the status code and the field.
	res = mcpCallResult(t, cs, &mcp.CallToolParams{Name: "get_job", Arguments: map[string]any{"job_id": "00000000-0000-4000-8000-000000000000"}})
	if !res.IsError || !strings.Contains(mcpText(res), "NOT_FOUND") {
		t.Fatalf("get_job of no job = %v %q", res.IsError, mcpText(res))
	}
	res = mcpCallResult(t, cs, &mcp.CallToolParams{Name: "create_task", Arguments: map[string]any{"repo": repo, "title": "x", "description": "a\x00b"}})
	if !res.IsError || !strings.Contains(mcpText(res), "INVALID_ARGUMENT: description: must not contain a NUL byte") {
		t.Fatalf("create_task with a NUL byte = %v %q", res.IsError, mcpText(res))
	}
	res = mcpCallResult(t, cs, &mcp.CallToolParams{Name: "answer_clarification", Arguments: map[string]any{"job_id": jobID, "answer": "blue again"}})
	if !res.IsError || !strings.Contains(mcpText(res), "FAILED_PRECONDITION") {
		t.Fatalf("answer_clarification at the review gate = %v %q", res.IsError, mcpText(res))
	}
}

// mcpServeHTTP runs mcpserver.Serve on streamable HTTP on a free loopback port until the
// test ends, and returns its endpoint.
func mcpServeHTTP(t *testing.T, c *client.Client) string {
	t.Helper()
	addr := grpctest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mcpserver.Serve(ctx, c, "http", addr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("Serve did not return after its context ended")
		}
	})
	return "http://" + addr + mcpserver.Path
}

// The same server over streamable HTTP on a loopback port.
func TestMCPOverHTTP(t *testing.T) {
	parallel(t)
	c := meshClient(t, client.Config{Token: token})
	endpoint := mcpServeHTTP(t, c)
	mc := mcp.NewClient(&mcp.Implementation{Name: "e2e-http", Version: "e2e"}, nil)
	var (
		cs  *mcp.ClientSession
		err error
	)
	for deadline := time.Now().Add(10 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cs, err = mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}, nil)
		cancel()
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the server is starting
	}
	if err != nil {
		t.Fatalf("connect to %s: %v", endpoint, err)
	}
	defer cs.Close()
	if got := mcpToolNames(t, cs); !slices.Equal(got, mcpTools) {
		t.Fatalf("tools over HTTP = %v, want %v", got, mcpTools)
	}
	if !strings.Contains(cs.InitializeResult().Instructions, "No tool approves") {
		t.Errorf("instructions = %q", cs.InitializeResult().Instructions)
	}
	var repos struct {
		Repos []mcpserver.Repo `json:"repos"`
	}
	mcpCall(t, cs, &mcp.CallToolParams{Name: "list_repos", Arguments: map[string]any{}}, &repos)
	res := mcpCallResult(t, cs, &mcp.CallToolParams{Name: "watch_job", Arguments: map[string]any{"job_id": "nope"}})
	if !res.IsError || !strings.Contains(mcpText(res), "job_id") {
		t.Fatalf("watch_job of a bad id over HTTP = %v %q", res.IsError, mcpText(res))
	}

	// Only a loopback address: the endpoint acts as the person and has no login of its own.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := mcpserver.Serve(ctx, c, "http", "0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("Serve on 0.0.0.0 = %v", err)
	}
	if err := mcpserver.Serve(ctx, c, "websocket", "127.0.0.1:0"); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Serve with an unknown transport = %v", err)
	}
}
