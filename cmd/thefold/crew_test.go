package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

const (
	crewProject = "4f1a2b3c-5d6e-4f70-8a9b-0c1d2e3f4a5b"
	crewTask    = "7d2e9a1b-3c4f-4e5a-8b6c-1d0e2f3a4b5c"
)

// The crew commands' mistakes are usage errors (exit 2) named before anything connects:
// with no login at all, a right command line fails only at "not logged in".
func TestCrewUsageErrors(t *testing.T) {
	t.Setenv("THEFOLD_CONFIG_DIR", t.TempDir())
	t.Setenv("THEFOLD_TOKEN", "")
	t.Setenv("THEFOLD_API_KEY", "")
	const p = crewProject
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"interrupt names no worker", []string{"projects", "interrupt", p}, exitUsage, "give exactly one of --worker N or --task PROJECT_TASK_ID"},
		{"interrupt names two", []string{"projects", "interrupt", p, "--worker", "2", "--task", crewTask}, exitUsage, "give exactly one of --worker"},
		{"interrupt worker zero", []string{"projects", "interrupt", p, "--worker", "0"}, exitUsage, "--worker 0: workers are numbered from 1"},
		{"interrupt without a project", []string{"projects", "interrupt", "--worker", "1"}, exitUsage, "want PROJECT_ID"},
		{"resume-worker names no worker", []string{"projects", "resume-worker", p}, exitUsage, "give exactly one of --worker N or --task"},
		{"resume-worker names two", []string{"projects", "resume-worker", p, "--worker", "1", "--task", crewTask}, exitUsage, "give exactly one of"},
		{"resume-worker empty task", []string{"projects", "resume-worker", p, "--task", " "}, exitUsage, "--task is empty"},
		{"message without text", []string{"projects", "message", p, "--worker", "2"}, exitUsage, "want PROJECT_ID TEXT..., got 1 arguments"},
		{"message without anything", []string{"projects", "message"}, exitUsage, "want PROJECT_ID TEXT..."},
		{"message of blanks", []string{"projects", "message", p, " ", ""}, exitUsage, "the message TEXT is empty"},
		{"message to two", []string{"projects", "message", p, "--worker", "2", "--task", crewTask, "hi"}, exitUsage, "give at most one of --worker N or --task"},
		{"message worker negative", []string{"projects", "message", p, "--worker", "-1", "hi"}, exitUsage, "--worker -1"},
		{"reorder a worker", []string{"projects", "message", p, "--worker", "1", "--hold", crewTask}, exitUsage, "not with --worker or --task"},
		{"reorder without a project", []string{"projects", "message", "--hold", crewTask}, exitUsage, "want PROJECT_ID TEXT..., got 0 arguments"},
		{"pool without a project", []string{"projects", "pool"}, exitUsage, "want PROJECT_ID"},
		{"plan bad merge policy", []string{"projects", "plan", "--mode", "crew", "--repo", "acme/api", "--merge-policy", "yolo"}, exitUsage,
			`--merge-policy "yolo": human or auto`},
		{"plan bad mode", []string{"projects", "plan", "x", "--repo", "acme/api", "--mode", "swarm"}, exitUsage, `--mode "swarm": one of review, session, crew`},
		{"plan without a request", []string{"projects", "plan", "--repo", "acme/api"}, exitUsage, `want "REQUEST" (only --mode crew`},
		{"plan session without a request", []string{"projects", "plan", "--repo", "acme/api", "--mode", "session"}, exitUsage, `want "REQUEST"`},
		{"plan two requests", []string{"projects", "plan", "a", "b", "--repo", "acme/api"}, exitUsage, `want one "REQUEST" (quote it), got 2`},
		{"plan crew flag without crew", []string{"projects", "plan", "x", "--repo", "acme/api", "--max-workers", "2"}, exitUsage, "--max-workers is for --mode crew only"},
		{"plan merge policy without crew", []string{"projects", "plan", "x", "--repo", "acme/api", "--mode", "review", "--merge-policy", "auto"}, exitUsage,
			"--merge-policy is for --mode crew only"},
		{"plan too many workers", []string{"projects", "plan", "--mode", "crew", "--repo", "acme/api", "--max-workers", "11"}, exitUsage, "--max-workers 11: 1 to 10"},
		{"plan min quality with human merge", []string{"projects", "plan", "--mode", "crew", "--repo", "acme/api", "--min-quality", "9"}, exitUsage,
			"--min-quality is for --merge-policy auto only"},
		{"plan min quality out of range", []string{"projects", "plan", "--mode", "crew", "--repo", "acme/api", "--merge-policy", "auto", "--min-quality", "0"}, exitUsage,
			"--min-quality 0: 1 to 10"},
		{"plan long check command", []string{"projects", "plan", "--mode", "crew", "--repo", "acme/api", "--check-command", strings.Repeat("x", 1001)}, exitUsage,
			"--check-command: 1001 characters, at most 1000"},
		// Right command lines reach the API (and stop at the missing login).
		{"crew plan needs no request", []string{"projects", "plan", "--mode", "crew", "--repo", "acme/api"}, exitAuth, "not logged in"},
		{"interrupt by task", []string{"projects", "interrupt", p, "--task", crewTask}, exitAuth, "not logged in"},
		{"message to the project", []string{"projects", "message", p, "Prefer", "table", "tests"}, exitAuth, "not logged in"},
		{"pool", []string{"projects", "pool", p}, exitAuth, "not logged in"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := execute(context.Background(), c.args, strings.NewReader(""), &out, &errOut)
			if code != c.code || !strings.Contains(errOut.String(), c.stderr) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errOut.String(), c.code, c.stderr)
			}
		})
	}
	// The flags' values complete.
	var out bytes.Buffer
	execute(context.Background(), []string{"__complete", "projects", "plan", "--mode", ""}, strings.NewReader(""), &out, &out)
	if !strings.Contains(out.String(), "crew") {
		t.Errorf("completing --mode: %q", out.String())
	}
	out.Reset()
	execute(context.Background(), []string{"__complete", "projects", "res"}, strings.NewReader(""), &out, &out)
	if !strings.Contains(out.String(), "resume-worker") {
		t.Errorf("completing \"projects res\": %q", out.String())
	}
}

// The plan's flags become the request's fields; a crew plan's request text is optional.
func TestPlanRequest(t *testing.T) {
	changed := func(names ...string) func(string) bool {
		return func(f string) bool { return slices.Contains(names, f) }
	}
	f := planFlags{repo: "acme/api", mode: "Crew", mergePolicy: "auto", maxWorkers: 4, minQuality: 9, checkCommand: "go test ./..."}
	req, err := f.request(changed("mode", "merge-policy", "max-workers", "min-quality", "check-command"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &agentv1.PlanProjectRequest{Repo: "acme/api", Mode: agentv1.ProjectMode_PROJECT_MODE_CREW, MaxWorkers: 4,
		MergePolicy: agentv1.MergePolicy_MERGE_POLICY_AUTO, AutoMergeMinQuality: 9, CheckCommand: "go test ./..."}
	if !proto.Equal(req, want) {
		t.Errorf("crew plan %v, want %v", req, want)
	}
	req, err = planFlags{repo: "local/demo", mode: "session"}.request(changed("mode"), []string{"A status page"})
	want = &agentv1.PlanProjectRequest{Repo: "local/demo", Request: "A status page", Mode: agentv1.ProjectMode_PROJECT_MODE_SESSION}
	if err != nil || !proto.Equal(req, want) {
		t.Errorf("session plan: %v, %v", req, err)
	}
	// No --mode: the server's default, as before.
	req, err = planFlags{repo: "local/demo"}.request(changed(), []string{"A status page"})
	if err != nil || req.Mode != agentv1.ProjectMode_PROJECT_MODE_UNSPECIFIED || req.Request != "A status page" {
		t.Errorf("default plan: %v, %v", req, err)
	}
}

// A pool table: a line per worker with its state, issue, task, phase, attempt, pull
// request, last event's age and cost; an idle worker's cells are dashes. Then the merge
// queue in order, its group marked.
func TestPrintPool(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	resp := &agentv1.GetProjectPoolResponse{
		Workers: []*agentv1.ProjectWorker{
			{Number: 1, State: agentv1.WorkerState_WORKER_STATE_WORKING, ProjectTaskId: crewTask, Title: "Add a health endpoint", IssueNumber: 14,
				Phase: agentv1.JobPhase_JOB_PHASE_BUILDING, Attempt: 2, LastEventType: agentv1.JobEventType_JOB_EVENT_TYPE_THOUGHT,
				LastEventTime: timestamppb.New(now.Add(-3 * time.Minute)), Usage: &typev1.Usage{CostMicros: 123_400}},
			{Number: 2, State: agentv1.WorkerState_WORKER_STATE_CHECKING, Title: "Document the API", IssueNumber: 15,
				Phase: agentv1.JobPhase_JOB_PHASE_REVIEWING, Attempt: 1, PullRequest: &typev1.PullRequestRef{Number: 21, Url: "http://x/21"},
				LastEventType: agentv1.JobEventType_JOB_EVENT_TYPE_PULL_REQUEST_OPENED, LastEventTime: timestamppb.New(now.Add(-40 * time.Second)),
				Usage: &typev1.Usage{CostMicros: 50_000}},
			{Number: 3, State: agentv1.WorkerState_WORKER_STATE_IDLE},
		},
		ReadyTasks: 4,
		MergeQueue: []*agentv1.MergeQueueEntry{
			{Title: "Add a login page", IssueNumber: 12, PullRequest: &typev1.PullRequestRef{Number: 19}, StatusReason: "checking #19 and #20 together on 0123456789", InGroup: true},
			{Title: "Fix the footer", IssueNumber: 13, PullRequest: &typev1.PullRequestRef{Number: 20}, InGroup: true},
			{Title: "Tidy the README", IssueNumber: 16, PullRequest: &typev1.PullRequestRef{Number: 22}},
		},
	}
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	printPool(w, resp, now)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"WORKER STATE ISSUE TASK PHASE ATTEMPT PR LAST EVENT COST",
		"1 working #14 Add a health endpoint building 2 - thought 3m ago $0.1234",
		"2 checking #15 Document the API reviewing 1 PR #21 pull_request_opened 40s ago $0.0500",
		"3 idle - - - - - - $0.0000",
		"",
		"4 tasks ready for a worker",
		"",
		"MERGE QUEUE ISSUE TASK PR STATUS",
		"1 (group) #12 Add a login page PR #19 checking #19 and #20 together on 0123456789",
		"2 (group) #13 Fix the footer PR #20 -",
		"3 #16 Tidy the README PR #22 -",
	}
	if len(lines) != len(want) {
		t.Fatalf("pool table:\n%s", b.String())
	}
	for i := range want {
		if got := strings.Join(strings.Fields(lines[i]), " "); got != want[i] {
			t.Errorf("line %d: %q, want %q", i+1, got, want[i])
		}
	}
	// The columns line up: each header starts where its cells do.
	if strings.Index(lines[0], "PR") != strings.Index(lines[2], "PR #21") {
		t.Errorf("PR column not aligned:\n%s", b.String())
	}
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{-time.Second: "0s", 59 * time.Second: "59s", 61 * time.Minute: "1h", 47 * time.Hour: "47h", 72 * time.Hour: "3d"} {
		if got := age(d); got != want {
			t.Errorf("age(%v) = %q, want %q", d, got, want)
		}
	}
}

// A posted message as a table: to whom (a worker or the project), task, job, and its words.
func TestPrintMessage(t *testing.T) {
	sent := time.Date(2026, 11, 29, 12, 0, 0, 0, time.Local)
	cases := []struct {
		msg  *agentv1.ProjectMessage
		want []string
	}{
		{&agentv1.ProjectMessage{Id: "m1", Worker: 2, ProjectTaskId: crewTask, JobId: "j1", Text: "Use the store\nnot the cache", CreateTime: timestamppb.New(sent)},
			[]string{"message m1", "to worker 2", "task " + crewTask, "job j1", "sent 2026-11-29 12:00:00", "text Use the store", "not the cache"}},
		{&agentv1.ProjectMessage{Id: "m2", Text: "Prefer table tests"},
			[]string{"message m2", "to the project", "text Prefer table tests"}},
	}
	for _, c := range cases {
		var b bytes.Buffer
		w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		printMessage(w, c.msg)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
			got = append(got, strings.Join(strings.Fields(l), " "))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("message %s:\n%s\nwant lines %q", c.msg.Id, b.String(), c.want)
		}
	}
}

// fakeProjects is a ProjectService that answers from what the test set and keeps the
// requests it got.
type fakeProjects struct {
	agentv1.UnimplementedProjectServiceServer
	project *agentv1.Project
	events  []*agentv1.WatchProjectResponse
	pool    *agentv1.GetProjectPoolResponse

	mu       sync.Mutex
	requests []proto.Message
	gets     int
}

func (f *fakeProjects) got(m proto.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, m)
}

func (f *fakeProjects) last() proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) == 0 {
		return nil
	}
	return f.requests[len(f.requests)-1]
}

func (f *fakeProjects) PlanProject(_ context.Context, r *agentv1.PlanProjectRequest) (*agentv1.PlanProjectResponse, error) {
	f.got(r)
	return &agentv1.PlanProjectResponse{Project: f.project}, nil
}

func (f *fakeProjects) GetProject(_ context.Context, r *agentv1.GetProjectRequest) (*agentv1.GetProjectResponse, error) {
	f.got(r)
	f.mu.Lock()
	f.gets++
	f.mu.Unlock()
	return &agentv1.GetProjectResponse{Project: f.project}, nil
}

func (f *fakeProjects) PostProjectMessage(_ context.Context, r *agentv1.PostProjectMessageRequest) (*agentv1.PostProjectMessageResponse, error) {
	f.got(r)
	return &agentv1.PostProjectMessageResponse{Message: &agentv1.ProjectMessage{Id: "m1", ProjectId: r.ProjectId, Worker: r.Worker,
		ProjectTaskId: r.ProjectTaskId, Text: r.Text}}, nil
}

func (f *fakeProjects) InterruptWorker(_ context.Context, r *agentv1.InterruptWorkerRequest) (*agentv1.InterruptWorkerResponse, error) {
	f.got(r)
	return &agentv1.InterruptWorkerResponse{Worker: f.pool.Workers[0]}, nil
}

func (f *fakeProjects) ResumeWorker(_ context.Context, r *agentv1.ResumeWorkerRequest) (*agentv1.ResumeWorkerResponse, error) {
	f.got(r)
	return &agentv1.ResumeWorkerResponse{Worker: f.pool.Workers[0]}, nil
}

func (f *fakeProjects) GetProjectPool(_ context.Context, r *agentv1.GetProjectPoolRequest) (*agentv1.GetProjectPoolResponse, error) {
	f.got(r)
	return f.pool, nil
}

func (f *fakeProjects) WatchProject(r *agentv1.WatchProjectRequest, stream grpc.ServerStreamingServer[agentv1.WatchProjectResponse]) error {
	f.got(r)
	for _, ev := range f.events {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	return nil
}

// The crew commands against a ProjectService over a real gRPC connection: what each asks
// the API and what it prints.
func TestCrewCommands(t *testing.T) {
	at := timestamppb.New(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	fake := &fakeProjects{
		project: &agentv1.Project{Id: crewProject, Repo: "acme/api", Status: agentv1.ProjectStatus_PROJECT_STATUS_RUNNING,
			Mode: agentv1.ProjectMode_PROJECT_MODE_CREW, MaxWorkers: 4, MergePolicy: agentv1.MergePolicy_MERGE_POLICY_AUTO, AutoMergeMinQuality: 9,
			Description: "The open issues of acme/api",
			Phases: []*agentv1.ProjectPhase{{Number: 1, Name: "Issues", Tasks: []*agentv1.ProjectTask{
				{Id: crewTask, Title: "Add a health endpoint", Status: agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_IN_REVIEW, Worker: 2, IssueNumber: 14},
				{Id: "t15", Title: "Document the API", Status: agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_HUMAN_NEEDED, Worker: 1, IssueNumber: 15,
					PullRequest: &typev1.PullRequestRef{Number: 21}, CheckFailures: 3, Checks: "FAIL TestDocs", StatusReason: "its checks failed after two fixes"},
				{Id: "t16", Title: "Cache the index", Status: agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_CHECKING, Worker: 3, IssueNumber: 16,
					PullRequest: &typev1.PullRequestRef{Number: 22}, CheckFailures: 1, Checks: "vet: x.go:3 unused"},
			}}}},
		pool: &agentv1.GetProjectPoolResponse{Workers: []*agentv1.ProjectWorker{{Number: 2, State: agentv1.WorkerState_WORKER_STATE_INTERRUPTED,
			ProjectTaskId: crewTask, Title: "Add a health endpoint", IssueNumber: 14}}, ReadyTasks: 1},
		events: []*agentv1.WatchProjectResponse{
			{Id: 1, Time: at, Type: agentv1.ProjectEventType_PROJECT_EVENT_TYPE_STATUS_CHANGED, ProjectId: crewProject,
				Payload: &agentv1.WatchProjectResponse_StatusChange{StatusChange: &agentv1.ProjectStatusChange{
					PreviousStatus: agentv1.ProjectStatus_PROJECT_STATUS_PLANNED, Status: agentv1.ProjectStatus_PROJECT_STATUS_RUNNING}}},
			{Id: 0}, // a heartbeat
			{Id: 2, Time: at, Type: agentv1.ProjectEventType_PROJECT_EVENT_TYPE_JOB_EVENT, ProjectId: crewProject, Worker: 2, ProjectTaskId: crewTask,
				Payload: &agentv1.WatchProjectResponse_JobEvent{JobEvent: &agentv1.ProjectJobEvent{ProjectTaskId: crewTask, Event: &agentv1.WatchJobResponse{
					Type: agentv1.JobEventType_JOB_EVENT_TYPE_PHASE_CHANGED, Payload: &agentv1.WatchJobResponse_PhaseChanged{
						PhaseChanged: &agentv1.JobPhaseChange{Phase: agentv1.JobPhase_JOB_PHASE_BUILDING}}}}}},
			{Id: 3, Time: at, Type: agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_CHECKS_FAILED, ProjectId: crewProject, Worker: 1, ProjectTaskId: "t15",
				Payload: &agentv1.WatchProjectResponse_Task{Task: &agentv1.ProjectTaskChange{ProjectTaskId: "t15", Reason: "FAIL TestDocs\nmore"}}},
			{Id: 4, Time: at, Type: agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_PULL_REQUEST_OPENED, ProjectId: crewProject, Worker: 3, ProjectTaskId: "t16",
				Payload: &agentv1.WatchProjectResponse_Task{Task: &agentv1.ProjectTaskChange{ProjectTaskId: "t16",
					PullRequest: &typev1.PullRequestRef{Number: 22, Url: "http://forge/acme/api/pulls/22"}}}},
			{Id: 5, Time: at, Type: agentv1.ProjectEventType_PROJECT_EVENT_TYPE_MESSAGE_POSTED, ProjectId: crewProject, Worker: 2, ProjectTaskId: crewTask,
				Payload: &agentv1.WatchProjectResponse_Message{Message: &agentv1.ProjectMessage{Worker: 2, Text: "Use the store"}}},
			{Id: 6, Time: at, Type: agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_STARTED, ProjectId: crewProject, Worker: 4, ProjectTaskId: "unknown-task-id",
				Payload: &agentv1.WatchProjectResponse_Task{Task: &agentv1.ProjectTaskChange{ProjectTaskId: "unknown-task-id"}}},
		},
	}
	serveAgent(t, func(s *grpc.Server) { agentv1.RegisterProjectServiceServer(s, fake) })
	run := func(t *testing.T, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := execute(context.Background(), args, strings.NewReader(""), &out, &errOut); code != 0 {
			t.Fatalf("thefold %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String()
	}
	squeezed := func(s string) []string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
		return out
	}
	wantLines := func(t *testing.T, out string, want ...string) {
		t.Helper()
		lines := squeezed(out)
		for _, w := range want {
			if !slices.Contains(lines, w) {
				t.Errorf("no line %q in:\n%s", w, out)
			}
		}
	}

	t.Run("plan", func(t *testing.T) {
		out := run(t, "projects", "plan", "--mode", "crew", "--repo", "acme/api", "--max-workers", "4", "--merge-policy", "auto", "--min-quality", "9",
			"--check-command", "go test ./...")
		want := &agentv1.PlanProjectRequest{Repo: "acme/api", Mode: agentv1.ProjectMode_PROJECT_MODE_CREW, MaxWorkers: 4,
			MergePolicy: agentv1.MergePolicy_MERGE_POLICY_AUTO, AutoMergeMinQuality: 9, CheckCommand: "go test ./..."}
		got := proto.Clone(fake.last()).(*agentv1.PlanProjectRequest)
		if got.RequestId == "" {
			t.Error("the plan went without a request_id")
		}
		got.RequestId = ""
		if !proto.Equal(got, want) {
			t.Errorf("PlanProject %v, want %v", got, want)
		}
		wantLines(t, out, "mode crew", "workers 4", "merge auto, review quality at least 9")
	})
	t.Run("get", func(t *testing.T) {
		out := run(t, "projects", "get", crewProject)
		wantLines(t, out, "mode crew", "checks the sandbox's validation (build, lint, tests)",
			crewTask+" in_review w2 #14 - Add a health endpoint",
			"t15 human_needed w1 #15 PR #21 checks failed 3× Document the API — needs a person: its checks failed after two fixes",
			"t16 checking w3 #16 PR #22 checks failed 1× Cache the index — checks: vet: x.go:3 unused")
		// The task columns line up.
		lines := strings.Split(out, "\n")
		var starts []int
		for _, l := range lines {
			if i := strings.Index(l, "#1"); strings.HasPrefix(l, "  ") && i > 0 {
				starts = append(starts, i)
			}
		}
		if len(starts) != 3 || starts[0] != starts[1] || starts[1] != starts[2] {
			t.Errorf("issue column at %v:\n%s", starts, out)
		}
	})
	t.Run("message", func(t *testing.T) {
		out := run(t, "projects", "message", crewProject, "--worker", "2", "Use", "the", "store")
		got := fake.last().(*agentv1.PostProjectMessageRequest)
		if got.ProjectId != crewProject || got.Worker != 2 || got.ProjectTaskId != "" || got.Text != "Use the store" {
			t.Errorf("PostProjectMessage %v", got)
		}
		if _, err := uuid.Parse(got.RequestId); err != nil {
			t.Errorf("request_id %q: %v", got.RequestId, err)
		}
		wantLines(t, out, "message m1", "to worker 2", "text Use the store")
		first := got.RequestId
		run(t, "projects", "message", crewProject, "--task", crewTask, "again")
		if got := fake.last().(*agentv1.PostProjectMessageRequest); got.RequestId == first || got.ProjectTaskId != crewTask || got.Worker != 0 {
			t.Errorf("a second message %v (the first's request_id %s)", got, first)
		}
		run(t, "projects", "message", crewProject, "--request-id", "retry-7", "to", "everyone")
		if got := fake.last().(*agentv1.PostProjectMessageRequest); got.RequestId != "retry-7" || got.Worker != 0 || got.ProjectTaskId != "" {
			t.Errorf("a message with --request-id: %v", got)
		}
		out = run(t, "projects", "message", crewProject, "--worker", "2", "hi", "-o", "json")
		var m agentv1.ProjectMessage
		if err := protojson.Unmarshal([]byte(out), &m); err != nil || m.Text != "hi" || m.Worker != 2 || m.Id != "m1" {
			t.Errorf("json %s: %v", out, err)
		}
	})
	t.Run("interrupt and resume-worker", func(t *testing.T) {
		out := run(t, "projects", "interrupt", crewProject, "--task", crewTask, "--reason", "wait")
		want := &agentv1.InterruptWorkerRequest{ProjectId: crewProject, ProjectTaskId: crewTask, Reason: "wait"}
		if got := fake.last(); !proto.Equal(got, want) {
			t.Errorf("InterruptWorker %v, want %v", got, want)
		}
		wantLines(t, out, "2 interrupted #14 Add a health endpoint - - - - $0.0000")
		run(t, "projects", "resume-worker", crewProject, "--worker", "2")
		if got, want := fake.last(), (&agentv1.ResumeWorkerRequest{ProjectId: crewProject, Worker: 2}); !proto.Equal(got, want) {
			t.Errorf("ResumeWorker %v, want %v", got, want)
		}
	})
	t.Run("pool", func(t *testing.T) {
		out := run(t, "projects", "pool", crewProject)
		wantLines(t, out, "WORKER STATE ISSUE TASK PHASE ATTEMPT PR LAST EVENT COST", "1 tasks ready for a worker")
		out = run(t, "projects", "pool", crewProject, "-o", "yaml")
		if !strings.Contains(out, "ready_tasks: 1") || !strings.Contains(out, "state: WORKER_STATE_INTERRUPTED") {
			t.Errorf("yaml: %s", out)
		}
	})
	t.Run("watch", func(t *testing.T) {
		fake.mu.Lock()
		fake.gets = 0
		fake.mu.Unlock()
		out := run(t, "projects", "watch", crewProject)
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			_, rest, _ := strings.Cut(l, "  ") // the time
			lines = append(lines, rest)
		}
		want := []string{
			"project planned → running ",
			"[w2 #14] phase building",
			"[w1 #15] checks failed: FAIL TestDocs",
			"[w3 #16] pull request opened PR #22 http://forge/acme/api/pulls/22",
			"[w2 #14] message: Use the store",
			"[w4 unknown-] started",
		}
		if !slices.Equal(lines, want) {
			t.Errorf("watch lines\n%q\nwant\n%q", lines, want)
		}
		// The issues are asked for once, and once more for the task the project did not know.
		if fake.gets != 2 {
			t.Errorf("%d GetProject calls, want 2", fake.gets)
		}
	})
}

// A project that is not a crew's watches and shows as before: no worker tags, no crew
// columns, and no extra call to the API.
func TestNonCrewProjectUnchanged(t *testing.T) {
	p := &agentv1.Project{Id: "p1", Repo: "local/demo", Status: agentv1.ProjectStatus_PROJECT_STATUS_PLANNED, Description: "A status page",
		Mode: agentv1.ProjectMode_PROJECT_MODE_SESSION,
		Phases: []*agentv1.ProjectPhase{{Number: 1, Name: "Store", Tasks: []*agentv1.ProjectTask{
			{Id: "a", Title: "Write the store", Status: agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING},
			{Id: "b", Title: "Add the API", Status: agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING, DependsOn: []string{"a"}}}}}}
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	printPlan(w, p)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "project  p1\nrepo     local/demo\nstatus   planned\nA status page\n\nphase 1  Store\n  a      pending  Write the store\n  b      pending  Add the API (after a)\n"
	if b.String() != want {
		t.Errorf("plan:\n%s\nwant:\n%s", b.String(), want)
	}
	ev := &agentv1.WatchProjectResponse{Id: 9, Type: agentv1.ProjectEventType_PROJECT_EVENT_TYPE_JOB_EVENT,
		Payload: &agentv1.WatchProjectResponse_JobEvent{JobEvent: &agentv1.ProjectJobEvent{ProjectTaskId: "a", Event: &agentv1.WatchJobResponse{
			Type: agentv1.JobEventType_JOB_EVENT_TYPE_PHASE_CHANGED, Payload: &agentv1.WatchJobResponse_PhaseChanged{
				PhaseChanged: &agentv1.JobPhaseChange{Phase: agentv1.JobPhase_JOB_PHASE_BUILDING}}}}}}
	if got := projectEventLine(ev); got != "  [a] phase building" {
		t.Errorf("a job event: %q", got)
	}
}
