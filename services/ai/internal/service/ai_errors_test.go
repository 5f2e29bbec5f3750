package service

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/embed"
	"github.com/thefold/thefold/pkg/fakellm"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/ai/internal/engine"
	"github.com/thefold/thefold/services/ai/internal/store"
)

var planAnswer = map[string]any{"summary": "s", "steps": []map[string]any{
	{"id": "s1", "action": "create", "path": "a.go", "description": "a", "depends_on": []string{}}}}

func planReq() *aiv1.PlanTaskRequest { return &aiv1.PlanTaskRequest{Task: testTask} }

func wantCode(t *testing.T, err error, code codes.Code, in string) *status.Status {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code || !strings.Contains(st.Message(), in) {
		t.Fatalf("got %v %q, want %v containing %q", st.Code(), st.Message(), code, in)
	}
	return st
}

func reason(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.Reason
		}
	}
	return ""
}

// A reply that breaks the schema gets one repair round; the repaired answer is used and
// both provider calls are billed.
func TestMalformedAnswerIsRepaired(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{
		{Text: `Sure! {"summary": "s", "steps": [{"id": "s1", "action": "teleport"}]}`},
		answer(t, planAnswer),
	}}, aiEnvOptions{provider: "anthropic"})
	resp, err := e.ai.PlanTask(e.alice, planReq())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.Calls != 2 || len(resp.Plan.Steps) != 1 {
		t.Fatalf("usage %v plan %v", resp.Usage, resp.Plan)
	}
	reqs := e.fake.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "teleport") {
		t.Fatalf("the repair request must quote the bad reply; got %d requests", len(reqs))
	}
}

// A reply that is still wrong after the repair round is a clear UNAVAILABLE naming the
// problem, recorded in the ledger as invalid output.
func TestUnrepairableAnswerIsAClearError(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{{Text: "I cannot do JSON today.", Times: 2}}},
		aiEnvOptions{provider: "anthropic"})
	_, err := e.ai.PlanTask(e.alice, planReq())
	st := wantCode(t, err, codes.Unavailable, "cannot be used, also after a repair round")
	if reason(st) != engine.ReasonModelOutputInvalid {
		t.Errorf("reason %q", reason(st))
	}
	recs, err := e.reg.ListUsageRecords(e.admin, &aiv1.ListUsageRecordsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs.Records) != 1 || recs.Records[0].Outcome != aiv1.CallOutcome_CALL_OUTCOME_INVALID_OUTPUT || recs.Records[0].Usage.Calls != 2 {
		t.Fatalf("ledger %v", recs.Records)
	}
}

// Provider failures are retried by the policy (honouring retry-after), fail over, and end
// in a clear status when nothing answers.
func TestProviderErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		rs    []fakellm.Response
		code  codes.Code // OK: the call succeeds
		in    string
		calls int32
		waits []time.Duration // the retry-after waits, when the provider asked for them
	}{
		{"429 with retry-after, then an answer",
			[]fakellm.Response{{Error: &fakellm.Error{Status: 429, RetryAfter: 7}}, answer(t, planAnswer)}, codes.OK, "", 2, []time.Duration{7 * time.Second}},
		{"529 overloaded, then an answer",
			[]fakellm.Response{{Error: &fakellm.Error{Type: "overloaded_error"}}, answer(t, planAnswer)}, codes.OK, "", 2, nil},
		{"429 on every attempt",
			[]fakellm.Response{{Error: &fakellm.Error{Status: 429, RetryAfter: 1}, RepeatLast: true}}, codes.ResourceExhausted, "rate-limited", 0, nil},
		{"500 on every attempt",
			[]fakellm.Response{{Error: &fakellm.Error{Status: 500, Message: "secret internal host 10.1.2.3"}, RepeatLast: true}}, codes.Unavailable, "HTTP 500", 0, nil},
		{"401 is not retried",
			[]fakellm.Response{{Error: &fakellm.Error{Status: 401}}}, codes.FailedPrecondition, "API key", 0, nil},
		{"malformed JSON body",
			[]fakellm.Response{{Raw: `{"id": "x", "content": [`, RepeatLast: true}}, codes.Unavailable, "anthropic", 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newAIEnv(t, &fakellm.Script{Anthropic: tc.rs}, aiEnvOptions{provider: "anthropic"})
			resp, err := e.ai.PlanTask(e.alice, &aiv1.PlanTaskRequest{Task: testTask, Model: &aiv1.ModelChoice{Model: "claude-sonnet-4-5"}})
			if tc.code == codes.OK {
				if err != nil {
					t.Fatal(err)
				}
				if resp.Usage.Calls != tc.calls {
					t.Errorf("calls %d, want %d", resp.Usage.Calls, tc.calls)
				}
				for _, w := range tc.waits {
					if got := e.waits(); len(got) == 0 || got[0] < w {
						t.Errorf("waits %v, want the first at least %v (retry-after)", got, w)
					}
				}
				return
			}
			st := wantCode(t, err, tc.code, tc.in)
			if strings.Contains(st.Message(), "10.1.2.3") {
				t.Errorf("provider text leaked: %q", st.Message())
			}
		})
	}
}

// A provider that does not answer within the attempt timeout is UNAVAILABLE, not a hang.
func TestSilentProviderIsUnavailable(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{{Text: "{}", Latency: fakellm.Duration(time.Minute), RepeatLast: true}}},
		aiEnvOptions{provider: "anthropic", cfg: func(c *engine.Config) { c.AttemptTimeout = 200 * time.Millisecond; c.MaxAttempts = 2 }})
	_, err := e.ai.PlanTask(e.alice, planReq())
	wantCode(t, err, codes.Unavailable, "anthropic")
}

// A retried request_id is answered from the record without a second model call; the same
// id for another request is refused.
func TestRequestIDAnswersRetriesFromTheRecord(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{answer(t, planAnswer)}}, aiEnvOptions{provider: "anthropic"})
	req := &aiv1.PlanTaskRequest{RequestId: "r-1", Task: testTask}
	first, err := e.ai.PlanTask(e.alice, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.ai.PlanTask(e.alice, req)
	if err != nil {
		t.Fatal(err)
	}
	if again.Plan.Summary != first.Plan.Summary || again.Usage.CostMicros != first.Usage.CostMicros {
		t.Errorf("retry answered %v, first %v", again, first)
	}
	if n := len(e.fake.Requests()); n != 1 {
		t.Fatalf("the model was called %d times", n)
	}
	other := &aiv1.PlanTaskRequest{RequestId: "r-1", Task: &aiv1.TaskSpec{Title: "something else"}}
	_, err = e.ai.PlanTask(e.alice, other)
	wantCode(t, err, codes.InvalidArgument, "request_id")
	usage, err := e.reg.GetUsage(e.admin, &aiv1.GetUsageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if usage.Total.GetCalls() != 1 {
		t.Errorf("ledger counts %d calls, want 1", usage.Total.GetCalls())
	}
}

// With no provider configured, Embed works with the local embedder and every generating
// RPC answers FAILED_PRECONDITION naming the settings — never a silent fake.
func TestNoProviderConfigured(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, nil, aiEnvOptions{})
	emb, err := e.ai.Embed(e.alice, &aiv1.EmbedRequest{Texts: []string{"retry the HTTP request", "parseHTTPRequest"}})
	if err != nil {
		t.Fatal(err)
	}
	if emb.Model != "local@2" || emb.Dimensions != 384 || len(emb.Embeddings) != 2 || len(emb.Embeddings[0].Values) != 384 {
		t.Fatalf("embed %v %d", emb.Model, emb.Dimensions)
	}
	for _, c := range rpcCases() {
		_, err := c.call(e.alice, e.ai)
		wantCode(t, err, codes.FailedPrecondition, "THEFOLD_AI_PROVIDER")
	}
	_, err = e.ai.Complete(e.alice, &aiv1.CompleteRequest{Messages: []*aiv1.ChatMessage{{Role: aiv1.MessageRole_MESSAGE_ROLE_USER, Content: "hi"}}})
	wantCode(t, err, codes.FailedPrecondition, "THEFOLD_AI_PROVIDER")
	_, err = e.ai.Embed(e.alice, &aiv1.EmbedRequest{Texts: []string{"x"}, Model: "text-embedding-3-small"})
	wantCode(t, err, codes.FailedPrecondition, "THEFOLD_AI_PROVIDER")
	if n := len(e.fake.Requests()); n != 0 {
		t.Fatalf("fakellm got %d requests with no provider configured", n)
	}
}

// A key in the provider's own variable (api_key_ref) makes it usable without
// THEFOLD_AI_PROVIDER.
func TestKeyFromAPIKeyRef(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, nil, aiEnvOptions{env: map[string]string{"OPENAI_API_KEY": "sk-test"}})
	sel, err := e.reg.SelectModel(e.alice, &aiv1.SelectModelRequest{Complexity: 5, Tags: []string{"coding"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := sel.Model.GetProviderId(); p == "" {
		t.Fatalf("selected %v", sel.Model)
	}
	if !strings.HasPrefix(sel.Model.Name, "gpt-") {
		t.Errorf("selected %s, want an OpenAI model (the only provider with a key)", sel.Model.Name)
	}
	ps, err := e.reg.ListProviders(e.admin, &aiv1.ListProvidersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps.Providers {
		if want := p.Name == "openai"; p.ApiKeyConfigured != want {
			t.Errorf("provider %s: api_key_configured %v, want %v", p.Name, p.ApiKeyConfigured, want)
		}
	}
}

// The built-in embedder's names: every answer names the exact version, whichever way the
// request named it, and version 1 is pkg/embed's Local (vectors stored long ago stay
// comparable with new ones).
func TestEmbedLocalVersions(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, nil, aiEnvOptions{})
	text := []string{"retry the HTTP request"}
	v1 := embed.NewLocal(256).Embed(text)[0]
	v2, err := embed.NewTrained(256)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]float32{"local@1": v1, "local@2": v2.Embed(text)[0]}
	cases := []struct {
		model     string
		dims      int32
		wantModel string
		wantDims  int32
	}{
		{"", 0, "local@2", 384},
		{"local", 0, "local@2", 384},
		{"local@1", 0, "local@1", 384},
		{"local@1", 256, "local@1", 256},
		{"local@2", 256, "local@2", 256},
		{"local-256", 0, "local@2", 256},
		{"local", 256, "local@2", 256},
	}
	for _, c := range cases {
		resp, err := e.ai.Embed(e.alice, &aiv1.EmbedRequest{Texts: text, Model: c.model, Dimensions: c.dims})
		if err != nil {
			t.Fatalf("%q/%d: %v", c.model, c.dims, err)
		}
		if resp.GetModel() != c.wantModel || resp.GetDimensions() != c.wantDims || len(resp.GetEmbeddings()[0].GetValues()) != int(c.wantDims) {
			t.Errorf("%q/%d: got %s/%d, want %s/%d", c.model, c.dims, resp.GetModel(), resp.GetDimensions(), c.wantModel, c.wantDims)
		}
		if c.wantDims == 256 && !slices.Equal(resp.GetEmbeddings()[0].GetValues(), want[c.wantModel]) {
			t.Errorf("%q/%d: not the vector of pkg/embed's %s", c.model, c.dims, c.wantModel)
		}
	}
	// local@2 has a smallest size: asking it for less is the caller's mistake.
	_, err = e.ai.Embed(e.alice, &aiv1.EmbedRequest{Texts: text, Model: "local@2", Dimensions: 64})
	wantCode(t, err, codes.InvalidArgument, "dimensions")
	if engine.LocalName(engine.CurrentLocal) != "local@2" {
		t.Errorf("current local version %s; a new version needs this test and the memory service's migration reviewed", engine.LocalName(engine.CurrentLocal))
	}
}

// A service may embed as itself, for no owner (the memory service's re-embedding of every
// owner's memories), and nothing else: the generating RPCs act for an owner.
func TestEmbedAsService(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, nil, aiEnvOptions{})
	memory := auth.AsService(e.alice, e.grpc.ServiceSigner(t, "memory"))
	resp, err := e.ai.Embed(memory, &aiv1.EmbedRequest{Texts: []string{"retry the request"}})
	if err != nil || resp.GetModel() != "local@2" {
		t.Fatalf("Embed as the memory service: %v %v", resp.GetModel(), err)
	}
	_, err = e.ai.Complete(memory, &aiv1.CompleteRequest{Messages: []*aiv1.ChatMessage{{Role: aiv1.MessageRole_MESSAGE_ROLE_USER, Content: "hi"}}})
	wantCode(t, err, codes.PermissionDenied, "")
}

// Embeddings through a provider's API (OpenAI wire format).
func TestEmbedThroughProvider(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{}, aiEnvOptions{provider: "openai"})
	resp, err := e.ai.Embed(e.alice, &aiv1.EmbedRequest{Texts: []string{"a", "b"}, Model: "text-embedding-3-small", Dimensions: 256})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "text-embedding-3-small" || len(resp.Embeddings) != 2 || resp.Dimensions != 256 || resp.Usage.GetProvider() != "openai" {
		t.Fatalf("got model %s dims %d n %d usage %v", resp.Model, resp.Dimensions, len(resp.Embeddings), resp.Usage)
	}
}

// Complete with tools: the model's tool call comes back as a ToolUse; the tool result goes
// back and the model answers.
func TestCompleteWithTools(t *testing.T) {
	t.Parallel()
	for _, prov := range []string{"anthropic", "openai", "gemini"} {
		t.Run(prov, func(t *testing.T) {
			t.Parallel()
			e := newAIEnv(t, scriptFor(prov,
				fakellm.Response{ToolCalls: []fakellm.ToolCall{{Name: "read_file", Input: []byte(`{"path":"go.mod"}`)}}},
				fakellm.Response{Text: "The module is example.com/x."},
			), aiEnvOptions{provider: prov})
			schema, _ := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []any{"path"}})
			req := &aiv1.CompleteRequest{
				Messages: []*aiv1.ChatMessage{{Role: aiv1.MessageRole_MESSAGE_ROLE_USER, Content: "What is the module name?"}},
				Tools:    []*aiv1.Tool{{Name: "read_file", Description: "reads a file", InputSchema: schema}},
			}
			first, err := e.ai.Complete(e.alice, req)
			if err != nil {
				t.Fatal(err)
			}
			if first.StopReason != aiv1.StopReason_STOP_REASON_TOOL_USE || len(first.ToolUses) != 1 ||
				first.ToolUses[0].Name != "read_file" || first.ToolUses[0].Input.Fields["path"].GetStringValue() != "go.mod" {
				t.Fatalf("first %v", first)
			}
			tu := first.ToolUses[0]
			req.Messages = append(req.Messages,
				&aiv1.ChatMessage{Role: aiv1.MessageRole_MESSAGE_ROLE_ASSISTANT, Blocks: []*aiv1.ContentBlock{{Block: &aiv1.ContentBlock_ToolUse{ToolUse: tu}}}},
				&aiv1.ChatMessage{Role: aiv1.MessageRole_MESSAGE_ROLE_USER, Blocks: []*aiv1.ContentBlock{{Block: &aiv1.ContentBlock_ToolResult{ToolResult: &aiv1.ToolResult{ToolUseId: tu.Id, Content: "module example.com/x"}}}}})
			second, err := e.ai.Complete(e.alice, req)
			if err != nil {
				t.Fatal(err)
			}
			if second.Content != "The module is example.com/x." || second.StopReason != aiv1.StopReason_STOP_REASON_END_TURN {
				t.Fatalf("second %v", second)
			}
		})
	}
}

// Complete with a JSON schema parses the reply into json.
func TestCompleteWithJSONSchema(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{{Text: "```json\n{\"answer\": 42}\n```"}}}, aiEnvOptions{provider: "anthropic"})
	schema, _ := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "integer"}}, "required": []any{"answer"}})
	resp, err := e.ai.Complete(e.alice, &aiv1.CompleteRequest{JsonSchema: schema,
		Messages: []*aiv1.ChatMessage{{Role: aiv1.MessageRole_MESSAGE_ROLE_USER, Content: "answer"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Json.Fields["answer"].GetNumberValue() != 42 {
		t.Fatalf("json %v", resp.Json)
	}
}

// Malformed input on every AIService RPC is INVALID_ARGUMENT naming the field, before any
// model is called.
func TestAIServiceBadInput(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{}, aiEnvOptions{provider: "anthropic"})
	c := e.ai
	cases := []struct {
		name  string
		call  func(ctx context.Context) error
		field string
	}{
		{"confidence: no task", func(ctx context.Context) error {
			_, err := c.AssessConfidence(ctx, &aiv1.AssessConfidenceRequest{})
			return err
		}, "task"},
		{"complexity: bad tag", func(ctx context.Context) error {
			_, err := c.AssessComplexity(ctx, &aiv1.AssessComplexityRequest{Task: testTask, Model: &aiv1.ModelChoice{Tags: []string{"Bad Tag"}}})
			return err
		}, "model.tags"},
		{"plan: complexity 11", func(ctx context.Context) error {
			_, err := c.PlanTask(ctx, &aiv1.PlanTaskRequest{Task: testTask, Model: &aiv1.ModelChoice{Complexity: 11}})
			return err
		}, "model.complexity"},
		{"plan: request_id with spaces", func(ctx context.Context) error {
			_, err := c.PlanTask(ctx, &aiv1.PlanTaskRequest{RequestId: "a b", Task: testTask})
			return err
		}, "request_id"},
		{"generate: DELETE", func(ctx context.Context) error {
			_, err := c.GenerateFile(ctx, &aiv1.GenerateFileRequest{Task: testTask, File: &aiv1.FileSpec{Path: "a.go", Action: typev1.FileAction_FILE_ACTION_DELETE}})
			return err
		}, "file.action"},
		{"generate: path escapes", func(ctx context.Context) error {
			_, err := c.GenerateFile(ctx, &aiv1.GenerateFileRequest{Task: testTask, File: &aiv1.FileSpec{Path: "../etc/passwd", Action: typev1.FileAction_FILE_ACTION_CREATE}})
			return err
		}, "file.path"},
		{"generate: duplicate dependency", func(ctx context.Context) error {
			_, err := c.GenerateFile(ctx, &aiv1.GenerateFileRequest{Task: testTask, File: &aiv1.FileSpec{Path: "a.go", Action: typev1.FileAction_FILE_ACTION_CREATE},
				DependencyFiles: []*aiv1.ContextFile{{Path: "b.go"}, {Path: "b.go"}}})
			return err
		}, "dependency_files[1].path"},
		{"fix: nothing to fix", func(ctx context.Context) error {
			_, err := c.FixFile(ctx, &aiv1.FixFileRequest{Task: testTask, Path: "a.go"})
			return err
		}, "errors"},
		{"review: no files", func(ctx context.Context) error {
			_, err := c.ReviewCode(ctx, &aiv1.ReviewCodeRequest{Task: testTask})
			return err
		}, "files"},
		{"diagnose: nothing", func(ctx context.Context) error {
			_, err := c.DiagnoseFailure(ctx, &aiv1.DiagnoseFailureRequest{Task: testTask})
			return err
		}, "errors"},
		{"intervene: no attempts", func(ctx context.Context) error {
			_, err := c.Intervene(ctx, &aiv1.InterveneRequest{Task: testTask})
			return err
		}, "attempts"},
		{"decompose: no request", func(ctx context.Context) error {
			_, err := c.DecomposeProject(ctx, &aiv1.DecomposeProjectRequest{})
			return err
		}, "request"},
		{"revise: phase out of range", func(ctx context.Context) error {
			_, err := c.ReviseProjectPhase(ctx, &aiv1.ReviseProjectPhaseRequest{Request: "x", Plan: testPlan, PhaseIndex: 3})
			return err
		}, "phase_index"},
		{"review project: no plan", func(ctx context.Context) error {
			_, err := c.ReviewProject(ctx, &aiv1.ReviewProjectRequest{Request: "x"})
			return err
		}, "plan.phases"},
		{"order: cycle", func(ctx context.Context) error {
			_, err := c.PlanTaskOrder(ctx, &aiv1.PlanTaskOrderRequest{Tasks: []*aiv1.OrderableTask{
				{Id: "a", Title: "a", BlockedBy: []string{"b"}}, {Id: "b", Title: "b", BlockedBy: []string{"a"}}}})
			return err
		}, "tasks"},
		{"order: duplicate id", func(ctx context.Context) error {
			_, err := c.PlanTaskOrder(ctx, &aiv1.PlanTaskOrderRequest{Tasks: []*aiv1.OrderableTask{{Id: "a", Title: "a"}, {Id: "a", Title: "b"}}})
			return err
		}, "tasks[1].id"},
		{"complete: no messages", func(ctx context.Context) error { _, err := c.Complete(ctx, &aiv1.CompleteRequest{}); return err }, "messages"},
		{"complete: last from assistant", func(ctx context.Context) error {
			_, err := c.Complete(ctx, &aiv1.CompleteRequest{Messages: []*aiv1.ChatMessage{{Role: aiv1.MessageRole_MESSAGE_ROLE_ASSISTANT, Content: "x"}}})
			return err
		}, "messages[0].role"},
		{"complete: tool result for no tool use", func(ctx context.Context) error {
			_, err := c.Complete(ctx, &aiv1.CompleteRequest{Messages: []*aiv1.ChatMessage{{Role: aiv1.MessageRole_MESSAGE_ROLE_USER,
				Blocks: []*aiv1.ContentBlock{{Block: &aiv1.ContentBlock_ToolResult{ToolResult: &aiv1.ToolResult{ToolUseId: "nope"}}}}}}})
			return err
		}, "messages[0].blocks[0].tool_result.tool_use_id"},
		{"complete: bad schema", func(ctx context.Context) error {
			s, _ := structpb.NewStruct(map[string]any{"type": 12})
			_, err := c.Complete(ctx, &aiv1.CompleteRequest{JsonSchema: s, Messages: []*aiv1.ChatMessage{{Role: aiv1.MessageRole_MESSAGE_ROLE_USER, Content: "x"}}})
			return err
		}, "json_schema"},
		{"complete: temperature 3", func(ctx context.Context) error {
			tmp := 3.0
			_, err := c.Complete(ctx, &aiv1.CompleteRequest{Temperature: &tmp, Messages: []*aiv1.ChatMessage{{Role: aiv1.MessageRole_MESSAGE_ROLE_USER, Content: "x"}}})
			return err
		}, "temperature"},
		{"complete: image from the assistant", func(ctx context.Context) error {
			_, err := c.Complete(ctx, &aiv1.CompleteRequest{Messages: []*aiv1.ChatMessage{
				{Role: aiv1.MessageRole_MESSAGE_ROLE_ASSISTANT, Blocks: []*aiv1.ContentBlock{{Block: &aiv1.ContentBlock_Image{Image: &aiv1.Image{MediaType: "image/png", Data: pngBytes}}}}},
				{Role: aiv1.MessageRole_MESSAGE_ROLE_USER, Content: "x"}}})
			return err
		}, "messages[0].blocks[0].image"},
		{"complete: image mislabelled", func(ctx context.Context) error {
			_, err := c.Complete(ctx, &aiv1.CompleteRequest{Messages: []*aiv1.ChatMessage{imageMessage("image/gif", pngBytes)}})
			return err
		}, "messages[0].blocks[1].image.data"},
		// TestStreamCompleteBadInput has StreamComplete's whole table.
		{"stream: no messages", func(ctx context.Context) error {
			_, err := streamReply(ctx, c, &aiv1.StreamCompleteRequest{})
			return err
		}, "messages"},
		{"stream: image media type", func(ctx context.Context) error {
			_, err := streamReply(ctx, c, &aiv1.StreamCompleteRequest{Messages: []*aiv1.ChatMessage{imageMessage("image/tiff", pngBytes)}})
			return err
		}, "messages[0].blocks[1].image.media_type"},
		{"embed: no texts", func(ctx context.Context) error { _, err := c.Embed(ctx, &aiv1.EmbedRequest{}); return err }, "texts"},
		{"embed: 5 dimensions", func(ctx context.Context) error {
			_, err := c.Embed(ctx, &aiv1.EmbedRequest{Texts: []string{"x"}, Dimensions: 5})
			return err
		}, "dimensions"},
		{"embed: a local version that does not exist", func(ctx context.Context) error {
			_, err := c.Embed(ctx, &aiv1.EmbedRequest{Texts: []string{"x"}, Model: "local@99"})
			return err
		}, "model"},
		{"embed: a local size that is no number", func(ctx context.Context) error {
			_, err := c.Embed(ctx, &aiv1.EmbedRequest{Texts: []string{"x"}, Model: "local-big"})
			return err
		}, "model"},
		{"embed: a chat model", func(ctx context.Context) error {
			_, err := c.Embed(ctx, &aiv1.EmbedRequest{Texts: []string{"x"}, Model: "claude-sonnet-4-5"})
			return err
		}, "model"},
		{"plan: sub-agent analysis too large", func(ctx context.Context) error {
			_, err := c.PlanTask(ctx, &aiv1.PlanTaskRequest{Task: testTask, EnrichedContext: strings.Repeat("x", maxText+1)})
			return err
		}, "enriched_context"},
		{"plan: a sub-agent role in the attribution", func(ctx context.Context) error {
			_, err := c.PlanTask(ctx, &aiv1.PlanTaskRequest{Task: testTask, Attribution: &aiv1.Attribution{Role: aiv1.SubAgentRole_SUB_AGENT_ROLE_PLANNER}})
			return err
		}, "attribution.role"},
		{"subagents: no task", func(ctx context.Context) error {
			_, err := c.RunSubAgents(ctx, &aiv1.RunSubAgentsRequest{Complexity: 6})
			return err
		}, "task"},
		{"subagents: request_id with spaces", func(ctx context.Context) error {
			_, err := c.RunSubAgents(ctx, &aiv1.RunSubAgentsRequest{RequestId: "a #planner", Task: testTask, Complexity: 6})
			return err
		}, "request_id"},
		{"subagents: complexity below a team", func(ctx context.Context) error {
			_, err := c.RunSubAgents(ctx, &aiv1.RunSubAgentsRequest{Task: testTask, Complexity: 4})
			return err
		}, "complexity"},
		{"subagents: complexity unset", func(ctx context.Context) error {
			_, err := c.RunSubAgents(ctx, &aiv1.RunSubAgentsRequest{Task: testTask})
			return err
		}, "complexity"},
		{"subagents: complexity 11", func(ctx context.Context) error {
			_, err := c.RunSubAgents(ctx, &aiv1.RunSubAgentsRequest{Task: testTask, Complexity: 11})
			return err
		}, "complexity"},
		{"subagents: unknown budget mode", func(ctx context.Context) error {
			_, err := c.RunSubAgents(ctx, &aiv1.RunSubAgentsRequest{Task: testTask, Complexity: 6, BudgetMode: 9})
			return err
		}, "budget_mode"},
		{"subagents: unknown merge", func(ctx context.Context) error {
			_, err := c.RunSubAgents(ctx, &aiv1.RunSubAgentsRequest{Task: testTask, Complexity: 6, Merge: 7})
			return err
		}, "merge"},
		{"subagents: path escapes", func(ctx context.Context) error {
			_, err := c.RunSubAgents(ctx, &aiv1.RunSubAgentsRequest{Task: testTask, Complexity: 6, ContextFiles: []*aiv1.ContextFile{{Path: "../x"}}})
			return err
		}, "context_files[0].path"},
		{"subagents: too many memories", func(ctx context.Context) error {
			_, err := c.RunSubAgents(ctx, &aiv1.RunSubAgentsRequest{Task: testTask, Complexity: 6, Memories: make([]*aiv1.MemoryFragment, maxListItems+1)})
			return err
		}, "memories"},
		{"subagents: tree path too long", func(ctx context.Context) error {
			_, err := c.RunSubAgents(ctx, &aiv1.RunSubAgentsRequest{Task: testTask, Complexity: 6, ProjectTree: []string{strings.Repeat("a", maxPath+1)}})
			return err
		}, "project_tree[0]"},
		{"subagents: negative max_cost_micros", func(ctx context.Context) error {
			_, err := c.RunSubAgents(ctx, &aiv1.RunSubAgentsRequest{Task: testTask, Complexity: 6, MaxCostMicros: -1})
			return err
		}, "max_cost_micros"},
		{"subagents: max_context_tokens too small", func(ctx context.Context) error {
			_, err := c.RunSubAgents(ctx, &aiv1.RunSubAgentsRequest{Task: testTask, Complexity: 6, MaxContextTokens: 100})
			return err
		}, "max_context_tokens"},
		{"subagents: max_context_tokens too large", func(ctx context.Context) error {
			_, err := c.RunSubAgents(ctx, &aiv1.RunSubAgentsRequest{Task: testTask, Complexity: 6, MaxContextTokens: 1 << 20})
			return err
		}, "max_context_tokens"},
		{"subagents: a role in the attribution", func(ctx context.Context) error {
			_, err := c.RunSubAgents(ctx, &aiv1.RunSubAgentsRequest{Task: testTask, Complexity: 6, Attribution: &aiv1.Attribution{Role: aiv1.SubAgentRole_SUB_AGENT_ROLE_TESTER}})
			return err
		}, "attribution.role"},
		{"subagents: an unknown role in the attribution", func(ctx context.Context) error {
			_, err := c.RunSubAgents(ctx, &aiv1.RunSubAgentsRequest{Task: testTask, Complexity: 6, Attribution: &aiv1.Attribution{Role: 42}})
			return err
		}, "attribution.role"},
		{"team estimate: complexity 0", func(ctx context.Context) error {
			_, err := c.EstimateSubAgentCost(ctx, &aiv1.EstimateSubAgentCostRequest{})
			return err
		}, "complexity"},
		{"team estimate: complexity 11", func(ctx context.Context) error {
			_, err := c.EstimateSubAgentCost(ctx, &aiv1.EstimateSubAgentCostRequest{Complexity: 11})
			return err
		}, "complexity"},
		{"team estimate: unknown budget mode", func(ctx context.Context) error {
			_, err := c.EstimateSubAgentCost(ctx, &aiv1.EstimateSubAgentCostRequest{Complexity: 6, BudgetMode: -1})
			return err
		}, "budget_mode"},
		{"team estimate: unknown merge", func(ctx context.Context) error {
			_, err := c.EstimateSubAgentCost(ctx, &aiv1.EstimateSubAgentCostRequest{Complexity: 6, Merge: 3})
			return err
		}, "merge"},
		{"team estimate: negative task_tokens", func(ctx context.Context) error {
			_, err := c.EstimateSubAgentCost(ctx, &aiv1.EstimateSubAgentCostRequest{Complexity: 6, TaskTokens: -5})
			return err
		}, "task_tokens"},
		{"estimate: no model", func(ctx context.Context) error {
			_, err := c.EstimateCost(ctx, &aiv1.EstimateCostRequest{})
			return err
		}, "model"},
		{"estimate: cache above input", func(ctx context.Context) error {
			_, err := c.EstimateCost(ctx, &aiv1.EstimateCostRequest{Model: "claude-sonnet-4-5", InputTokens: 10, CacheReadTokens: 20})
			return err
		}, "input_tokens"},
	}
	for _, tc := range cases {
		err := tc.call(e.alice)
		st := status.Convert(err)
		if st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), tc.field) {
			t.Errorf("%s: got %v %q, want INVALID_ARGUMENT on %s", tc.name, st.Code(), st.Message(), tc.field)
		}
	}
	if n := len(e.fake.Requests()); n != 0 {
		t.Fatalf("bad input reached the model %d times", n)
	}
	// Every RPC of the service is among the cases (named by the prefix of theirs).
	rpcOf := map[string]string{
		"confidence": "AssessConfidence", "complexity": "AssessComplexity", "plan": "PlanTask",
		"generate": "GenerateFile", "fix": "FixFile", "review": "ReviewCode", "diagnose": "DiagnoseFailure",
		"intervene": "Intervene", "decompose": "DecomposeProject", "revise": "ReviseProjectPhase",
		"review project": "ReviewProject", "order": "PlanTaskOrder", "complete": "Complete",
		"stream": "StreamComplete", "embed": "Embed", "estimate": "EstimateCost",
		"subagents": "RunSubAgents", "team estimate": "EstimateSubAgentCost",
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		prefix, _, _ := strings.Cut(tc.name, ":")
		covered[rpcOf[prefix]] = true
	}
	sd := aiv1.AIService_ServiceDesc
	for _, m := range sd.Methods {
		if !covered[m.MethodName] {
			t.Errorf("%s.%s has no malformed-input case", sd.ServiceName, m.MethodName)
		}
	}
	for _, m := range sd.Streams {
		if !covered[m.StreamName] {
			t.Errorf("%s.%s has no malformed-input case", sd.ServiceName, m.StreamName)
		}
	}
	// An unknown explicit model is NOT_FOUND.
	_, err := c.PlanTask(e.alice, &aiv1.PlanTaskRequest{Task: testTask, Model: &aiv1.ModelChoice{Model: "no-such-model"}})
	wantCode(t, err, codes.NotFound, "no-such-model")
}

// EstimateCost prices by the registry and records nothing.
func TestEstimateCost(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, nil, aiEnvOptions{})
	// claude-sonnet-4-5: $3 in, $15 out, $0.30 cache read, $3.75 cache write per million.
	resp, err := e.ai.EstimateCost(e.alice, &aiv1.EstimateCostRequest{Model: "claude-sonnet-4-5",
		InputTokens: 1_000_000, OutputTokens: 100_000, CacheReadTokens: 500_000, CacheWriteTokens: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	want := &aiv1.EstimateCostResponse{InputCostMicros: 1_200_000, OutputCostMicros: 1_500_000, CacheReadCostMicros: 150_000, CacheWriteCostMicros: 375_000}
	want.CostMicros = want.InputCostMicros + want.OutputCostMicros + want.CacheReadCostMicros + want.CacheWriteCostMicros
	if resp.CostMicros != want.CostMicros || resp.InputCostMicros != want.InputCostMicros || resp.CacheWriteCostMicros != want.CacheWriteCostMicros {
		t.Fatalf("got %v, want %v", resp, want)
	}
}

// THEFOLD_AI_PROVIDER=ollama with THEFOLD_AI_BASE_URL reaches a local OpenAI-compatible
// server, though the registry seeds ollama disabled: naming it is choosing it.
func TestOpenAICompatibleProviderNamedInConfig(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{OpenAI: []fakellm.Response{answer(t, planAnswer)}},
		aiEnvOptions{provider: "ollama", cfg: func(c *engine.Config) { c.APIKey = "" }})
	resp, err := e.ai.PlanTask(e.alice, planReq())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.Provider != "ollama" || resp.Usage.CostMicros != 0 || !strings.Contains(resp.Usage.Model, ":") {
		t.Fatalf("usage %v", resp.Usage)
	}
	if reqs := e.fake.Requests(); len(reqs) != 1 || reqs[0].Endpoint != fakellm.EndpointOpenAIChat {
		t.Fatalf("requests %v", reqs)
	}
}

// A selected model that keeps failing falls over to the next model of its fallbacks (a
// higher tier of the same provider first); the answer names the model that answered and
// counts every provider call.
func TestFallbackToTheNextModel(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{
		{Error: &fakellm.Error{Status: 500}, Times: 3}, // MaxAttempts is 3 in newAIEnv
		answer(t, planAnswer),
	}}, aiEnvOptions{provider: "anthropic"})
	resp, err := e.ai.PlanTask(e.alice, &aiv1.PlanTaskRequest{Task: testTask, Model: &aiv1.ModelChoice{Complexity: 5, Tags: []string{"coding"}}})
	if err != nil {
		t.Fatal(err)
	}
	reqs := e.fake.Requests()
	if len(reqs) != 4 || reqs[0].Model == reqs[3].Model {
		t.Fatalf("requests: %d, first model %s, last %s", len(reqs), reqs[0].Model, reqs[len(reqs)-1].Model)
	}
	if resp.Usage.Model != reqs[3].Model || resp.Usage.Calls != 4 {
		t.Errorf("usage %v, want model %s and 4 calls", resp.Usage, reqs[3].Model)
	}
}

// A retry while the first call with its request_id still runs waits for that answer
// instead of calling the model again.
func TestConcurrentRetryWaitsForTheFirstAnswer(t *testing.T) {
	t.Parallel()
	slow := answer(t, planAnswer)
	slow.Latency = fakellm.Duration(300 * time.Millisecond)
	e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{slow}}, aiEnvOptions{provider: "anthropic"})
	req := &aiv1.PlanTaskRequest{RequestId: "same", Task: testTask}
	type result struct {
		resp *aiv1.PlanTaskResponse
		err  error
	}
	out := make(chan result, 2)
	for range 2 {
		go func() {
			r, err := e.ai.PlanTask(e.alice, req)
			out <- result{r, err}
		}()
	}
	a, b := <-out, <-out
	if a.err != nil || b.err != nil {
		t.Fatal(a.err, b.err)
	}
	if n := len(e.fake.Requests()); n != 1 {
		t.Fatalf("the model was called %d times", n)
	}
	if a.resp.Plan.Summary != b.resp.Plan.Summary || a.resp.Usage.CostMicros != b.resp.Usage.CostMicros {
		t.Errorf("answers differ: %v / %v", a.resp, b.resp)
	}
}

// A call that outlives the stale period of request_id claims keeps its claim by touching
// it: a retry waits for its answer instead of taking the claim over and calling the model
// again.
func TestLongCallKeepsItsClaim(t *testing.T) {
	t.Parallel()
	slow := answer(t, planAnswer)
	// A claim is stale after 1.5 s without a heartbeat, and the heartbeat comes every 100 ms:
	// with a stale period of 400 ms, a CI run's load (the race detector, two cores) once
	// delayed the heartbeats past it, and the retry called the model again.
	slow.Latency = fakellm.Duration(3500 * time.Millisecond)
	e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{slow}}, aiEnvOptions{provider: "anthropic",
		stOpts: []store.Option{store.WithStaleClaim(1500 * time.Millisecond)}, engOpts: []engine.Option{engine.WithClaimHeartbeat(100 * time.Millisecond)}})
	req := &aiv1.PlanTaskRequest{RequestId: "long", Task: testTask}
	first := make(chan error, 1)
	go func() {
		_, err := e.ai.PlanTask(e.alice, req)
		first <- err
	}()
	// The retry comes once the first call has run past the stale period.
	time.Sleep(2 * time.Second)
	if _, err := e.ai.PlanTask(e.alice, req); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := len(e.fake.Requests()); n != 1 {
		t.Fatalf("the model was called %d times, want once", n)
	}
}

// Only answers are recorded: a call that failed runs again when retried with its request_id.
func TestFailedCallRunsAgainOnRetry(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{
		{Error: &fakellm.Error{Status: 401}}, answer(t, planAnswer),
	}}, aiEnvOptions{provider: "anthropic"})
	req := &aiv1.PlanTaskRequest{RequestId: "retry-me", Task: testTask, Model: &aiv1.ModelChoice{Model: "claude-sonnet-4-5"}}
	_, err := e.ai.PlanTask(e.alice, req)
	wantCode(t, err, codes.FailedPrecondition, "API key")
	resp, err := e.ai.PlanTask(e.alice, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Plan.Steps) != 1 || len(e.fake.Requests()) != 2 {
		t.Fatalf("plan %v after %d requests", resp.Plan, len(e.fake.Requests()))
	}
}
