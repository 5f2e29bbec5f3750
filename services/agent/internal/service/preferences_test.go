package service_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/auth"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/agent/internal/service"
	"github.com/thefold/thefold/services/agent/internal/store"
)

// fakeTasks is the tasks service with the tasks it holds (GetTask; SetTaskStatus changes
// nothing).
type fakeTasks struct {
	tasksv1.TaskServiceClient
	tasks map[string]*tasksv1.Task
}

func (f *fakeTasks) GetTask(_ context.Context, req *tasksv1.GetTaskRequest, _ ...grpc.CallOption) (*tasksv1.GetTaskResponse, error) {
	t, ok := f.tasks[req.Id]
	if !ok {
		return nil, status.Error(codes.NotFound, "no such task")
	}
	return &tasksv1.GetTaskResponse{Task: t}, nil
}

func (f *fakeTasks) SetTaskStatus(_ context.Context, req *tasksv1.SetTaskStatusRequest, _ ...grpc.CallOption) (*tasksv1.SetTaskStatusResponse, error) {
	t, ok := f.tasks[req.Id]
	if !ok {
		return nil, status.Error(codes.NotFound, "no such task")
	}
	return &tasksv1.SetTaskStatusResponse{Task: t}, nil
}

type prefsEnv struct {
	st    *store.Store
	prefs agentv1.PreferencesServiceClient
	agent agentv1.AgentServiceClient
	g     *grpctest.Env
	t     *testing.T
}

// ctx is a context whose calls are made as user with roles.
func (e *prefsEnv) ctx(user string, roles ...string) context.Context {
	return e.g.Context(e.t, user, roles...)
}

// serverBudget is the server's default job budget in these tests.
var serverBudget = &typev1.Budget{MaxTokens: 1_000_000, MaxCostMicros: 25_000_000, MaxWallTime: durationpb.New(2 * time.Hour)}

// newPrefsEnv serves PreferencesService and AgentService over real gRPC on a fresh agent
// schema, with a tasks service holding taskA (alice's, in local/r).
func newPrefsEnv(t *testing.T) *prefsEnv {
	t.Helper()
	st, _ := testStore(t)
	tasks := &fakeTasks{tasks: map[string]*tasksv1.Task{taskA: {Id: taskA, Repo: "local/r", Status: tasksv1.TaskStatus_TASK_STATUS_BACKLOG}}}
	srv := service.New(st, service.Options{Queue: &queue{}, Heartbeat: time.Second, MaxWatches: 4, Tasks: tasks, Budget: serverBudget})
	e := grpctest.Start(t, func(s *grpc.Server) {
		agentv1.RegisterAgentServiceServer(s, srv)
		agentv1.RegisterPreferencesServiceServer(s, srv.Preferences())
	})
	return &prefsEnv{st: st, prefs: agentv1.NewPreferencesServiceClient(e.Conn), agent: agentv1.NewAgentServiceClient(e.Conn), g: e, t: t}
}

func (e *prefsEnv) get(t *testing.T, ctx context.Context, user string) *agentv1.Preferences {
	t.Helper()
	resp, err := e.prefs.GetPreferences(ctx, &agentv1.GetPreferencesRequest{UserId: user})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Preferences
}

func (e *prefsEnv) update(t *testing.T, ctx context.Context, p *agentv1.Preferences, paths ...string) *agentv1.Preferences {
	t.Helper()
	req := &agentv1.UpdatePreferencesRequest{Preferences: p}
	if len(paths) > 0 {
		req.UpdateMask = &fieldmaskpb.FieldMask{Paths: paths}
	}
	resp, err := e.prefs.UpdatePreferences(ctx, req)
	if err != nil {
		t.Fatalf("update %v: %v", paths, err)
	}
	return resp.Preferences
}

// diff is "" when want and got are equal, else both as text; ignoreTime compares
// preferences without their update time.
func diff(want, got proto.Message, ignoreTime ...bool) string {
	if len(ignoreTime) > 0 && ignoreTime[0] {
		want, got = proto.Clone(want), proto.Clone(got)
		for _, m := range []proto.Message{want, got} {
			if p, ok := m.(*agentv1.Preferences); ok && p != nil {
				p.UpdateTime = nil
			}
		}
	}
	if proto.Equal(want, got) {
		return ""
	}
	return fmt.Sprintf("want %v\n got %v", want, got)
}

const ignoreTime = true

func defaults(user string) *agentv1.Preferences {
	return &agentv1.Preferences{
		UserId: user, SubAgentMerge: aiv1.MergeStrategy_MERGE_STRATEGY_CONCATENATE, BudgetMode: aiv1.BudgetMode_BUDGET_MODE_BALANCED,
		JobBudget: &typev1.Budget{}, Notifications: &agentv1.NotificationSettings{ReviewReady: true, JobCompleted: true, JobFailed: true, Clarification: true},
	}
}

// What was never set reads as the defaults; an update changes what its mask names and
// nothing else, and returns what GetPreferences then returns.
func TestPreferencesDefaultsAndMaskedUpdates(t *testing.T) {
	e := newPrefsEnv(t)
	ctx := e.ctx(alice)
	got := e.get(t, ctx, "")
	if d := diff(defaults(alice), got); d != "" {
		t.Fatalf("defaults:\n%s", d)
	}
	if got.UpdateTime != nil {
		t.Errorf("never-set preferences have an update time: %v", got.UpdateTime)
	}
	if d := diff(got, e.get(t, ctx, alice)); d != "" {
		t.Errorf("user_id naming the caller differs from an empty one:\n%s", d)
	}

	want := defaults(alice)
	steps := []struct {
		name  string
		in    *agentv1.Preferences
		paths []string
		apply func(w *agentv1.Preferences)
	}{
		{"sub-agents on, the rest left", &agentv1.Preferences{SubAgentsEnabled: true, BudgetMode: aiv1.BudgetMode_BUDGET_MODE_AGGRESSIVE_SAVE},
			[]string{"sub_agents_enabled"}, func(w *agentv1.Preferences) { w.SubAgentsEnabled = true }},
		{"merge and budget mode", &agentv1.Preferences{SubAgentMerge: aiv1.MergeStrategy_MERGE_STRATEGY_AI_MERGE, BudgetMode: aiv1.BudgetMode_BUDGET_MODE_QUALITY_FIRST},
			[]string{"sub_agent_merge", "budget_mode"}, func(w *agentv1.Preferences) {
				w.SubAgentMerge, w.BudgetMode = aiv1.MergeStrategy_MERGE_STRATEGY_AI_MERGE, aiv1.BudgetMode_BUDGET_MODE_QUALITY_FIRST
			}},
		{"one model", &agentv1.Preferences{DefaultModels: map[string]string{"coding": "claude-sonnet-4-5", "review": "ignored"}},
			[]string{"default_models.coding"}, func(w *agentv1.Preferences) { w.DefaultModels = map[string]string{"coding": "claude-sonnet-4-5"} }},
		{"the whole map", &agentv1.Preferences{DefaultModels: map[string]string{"planning": "big", "chat": "small"}},
			[]string{"default_models"}, func(w *agentv1.Preferences) { w.DefaultModels = map[string]string{"planning": "big", "chat": "small"} }},
		{"an empty value removes the entry", &agentv1.Preferences{}, []string{"default_models.chat"},
			func(w *agentv1.Preferences) { w.DefaultModels = map[string]string{"planning": "big"} }},
		{"one cap", &agentv1.Preferences{JobBudget: &typev1.Budget{MaxCostMicros: 2_500_000, MaxTokens: 7}}, []string{"job_budget.max_cost_micros"},
			func(w *agentv1.Preferences) { w.JobBudget.MaxCostMicros = 2_500_000 }},
		{"wall time", &agentv1.Preferences{JobBudget: &typev1.Budget{MaxWallTime: durationpb.New(30 * time.Minute)}}, []string{"job_budget.max_wall_time"},
			func(w *agentv1.Preferences) { w.JobBudget.MaxWallTime = durationpb.New(30 * time.Minute) }},
		{"one notification", &agentv1.Preferences{Notifications: &agentv1.NotificationSettings{}}, []string{"notifications.review_ready"},
			func(w *agentv1.Preferences) { w.Notifications.ReviewReady = false }},
		// Output-only fields in the request are ignored.
		{"output only ignored", &agentv1.Preferences{UserId: alice, UpdateTime: timestamppb.New(time.Unix(0, 0)), SubAgentsEnabled: true},
			[]string{"sub_agents_enabled"}, func(*agentv1.Preferences) {}},
	}
	for _, s := range steps {
		s.apply(want)
		got := e.update(t, ctx, s.in, s.paths...)
		if d := diff(want, got, ignoreTime); d != "" {
			t.Fatalf("%s::\n%s", s.name, d)
		}
		if got.UpdateTime == nil || got.UpdateTime.AsTime().Year() < 2000 {
			t.Fatalf("%s: update time %v", s.name, got.UpdateTime)
		}
		if d := diff(got, e.get(t, ctx, "")); d != "" {
			t.Fatalf("%s: read back:\n%s", s.name, d)
		}
	}
	// The same update twice leaves the same preferences.
	again := e.update(t, ctx, &agentv1.Preferences{Notifications: &agentv1.NotificationSettings{}}, "notifications.review_ready")
	if d := diff(want, again, ignoreTime); d != "" {
		t.Fatalf("repeated update:\n%s", d)
	}
	// UNSPECIFIED reads as what it means.
	got = e.update(t, ctx, &agentv1.Preferences{}, "sub_agent_merge", "budget_mode")
	if got.SubAgentMerge != aiv1.MergeStrategy_MERGE_STRATEGY_CONCATENATE || got.BudgetMode != aiv1.BudgetMode_BUDGET_MODE_BALANCED {
		t.Fatalf("unspecified merge and mode read as %v, %v", got.SubAgentMerge, got.BudgetMode)
	}
	// An empty mask sets every field: what the request leaves unset goes back to its default.
	got = e.update(t, ctx, &agentv1.Preferences{BudgetMode: aiv1.BudgetMode_BUDGET_MODE_AGGRESSIVE_SAVE, JobBudget: &typev1.Budget{MaxTokens: 5000}})
	want = defaults(alice)
	want.BudgetMode, want.JobBudget.MaxTokens = aiv1.BudgetMode_BUDGET_MODE_AGGRESSIVE_SAVE, 5000
	if d := diff(want, got, ignoreTime); d != "" {
		t.Fatalf("empty mask:\n%s", d)
	}
	// Bob's are his own.
	if d := diff(defaults(bob), e.get(t, e.ctx(bob), "")); d != "" {
		t.Fatalf("bob's:\n%s", d)
	}
}

// Every malformed request is INVALID_ARGUMENT naming its field, and changes nothing.
func TestPreferencesMalformedInput(t *testing.T) {
	e := newPrefsEnv(t)
	ctx := e.ctx(alice)
	update := func(p *agentv1.Preferences, paths ...string) func() error {
		return func() error {
			req := &agentv1.UpdatePreferencesRequest{Preferences: p}
			if paths != nil {
				req.UpdateMask = &fieldmaskpb.FieldMask{Paths: paths}
			}
			_, err := e.prefs.UpdatePreferences(ctx, req)
			return err
		}
	}
	models := func(k, v string) *agentv1.Preferences {
		return &agentv1.Preferences{DefaultModels: map[string]string{k: v}}
	}
	budget := func(b *typev1.Budget) *agentv1.Preferences { return &agentv1.Preferences{JobBudget: b} }
	cases := []struct {
		method, field, name string
		call                func() error
	}{
		{"GetPreferences", "user_id", "not a user id", func() error {
			_, err := e.prefs.GetPreferences(ctx, &agentv1.GetPreferencesRequest{UserId: "two words"})
			return err
		}},
		{"UpdatePreferences", "preferences", "no preferences", update(nil, "sub_agents_enabled")},
		{"UpdatePreferences", "preferences.user_id", "not a user id", update(&agentv1.Preferences{UserId: strings.Repeat("u", 300)}, "sub_agents_enabled")},
		{"UpdatePreferences", "update_mask", "unknown path", update(&agentv1.Preferences{}, "colour")},
		{"UpdatePreferences", "update_mask", "output-only path", update(&agentv1.Preferences{}, "update_time")},
		{"UpdatePreferences", "update_mask", "user_id path", update(&agentv1.Preferences{}, "user_id")},
		{"UpdatePreferences", "update_mask", "unknown purpose path", update(models("deploy", "x"), "default_models.deploy")},
		{"UpdatePreferences", "update_mask", "unknown notification", update(&agentv1.Preferences{}, "notifications.sms")},
		{"UpdatePreferences", "preferences.sub_agent_merge", "unknown merge", update(&agentv1.Preferences{SubAgentMerge: 9}, "sub_agent_merge")},
		{"UpdatePreferences", "preferences.budget_mode", "unknown budget mode", update(&agentv1.Preferences{BudgetMode: 9}, "budget_mode")},
		{"UpdatePreferences", "preferences.budget_mode", "unknown budget mode, empty mask", update(&agentv1.Preferences{BudgetMode: 9})},
		{"UpdatePreferences", "preferences.default_models", "unknown purpose", update(models("deploy", "x"), "default_models")},
		{"UpdatePreferences", "preferences.default_models.coding", "model id too long", update(models("coding", strings.Repeat("m", 201)), "default_models.coding")},
		{"UpdatePreferences", "preferences.default_models.coding", "blank model id", update(models("coding", "   "), "default_models.coding")},
		{"UpdatePreferences", "preferences.default_models.review", "model id with spaces", update(models("review", "big model"), "default_models")},
		{"UpdatePreferences", "preferences.job_budget.max_tokens", "negative tokens", update(budget(&typev1.Budget{MaxTokens: -1}), "job_budget.max_tokens")},
		{"UpdatePreferences", "preferences.job_budget.max_cost_micros", "negative cost", update(budget(&typev1.Budget{MaxCostMicros: -1}), "job_budget")},
		{"UpdatePreferences", "preferences.job_budget.max_wall_time", "negative wall time",
			update(budget(&typev1.Budget{MaxWallTime: durationpb.New(-time.Minute)}), "job_budget.max_wall_time")},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		t.Run(c.method+"/"+c.name, func(t *testing.T) { grpctest.WantInvalid(t, c.call(), c.field) })
		covered[c.method] = true
	}
	for _, m := range agentv1.PreferencesService_ServiceDesc.Methods {
		if !covered[m.MethodName] {
			t.Errorf("%s has no malformed-input case", m.MethodName)
		}
	}
	// A mask path the contract does not have is named in the message.
	_, err := e.prefs.UpdatePreferences(ctx, &agentv1.UpdatePreferencesRequest{Preferences: &agentv1.Preferences{},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"sub_agents_enabled", "colour"}}})
	grpctest.WantCode(t, err, codes.InvalidArgument, `paths[1] "colour"`)
	// A mask that names only good fields is not refused for a bad one it does not name.
	e.update(t, ctx, &agentv1.Preferences{SubAgentsEnabled: true, BudgetMode: 9, JobBudget: &typev1.Budget{MaxTokens: -1}}, "sub_agents_enabled")
	got := e.get(t, ctx, "")
	if !got.SubAgentsEnabled || got.BudgetMode != aiv1.BudgetMode_BUDGET_MODE_BALANCED || got.JobBudget.MaxTokens != 0 {
		t.Fatalf("after the refused updates and one good one: %v", got)
	}
	// No RPC answers a caller without a token.
	_, err = e.prefs.GetPreferences(context.Background(), &agentv1.GetPreferencesRequest{})
	grpctest.WantCode(t, err, codes.Unauthenticated)
}

// Another user's preferences are NOT_FOUND to a member; an admin reads and changes anyone's.
func TestAnotherUsersPreferences(t *testing.T) {
	e := newPrefsEnv(t)
	e.update(t, e.ctx(alice), &agentv1.Preferences{SubAgentsEnabled: true}, "sub_agents_enabled")
	_, err := e.prefs.GetPreferences(e.ctx(bob), &agentv1.GetPreferencesRequest{UserId: alice})
	grpctest.WantCode(t, err, codes.NotFound)
	_, err = e.prefs.UpdatePreferences(e.ctx(bob), &agentv1.UpdatePreferencesRequest{Preferences: &agentv1.Preferences{UserId: alice},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"sub_agents_enabled"}}})
	grpctest.WantCode(t, err, codes.NotFound)
	if got := e.get(t, e.ctx(alice), ""); !got.SubAgentsEnabled {
		t.Fatal("bob's refused update changed alice's preferences")
	}
	// A service acting for an admin has the rights of a member only.
	_, err = e.prefs.GetPreferences(e.g.ServiceContext(t, "agent", "root"), &agentv1.GetPreferencesRequest{UserId: alice})
	grpctest.WantCode(t, err, codes.NotFound)

	admin := e.ctx("root", auth.RoleAdmin)
	if got := e.get(t, admin, alice); got.UserId != alice || !got.SubAgentsEnabled {
		t.Fatalf("the admin reads alice's as %v", got)
	}
	got := e.update(t, admin, &agentv1.Preferences{UserId: alice, BudgetMode: aiv1.BudgetMode_BUDGET_MODE_AGGRESSIVE_SAVE}, "budget_mode")
	if got.UserId != alice || got.BudgetMode != aiv1.BudgetMode_BUDGET_MODE_AGGRESSIVE_SAVE || !got.SubAgentsEnabled {
		t.Fatalf("the admin's update of alice's: %v", got)
	}
	if got := e.get(t, e.ctx(alice), ""); got.BudgetMode != aiv1.BudgetMode_BUDGET_MODE_AGGRESSIVE_SAVE {
		t.Fatalf("alice does not see the admin's change: %v", got)
	}
	if got := e.get(t, admin, ""); got.UserId != "root" || got.BudgetMode != aiv1.BudgetMode_BUDGET_MODE_BALANCED {
		t.Fatalf("the admin's own changed too: %v", got)
	}
}

// A job records its owner's preferences when it starts, and a cap its StartTask leaves
// unset comes from them before the server's default; a later change leaves the job alone.
func TestStartTaskRecordsThePreferences(t *testing.T) {
	e := newPrefsEnv(t)
	ctx := e.ctx(alice)
	prefs := e.update(t, ctx, &agentv1.Preferences{SubAgentsEnabled: true, SubAgentMerge: aiv1.MergeStrategy_MERGE_STRATEGY_AI_MERGE,
		DefaultModels: map[string]string{"coding": "claude-sonnet-4-5"},
		JobBudget:     &typev1.Budget{MaxCostMicros: 2_500_000, MaxWallTime: durationpb.New(30 * time.Minute)}},
		"sub_agents_enabled", "sub_agent_merge", "default_models", "job_budget")
	resp, err := e.agent.StartTask(ctx, &agentv1.StartTaskRequest{TaskId: taskA, BaseBranch: "main", Budget: &typev1.Budget{MaxTokens: 500}})
	if err != nil {
		t.Fatal(err)
	}
	j := resp.Job
	wantBudget := &typev1.Budget{MaxTokens: 500, MaxCostMicros: 2_500_000, MaxWallTime: durationpb.New(30 * time.Minute)}
	if d := diff(wantBudget, j.Budget); d != "" {
		t.Errorf("budget:\n%s", d)
	}
	if d := diff(prefs, j.Preferences); d != "" {
		t.Errorf("the job's preferences:\n%s", d)
	}
	e.update(t, ctx, &agentv1.Preferences{}, "sub_agents_enabled", "job_budget")
	got, err := e.agent.GetJob(ctx, &agentv1.GetJobRequest{Id: j.Id})
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(prefs, got.Job.Preferences); d != "" {
		t.Errorf("GetJob after a change of preferences:\n%s", d)
	}
	rec, err := e.st.Load(context.Background(), j.Id)
	if err != nil || !rec.Job.GetPreferences().GetSubAgentsEnabled() {
		t.Fatalf("the loop's read of the job: %v, %v", rec, err)
	}
	// With preferences that set no cap, the server's defaults fill what the request leaves.
	if _, err := e.agent.CancelJob(ctx, &agentv1.CancelJobRequest{Id: j.Id}); err != nil {
		t.Fatal(err)
	}
	resp, err = e.agent.StartTask(ctx, &agentv1.StartTaskRequest{TaskId: taskA, BaseBranch: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(serverBudget, resp.Job.Budget); d != "" {
		t.Errorf("budget without caps of the owner's:\n%s", d)
	}
	if p := resp.Job.Preferences; p.GetSubAgentsEnabled() || p.GetDefaultModels()["coding"] != "claude-sonnet-4-5" {
		t.Errorf("the second job's preferences: %v", p)
	}
	// A job made without StartTask (a project's) gets its owner's preferences too.
	if _, err := e.agent.CancelJob(ctx, &agentv1.CancelJobRequest{Id: resp.Job.Id}); err != nil {
		t.Fatal(err)
	}
	rec, _, err = e.st.Create(context.Background(), &agentv1.Job{OwnerId: alice, TaskId: taskA, Repo: "local/r"}, "", nil, store.RateLimit{}, (&queue{}).Enqueue)
	if err != nil || rec.Job.GetPreferences().GetDefaultModels()["coding"] != "claude-sonnet-4-5" || rec.Job.GetPreferences().GetUserId() != alice {
		t.Fatalf("a store-made job's preferences: %v, %v", rec, err)
	}
}

// A message that names no model is answered by the owner's chat model, when they chose one;
// a model the message names wins.
func TestChatUsesThePreferredModel(t *testing.T) {
	e := newChatEnv(t)
	ctx := e.ctx(alice)
	if _, err := e.st.UpdatePreferences(context.Background(), alice, &agentv1.Preferences{DefaultModels: map[string]string{"chat": "small-chat"}},
		[]string{"default_models.chat"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ asked, want string }{{"", "small-chat"}, {"named", "named"}} {
		conv := e.conversation(t, alice, "c")
		resp, err := e.chat.SendMessage(ctx, &agentv1.SendMessageRequest{ConversationId: conv.Id, Text: "hi", Model: c.asked})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := e.st.GetReply(context.Background(), alice, conv.Id, resp.Reply.Id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Model != c.want {
			t.Fatalf("asked %q: the reply's model %q, want %q", c.asked, rec.Model, c.want)
		}
	}
	// Bob chose none: the policy chooses.
	conv := e.conversation(t, bob, "b")
	resp, err := e.chat.SendMessage(e.ctx(bob), &agentv1.SendMessageRequest{ConversationId: conv.Id, Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := e.st.GetReply(context.Background(), bob, conv.Id, resp.Reply.Id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Model != "" {
		t.Fatalf("bob's reply's model %q", rec.Model)
	}
}
