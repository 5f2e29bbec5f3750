package service_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/thefold/thefold/pkg/events"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/seal"

	"github.com/thefold/thefold/services/agent/internal/chat"
	"github.com/thefold/thefold/services/agent/internal/service"
	"github.com/thefold/thefold/services/agent/internal/store"
)

// receiver is a webhook: it records the bodies posted and answers status.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
	status atomic.Int32
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.status.Store(http.StatusOK)
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		r.mu.Lock()
		r.bodies = append(r.bodies, m)
		r.mu.Unlock()
		w.WriteHeader(int(r.status.Load()))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) got() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.bodies...)
}

type integrationEnv struct {
	st    *store.Store
	box   *seal.Box
	chat  agentv1.ChatServiceClient
	ctx   func(user string) context.Context
	deliv *chat.Deliverer
}

// newIntegrationEnv serves ChatService with a secret key and 127.0.0.1 allowed as a
// webhook host, and a deliverer that backs off a millisecond and disables an integration
// after three failures in a row.
func newIntegrationEnv(t *testing.T) *integrationEnv {
	t.Helper()
	st, _ := testStore(t)
	box, err := seal.New(make([]byte, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	srv := service.New(st, service.Options{Queue: &queue{}, Heartbeat: time.Second, MaxWatches: 8, Secrets: box, WebhookHosts: []string{"127.0.0.1"}})
	e := grpctest.Start(t, func(s *grpc.Server) { agentv1.RegisterChatServiceServer(s, srv.Chat(&queue{}, &stops{})) })
	cfg := chat.DelivererConfig{Every: time.Millisecond, Backoff: time.Millisecond, MaxBackoff: time.Millisecond, MaxAttempts: 10, MaxFailures: 3}
	return &integrationEnv{st: st, box: box, chat: agentv1.NewChatServiceClient(e.Conn), ctx: func(u string) context.Context { return e.Context(t, u) },
		deliv: chat.NewDeliverer(st, box, chat.NewPoster([]string{"127.0.0.1"}), cfg, nil)}
}

func (e *integrationEnv) create(t *testing.T, owner string, in *agentv1.Integration) *agentv1.Integration {
	t.Helper()
	resp, err := e.chat.CreateIntegration(e.ctx(owner), &agentv1.CreateIntegrationRequest{Integration: in})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Integration
}

// drain runs the deliverer until nothing is due (and waits out the backoffs in between).
func (e *integrationEnv) drain(t *testing.T) {
	t.Helper()
	for range 50 {
		n, err := e.deliv.Once(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			var pending int
			if err := e.st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM integration_deliveries`).Scan(&pending); err != nil {
				t.Fatal(err)
			}
			if pending == 0 {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func notice(kind agentv1.NoticeKind, text string) *agentv1.ConversationMessage {
	return &agentv1.ConversationMessage{Text: text, Notice: &agentv1.Notice{Kind: kind}}
}

// An integration keeps its secrets to itself, is the owner's alone, and is posted the
// owner's notices of the kinds it asked for, in each service's payload shape.
func TestIntegrationsPostTheOwnersNotices(t *testing.T) {
	e := newIntegrationEnv(t)
	slack, discord := newReceiver(t), newReceiver(t)
	ctx := e.ctx(alice)
	first, err := e.chat.CreateIntegration(ctx, &agentv1.CreateIntegrationRequest{RequestId: "i-1", Integration: &agentv1.Integration{
		Kind: agentv1.IntegrationKind_INTEGRATION_KIND_SLACK, Name: "team", WebhookUrl: slack.URL + "/services/T/B/secretpart",
		InboundSecret: "signing-secret", ExternalUserId: "U1"}})
	if err != nil {
		t.Fatal(err)
	}
	s := first.Integration
	if s.WebhookUrl != "" || s.InboundSecret != "" || !s.InboundConfigured || !s.Enabled || !strings.HasSuffix(s.WebhookHint, "part") ||
		strings.Contains(s.WebhookHint, "secret") {
		t.Fatalf("created %v", s)
	}
	again, err := e.chat.CreateIntegration(ctx, &agentv1.CreateIntegrationRequest{RequestId: "i-1", Integration: &agentv1.Integration{
		Kind: agentv1.IntegrationKind_INTEGRATION_KIND_SLACK, Name: "team", WebhookUrl: slack.URL + "/services/T/B/secretpart"}})
	if err != nil || again.Integration.Id != s.Id {
		t.Fatalf("retry: %v, %v", again, err)
	}
	_, err = e.chat.CreateIntegration(e.ctx(bob), &agentv1.CreateIntegrationRequest{Integration: &agentv1.Integration{
		Kind: agentv1.IntegrationKind_INTEGRATION_KIND_SLACK, Name: "mine", WebhookUrl: slack.URL + "/x", InboundSecret: "x", ExternalUserId: "U1"}})
	grpctest.WantCode(t, err, codes.AlreadyExists, "U1")
	d := e.create(t, alice, &agentv1.Integration{Kind: agentv1.IntegrationKind_INTEGRATION_KIND_DISCORD, Name: "reviews only",
		WebhookUrl: discord.URL + "/api/webhooks/1/tok", Notices: []agentv1.NoticeKind{agentv1.NoticeKind_NOTICE_KIND_REVIEW_READY}})
	var sealed []byte
	if err := e.st.Pool().QueryRow(context.Background(), `SELECT webhook_sealed FROM integrations WHERE id = $1`, s.Id).Scan(&sealed); err != nil ||
		strings.Contains(string(sealed), "secretpart") {
		t.Fatalf("the webhook is stored as %q (%v)", sealed, err)
	}

	list, err := e.chat.ListIntegrations(ctx, &agentv1.ListIntegrationsRequest{})
	if err != nil || len(list.Integrations) != 2 || list.Integrations[0].Id != d.Id {
		t.Fatalf("list: %v, %v", list, err)
	}
	if other, err := e.chat.ListIntegrations(e.ctx(bob), &agentv1.ListIntegrationsRequest{}); err != nil || len(other.Integrations) != 0 {
		t.Fatalf("bob lists %v, %v", other, err)
	}
	_, err = e.chat.TestIntegration(e.ctx(bob), &agentv1.TestIntegrationRequest{Id: s.Id})
	grpctest.WantCode(t, err, codes.NotFound)
	_, err = e.chat.DeleteIntegration(e.ctx(bob), &agentv1.DeleteIntegrationRequest{Id: s.Id})
	grpctest.WantCode(t, err, codes.NotFound)

	tested, err := e.chat.TestIntegration(ctx, &agentv1.TestIntegrationRequest{Id: s.Id})
	if err != nil || !tested.Delivered || tested.HttpStatus != 200 {
		t.Fatalf("test: %v, %v", tested, err)
	}
	if got := slack.got(); len(got) != 1 || !strings.Contains(got[0]["text"].(string), "test message") {
		t.Fatalf("slack got %v", got)
	}

	conv, err := e.st.CreateConversation(context.Background(), &agentv1.Conversation{OwnerId: alice, Title: "c"}, "")
	if err != nil {
		t.Fatal(err)
	}
	bobs, err := e.st.CreateConversation(context.Background(), &agentv1.Conversation{OwnerId: bob, Title: "b"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []struct {
		conv string
		m    *agentv1.ConversationMessage
	}{
		{conv.Id, notice(agentv1.NoticeKind_NOTICE_KIND_JOB_STARTED, "Job 1 started.")},
		{conv.Id, notice(agentv1.NoticeKind_NOTICE_KIND_REVIEW_READY, "Job 1 is ready for review.")},
		{conv.Id, notice(agentv1.NoticeKind_NOTICE_KIND_SUMMARISED, "summarised")},
		{bobs.Id, notice(agentv1.NoticeKind_NOTICE_KIND_DONE, "Bob's job is done.")},
	} {
		if err := e.st.AddNotice(context.Background(), n.conv, n.m); err != nil {
			t.Fatal(err)
		}
	}
	e.drain(t)
	var texts []string
	for _, b := range slack.got()[1:] {
		texts = append(texts, b["text"].(string))
	}
	if strings.Join(texts, "|") != "Job 1 started.|Job 1 is ready for review." {
		t.Fatalf("slack was posted %q", texts)
	}
	if got := discord.got(); len(got) != 1 || got[0]["content"] != "Job 1 is ready for review." {
		t.Fatalf("discord was posted %v", got)
	}
	if _, err := e.chat.DeleteIntegration(ctx, &agentv1.DeleteIntegrationRequest{Id: d.Id}); err != nil {
		t.Fatal(err)
	}
	_, err = e.chat.TestIntegration(ctx, &agentv1.TestIntegrationRequest{Id: d.Id})
	grpctest.WantCode(t, err, codes.NotFound)
}

// A webhook that keeps failing is retried with backoff, then disabled; its owner is told in
// the conversation, nothing more is posted to it, and a successful test enables it again.
func TestADeadWebhookIsDisabledAndThePersonTold(t *testing.T) {
	e := newIntegrationEnv(t)
	hook := newReceiver(t)
	hook.status.Store(http.StatusInternalServerError)
	in := e.create(t, alice, &agentv1.Integration{Kind: agentv1.IntegrationKind_INTEGRATION_KIND_SLACK, Name: "dead", WebhookUrl: hook.URL + "/hook"})
	conv, err := e.st.CreateConversation(context.Background(), &agentv1.Conversation{OwnerId: alice, Title: "c"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.AddNotice(context.Background(), conv.Id, notice(agentv1.NoticeKind_NOTICE_KIND_DONE, "done")); err != nil {
		t.Fatal(err)
	}
	e.drain(t)
	if n := len(hook.got()); n != 3 {
		t.Fatalf("%d posts before it was disabled, want 3", n)
	}
	list, err := e.chat.ListIntegrations(e.ctx(alice), &agentv1.ListIntegrationsRequest{})
	if err != nil || list.Integrations[0].Enabled || !strings.Contains(list.Integrations[0].DisabledReason, "HTTP 500") {
		t.Fatalf("after the failures: %v, %v", list, err)
	}
	msgs, err := e.st.History(context.Background(), conv.Id, 0)
	if err != nil || len(msgs) != 2 || !strings.Contains(msgs[1].Text, `"dead" is disabled`) {
		t.Fatalf("the conversation: %v, %v", msgs, err)
	}
	if err := e.st.AddNotice(context.Background(), conv.Id, notice(agentv1.NoticeKind_NOTICE_KIND_DONE, "more")); err != nil {
		t.Fatal(err)
	}
	e.drain(t)
	if n := len(hook.got()); n != 3 {
		t.Fatalf("a disabled integration was posted to: %d posts", n)
	}
	// The inbound requests taken are forgotten once too old to be accepted again.
	if ok, err := e.st.InboundTaken(context.Background(), "sig", []byte("answer")); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	if err := e.st.PruneInbound(context.Background(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if seen, _ := e.st.InboundSeen(context.Background(), "sig"); string(seen) != "answer" {
		t.Fatalf("a fresh request was pruned: %q", seen)
	}
	if err := e.st.PruneInbound(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if seen, _ := e.st.InboundSeen(context.Background(), "sig"); seen != nil {
		t.Fatalf("an old request was kept: %q", seen)
	}
	hook.status.Store(http.StatusNoContent)
	tested, err := e.chat.TestIntegration(e.ctx(alice), &agentv1.TestIntegrationRequest{Id: in.Id})
	if err != nil || !tested.Delivered || !tested.Integration.Enabled || tested.Integration.ConsecutiveFailures != 0 {
		t.Fatalf("test after the fix: %v, %v", tested, err)
	}
}

// The notices of a conversation's jobs reach the owner's integrations as their preferences'
// notifications say (review ready, completed, failed or cancelled, a question); the
// conversation hears of every one.
func TestNoticesToIntegrationsFollowThePreferences(t *testing.T) {
	e := newIntegrationEnv(t)
	ctx := context.Background()
	hook := newReceiver(t)
	e.create(t, alice, &agentv1.Integration{Kind: agentv1.IntegrationKind_INTEGRATION_KIND_SLACK, Name: "all", WebhookUrl: hook.URL + "/hook"})
	if _, err := e.st.UpdatePreferences(ctx, alice, &agentv1.Preferences{Notifications: &agentv1.NotificationSettings{JobCompleted: true, Clarification: true}},
		[]string{"notifications"}); err != nil {
		t.Fatal(err)
	}
	conv, err := e.st.CreateConversation(ctx, &agentv1.Conversation{OwnerId: alice, Title: "c"}, "")
	if err != nil {
		t.Fatal(err)
	}
	// The notifier follows the agent's events from the first.
	if err := e.st.SetNotifyCursor(ctx, 0); err != nil {
		t.Fatal(err)
	}
	hub := events.NewHub(e.st.Pool(), events.WithPollInterval(50*time.Millisecond))
	run, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go func() { _ = hub.Run(run) }()
	go func() { _ = chat.NewNotifier(e.st, hub, nil).Run(run) }()

	job := func(task, repo string) *store.Record {
		t.Helper()
		rec, _, err := e.st.Create(ctx, &agentv1.Job{OwnerId: alice, TaskId: task, Repo: repo, BaseBranch: "main"}, "", nil, store.RateLimit{}, (&queue{}).Enqueue)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.st.LinkConversation(ctx, "job", rec.Job.Id, conv.Id); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	const lease = "5d6f3c7e-8a9b-4c0d-9e1f-2a3b4c5d6e7f"
	claim := func(id string) *store.Record {
		t.Helper()
		rec, ok, err := e.st.Claim(ctx, id, lease, time.Minute)
		if err != nil || !ok {
			t.Fatalf("claim %s: %v %v", id, ok, err)
		}
		return rec
	}
	save := func(rec *store.Record, evs ...*agentv1.WatchJobResponse) {
		t.Helper()
		if err := e.st.Save(ctx, rec, lease, store.Step{Events: evs}); err != nil {
			t.Fatal(err)
		}
	}
	end := func(rec *store.Record, st agentv1.JobStatus, reason string) {
		t.Helper()
		prev := rec.Job.Status
		rec.Job.Status, rec.Job.StatusReason = st, reason
		save(rec, store.StatusEvent(prev, rec.Job))
	}

	done := claim(job(taskA, "local/r").Job.Id)
	save(done, &agentv1.WatchJobResponse{Type: agentv1.JobEventType_JOB_EVENT_TYPE_CLARIFICATION_REQUESTED,
		Payload: &agentv1.WatchJobResponse_ClarificationRequested{ClarificationRequested: &agentv1.ClarificationRequested{Question: "which database?"}}})
	save(done, &agentv1.WatchJobResponse{Type: agentv1.JobEventType_JOB_EVENT_TYPE_REVIEW_SUBMITTED,
		Payload: &agentv1.WatchJobResponse_ReviewSubmitted{ReviewSubmitted: &agentv1.ReviewSubmitted{ReviewId: missing, QualityScore: 8}}})
	save(done, &agentv1.WatchJobResponse{Type: agentv1.JobEventType_JOB_EVENT_TYPE_PULL_REQUEST_OPENED,
		Payload: &agentv1.WatchJobResponse_PullRequest{PullRequest: &typev1.PullRequestRef{Number: 7, Url: "http://forge/pr/7"}}})
	end(done, agentv1.JobStatus_JOB_STATUS_COMPLETED, "")
	failed := claim(job("22222222-2222-4222-8222-222222222222", "local/s").Job.Id)
	end(failed, agentv1.JobStatus_JOB_STATUS_FAILED, "out of attempts")
	cancelled := job("33333333-3333-4333-8333-333333333333", "local/t")
	if _, err := e.st.Mutate(ctx, alice, cancelled.Job.Id, func(_ context.Context, _ pgx.Tx, rec *store.Record) (store.Step, error) {
		prev := rec.Job.Status
		rec.Job.Status = agentv1.JobStatus_JOB_STATUS_CANCELLED
		return store.Step{Events: []*agentv1.WatchJobResponse{store.StatusEvent(prev, rec.Job)}}, nil
	}, nil); err != nil {
		t.Fatal(err)
	}

	// The conversation hears of all eight.
	var kinds []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		msgs, err := e.st.History(ctx, conv.Id, 0)
		if err != nil {
			t.Fatal(err)
		}
		kinds = kinds[:0]
		for _, m := range msgs {
			kinds = append(kinds, store.NoticeKindName(m.GetNotice().GetKind()))
		}
		if len(msgs) == 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the conversation has %d notices, want 8: %v", len(msgs), kinds)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, want := strings.Join(kinds, ","), "job_started,clarification,review_ready,pr_opened,done,job_started,failed,done"; got != want {
		t.Fatalf("the conversation's notices %s, want %s", got, want)
	}
	// Slack, only of the moments left on (and the starts, which no setting governs).
	e.drain(t)
	var texts []string
	for _, b := range hook.got() {
		texts = append(texts, b["text"].(string))
	}
	got := strings.Join(texts, "|")
	for _, want := range []string{"started on local/r", "asks: which database?", "opened pull request #7", "is done.", "started on local/s"} {
		if !strings.Contains(got, want) {
			t.Errorf("slack was not posted %q: %q", want, texts)
		}
	}
	for _, not := range []string{"ready for review", "failed", "cancelled"} {
		if strings.Contains(got, not) {
			t.Errorf("slack was posted %q though the preferences turned it off: %q", not, texts)
		}
	}
	if len(texts) != 5 {
		t.Errorf("slack was posted %d notices, want 5: %q", len(texts), texts)
	}
}
