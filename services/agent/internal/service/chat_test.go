package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/agent/internal/service"
	"github.com/thefold/thefold/services/agent/internal/store"
)

// stops records the replies the server asked to stop.
type stops struct{ ids []string }

func (s *stops) Stop(id string) { s.ids = append(s.ids, id) }

type chatEnv struct {
	st    *store.Store
	q     *queue
	stops *stops
	chat  agentv1.ChatServiceClient
	agent agentv1.AgentServiceClient
	ctx   func(user string) context.Context
}

// newChatEnv serves ChatService over real gRPC on a fresh agent schema; replies are only
// enqueued (no runner), so the tests see the requests' own effects.
func newChatEnv(t *testing.T) *chatEnv {
	t.Helper()
	st, _ := testStore(t)
	q, sp := &queue{}, &stops{}
	srv := service.New(st, service.Options{Queue: q, Heartbeat: time.Second, MaxWatches: 8})
	e := grpctest.Start(t, func(s *grpc.Server) {
		agentv1.RegisterAgentServiceServer(s, srv)
		agentv1.RegisterChatServiceServer(s, srv.Chat(q, sp))
	})
	return &chatEnv{st: st, q: q, stops: sp, chat: agentv1.NewChatServiceClient(e.Conn), agent: agentv1.NewAgentServiceClient(e.Conn),
		ctx: func(user string) context.Context { return e.Context(t, user) }}
}

func (e *chatEnv) conversation(t *testing.T, owner, title string) *agentv1.Conversation {
	t.Helper()
	resp, err := e.chat.CreateConversation(e.ctx(owner), &agentv1.CreateConversationRequest{Title: title})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Conversation
}

// png is the smallest PNG header http.DetectContentType takes for image/png.
var png = append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 32)...)

func TestChatMalformedInputOnEveryRPC(t *testing.T) {
	e := newChatEnv(t)
	ctx := e.ctx(alice)
	conv := e.conversation(t, alice, "c").Id
	att := func(a *agentv1.Attachment) func() error {
		return func() error {
			_, err := e.chat.SendMessage(ctx, &agentv1.SendMessageRequest{ConversationId: conv, Text: "see", Attachments: []*agentv1.Attachment{a}})
			return err
		}
	}
	cases := []struct {
		method, field string
		call          func() error
	}{
		{"CreateConversation", "title", func() error {
			_, err := e.chat.CreateConversation(ctx, &agentv1.CreateConversationRequest{Title: strings.Repeat("t", 201)})
			return err
		}},
		{"CreateConversation", "title", func() error {
			_, err := e.chat.CreateConversation(ctx, &agentv1.CreateConversationRequest{Title: "a\nb"})
			return err
		}},
		{"CreateConversation", "repo", func() error {
			_, err := e.chat.CreateConversation(ctx, &agentv1.CreateConversationRequest{Repo: "no-slash"})
			return err
		}},
		{"CreateConversation", "request_id", func() error {
			_, err := e.chat.CreateConversation(ctx, &agentv1.CreateConversationRequest{RequestId: strings.Repeat("r", 200)})
			return err
		}},
		{"GetConversation", "id", func() error { _, err := e.chat.GetConversation(ctx, &agentv1.GetConversationRequest{}); return err }},
		{"GetConversation", "id", func() error {
			_, err := e.chat.GetConversation(ctx, &agentv1.GetConversationRequest{Id: "x"})
			return err
		}},
		{"ListConversations", "page_size", func() error {
			_, err := e.chat.ListConversations(ctx, &agentv1.ListConversationsRequest{PageSize: -1})
			return err
		}},
		{"ListConversations", "page_token", func() error {
			_, err := e.chat.ListConversations(ctx, &agentv1.ListConversationsRequest{PageToken: "garbage"})
			return err
		}},
		{"UpdateConversation", "id", func() error {
			_, err := e.chat.UpdateConversation(ctx, &agentv1.UpdateConversationRequest{})
			return err
		}},
		{"UpdateConversation", "conversation", func() error {
			_, err := e.chat.UpdateConversation(ctx, &agentv1.UpdateConversationRequest{Id: conv})
			return err
		}},
		{"UpdateConversation", "update_mask", func() error {
			_, err := e.chat.UpdateConversation(ctx, &agentv1.UpdateConversationRequest{Id: conv, Conversation: &agentv1.Conversation{},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"owner_id"}}})
			return err
		}},
		{"UpdateConversation", "conversation.title", func() error {
			_, err := e.chat.UpdateConversation(ctx, &agentv1.UpdateConversationRequest{Id: conv, Conversation: &agentv1.Conversation{},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"title"}}})
			return err
		}},
		{"UpdateConversation", "conversation.id", func() error {
			_, err := e.chat.UpdateConversation(ctx, &agentv1.UpdateConversationRequest{Id: conv, Conversation: &agentv1.Conversation{Id: missing, Title: "x"},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"title"}}})
			return err
		}},
		{"DeleteConversation", "id", func() error {
			_, err := e.chat.DeleteConversation(ctx, &agentv1.DeleteConversationRequest{Id: "x"})
			return err
		}},
		{"ListMessages", "conversation_id", func() error {
			_, err := e.chat.ListMessages(ctx, &agentv1.ListMessagesRequest{})
			return err
		}},
		{"ListMessages", "page_size", func() error {
			_, err := e.chat.ListMessages(ctx, &agentv1.ListMessagesRequest{ConversationId: conv, PageSize: 501})
			return err
		}},
		{"ListMessages", "page_token", func() error {
			_, err := e.chat.ListMessages(ctx, &agentv1.ListMessagesRequest{ConversationId: conv, PageToken: "zz"})
			return err
		}},
		{"SendMessage", "conversation_id", func() error {
			_, err := e.chat.SendMessage(ctx, &agentv1.SendMessageRequest{Text: "hi"})
			return err
		}},
		{"SendMessage", "text", func() error {
			_, err := e.chat.SendMessage(ctx, &agentv1.SendMessageRequest{ConversationId: conv, Text: "  "})
			return err
		}},
		{"SendMessage", "text", func() error {
			_, err := e.chat.SendMessage(ctx, &agentv1.SendMessageRequest{ConversationId: conv, Text: strings.Repeat("x", 33<<10)})
			return err
		}},
		{"SendMessage", "request_id", func() error {
			_, err := e.chat.SendMessage(ctx, &agentv1.SendMessageRequest{ConversationId: conv, Text: "hi", RequestId: strings.Repeat("r", 200)})
			return err
		}},
		{"SendMessage", "attachments", func() error {
			a := &agentv1.Attachment{Name: "a.txt", MediaType: "text/plain", Content: []byte("x")}
			_, err := e.chat.SendMessage(ctx, &agentv1.SendMessageRequest{ConversationId: conv, Text: "hi", Attachments: []*agentv1.Attachment{a, a, a, a, a}})
			return err
		}},
		{"SendMessage", "attachments[0].name", att(&agentv1.Attachment{MediaType: "text/plain", Content: []byte("x")})},
		{"SendMessage", "attachments[0].name", att(&agentv1.Attachment{Name: "../etc/passwd", MediaType: "text/plain", Content: []byte("x")})},
		{"SendMessage", "attachments[0].media_type", att(&agentv1.Attachment{Name: "a.bin", MediaType: "application/octet-stream", Content: []byte("x")})},
		{"SendMessage", "attachments[0].media_type", att(&agentv1.Attachment{Name: "a", MediaType: "not a type", Content: []byte("x")})},
		{"SendMessage", "attachments[0].content", att(&agentv1.Attachment{Name: "big.txt", MediaType: "text/plain", Content: make([]byte, 257<<10)})},
		{"SendMessage", "attachments[0].content", att(&agentv1.Attachment{Name: "bin.txt", MediaType: "text/plain", Content: []byte{0xff, 0xfe, 0}})},
		{"SendMessage", "attachments[0].content", att(&agentv1.Attachment{Name: "a.png", MediaType: "image/png", Content: []byte("not a png at all")})},
		{"SendMessage", "attachments[0].content", att(&agentv1.Attachment{Name: "a.png", MediaType: "image/png", Content: append(png, make([]byte, 3<<20)...)})},
		{"SendMessage", "attachments[0].content", att(&agentv1.Attachment{Name: "empty.md", MediaType: "text/markdown"})},
		{"SendMessage", "model", func() error {
			_, err := e.chat.SendMessage(ctx, &agentv1.SendMessageRequest{ConversationId: conv, Text: "hi", Model: strings.Repeat("m", 201)})
			return err
		}},
		{"CancelReply", "conversation_id", func() error {
			_, err := e.chat.CancelReply(ctx, &agentv1.CancelReplyRequest{})
			return err
		}},
		{"CancelReply", "reply_id", func() error {
			_, err := e.chat.CancelReply(ctx, &agentv1.CancelReplyRequest{ConversationId: conv, ReplyId: "x"})
			return err
		}},
		{"CreateIntegration", "integration", func() error {
			_, err := e.chat.CreateIntegration(ctx, &agentv1.CreateIntegrationRequest{})
			return err
		}},
		{"CreateIntegration", "integration.kind", func() error {
			_, err := e.chat.CreateIntegration(ctx, &agentv1.CreateIntegrationRequest{Integration: &agentv1.Integration{Name: "n", WebhookUrl: "https://hooks.slack.com/x"}})
			return err
		}},
		{"CreateIntegration", "integration.name", func() error {
			_, err := e.chat.CreateIntegration(ctx, &agentv1.CreateIntegrationRequest{Integration: &agentv1.Integration{
				Kind: agentv1.IntegrationKind_INTEGRATION_KIND_SLACK, WebhookUrl: "https://hooks.slack.com/x"}})
			return err
		}},
		{"CreateIntegration", "integration.webhook_url", func() error {
			_, err := e.chat.CreateIntegration(ctx, &agentv1.CreateIntegrationRequest{Integration: &agentv1.Integration{
				Kind: agentv1.IntegrationKind_INTEGRATION_KIND_SLACK, Name: "n"}})
			return err
		}},
		{"CreateIntegration", "integration.webhook_url", func() error {
			_, err := e.chat.CreateIntegration(ctx, &agentv1.CreateIntegrationRequest{Integration: &agentv1.Integration{
				Kind: agentv1.IntegrationKind_INTEGRATION_KIND_SLACK, Name: "n", WebhookUrl: "https://evil.example/hook"}})
			return err
		}},
		{"CreateIntegration", "integration.webhook_url", func() error {
			_, err := e.chat.CreateIntegration(ctx, &agentv1.CreateIntegrationRequest{Integration: &agentv1.Integration{
				Kind: agentv1.IntegrationKind_INTEGRATION_KIND_DISCORD, Name: "n", WebhookUrl: "http://discord.com/api/webhooks/1/x"}})
			return err
		}},
		{"CreateIntegration", "integration.inbound_secret", func() error {
			_, err := e.chat.CreateIntegration(ctx, &agentv1.CreateIntegrationRequest{Integration: &agentv1.Integration{
				Kind: agentv1.IntegrationKind_INTEGRATION_KIND_DISCORD, Name: "n", WebhookUrl: "https://discord.com/api/webhooks/1/x",
				InboundSecret: "not hex", ExternalUserId: "1"}})
			return err
		}},
		{"CreateIntegration", "integration.external_user_id", func() error {
			_, err := e.chat.CreateIntegration(ctx, &agentv1.CreateIntegrationRequest{Integration: &agentv1.Integration{
				Kind: agentv1.IntegrationKind_INTEGRATION_KIND_SLACK, Name: "n", WebhookUrl: "https://hooks.slack.com/x", InboundSecret: "s"}})
			return err
		}},
		{"CreateIntegration", "integration.notices[0]", func() error {
			_, err := e.chat.CreateIntegration(ctx, &agentv1.CreateIntegrationRequest{Integration: &agentv1.Integration{
				Kind: agentv1.IntegrationKind_INTEGRATION_KIND_SLACK, Name: "n", WebhookUrl: "https://hooks.slack.com/x", Notices: []agentv1.NoticeKind{0}}})
			return err
		}},
		{"ListIntegrations", "page_size", func() error {
			_, err := e.chat.ListIntegrations(ctx, &agentv1.ListIntegrationsRequest{PageSize: 101})
			return err
		}},
		{"TestIntegration", "id", func() error {
			_, err := e.chat.TestIntegration(ctx, &agentv1.TestIntegrationRequest{Id: "x"})
			return err
		}},
		{"DeleteIntegration", "id", func() error {
			_, err := e.chat.DeleteIntegration(ctx, &agentv1.DeleteIntegrationRequest{})
			return err
		}},
		{"WatchConversation", "id", func() error {
			s, err := e.chat.WatchConversation(ctx, &agentv1.WatchConversationRequest{})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}},
		{"WatchConversation", "after_id", func() error {
			s, err := e.chat.WatchConversation(ctx, &agentv1.WatchConversationRequest{Id: conv, AfterId: -1})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}},
		// Only the gateway may call HandleInbound: these run as the gateway on a server of
		// their own (inbound_test.go, which has every malformed case).
		{"HandleInbound", "kind", func() error {
			return gatewayInbound(t, &agentv1.HandleInboundRequest{Body: []byte("user_id=U1")})
		}},
		{"HandleInbound", "body", func() error {
			return gatewayInbound(t, &agentv1.HandleInboundRequest{Kind: agentv1.IntegrationKind_INTEGRATION_KIND_SLACK})
		}},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		t.Run(c.method+"/"+c.field, func(t *testing.T) { grpctest.WantInvalid(t, c.call(), c.field) })
		covered[c.method] = true
	}
	sd := agentv1.ChatService_ServiceDesc
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
	if len(e.q.ids) != 0 {
		t.Errorf("malformed messages started replies: %v", e.q.ids)
	}
	_, err := e.chat.GetConversation(context.Background(), &agentv1.GetConversationRequest{Id: conv})
	grpctest.WantCode(t, err, codes.Unauthenticated)
}

// Only a conversation's owner sees it: every RPC naming another user's is NOT_FOUND, and
// nothing of it changes.
func TestAnotherUsersConversationIsNotFound(t *testing.T) {
	e := newChatEnv(t)
	conv := e.conversation(t, alice, "alice's").Id
	ctx := e.ctx(bob)
	_, err := e.chat.GetConversation(ctx, &agentv1.GetConversationRequest{Id: conv})
	grpctest.WantCode(t, err, codes.NotFound)
	_, err = e.chat.UpdateConversation(ctx, &agentv1.UpdateConversationRequest{Id: conv, Conversation: &agentv1.Conversation{Title: "bob's"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"title"}}})
	grpctest.WantCode(t, err, codes.NotFound)
	_, err = e.chat.SendMessage(ctx, &agentv1.SendMessageRequest{ConversationId: conv, Text: "hi"})
	grpctest.WantCode(t, err, codes.NotFound)
	_, err = e.chat.ListMessages(ctx, &agentv1.ListMessagesRequest{ConversationId: conv})
	grpctest.WantCode(t, err, codes.NotFound)
	_, err = e.chat.CancelReply(ctx, &agentv1.CancelReplyRequest{ConversationId: conv})
	grpctest.WantCode(t, err, codes.NotFound)
	_, err = e.chat.DeleteConversation(ctx, &agentv1.DeleteConversationRequest{Id: conv})
	grpctest.WantCode(t, err, codes.NotFound)
	s, err := e.chat.WatchConversation(ctx, &agentv1.WatchConversationRequest{Id: conv})
	if err == nil {
		_, err = s.Recv()
	}
	grpctest.WantCode(t, err, codes.NotFound)
	list, err := e.chat.ListConversations(ctx, &agentv1.ListConversationsRequest{})
	if err != nil || len(list.Conversations) != 0 {
		t.Fatalf("bob lists %v, %v", list, err)
	}
	got, err := e.chat.GetConversation(e.ctx(alice), &agentv1.GetConversationRequest{Id: conv})
	if err != nil || got.Conversation.Title != "alice's" || got.Conversation.MessageCount != 0 {
		t.Fatalf("alice gets %v, %v", got, err)
	}
}

// A conversation's life: created (idempotently), a message starts one reply (a retry of it
// does not start another; a second message waits for the reply), cancelled once, renamed,
// archived (hidden, closed to messages), listed in pages, watched from the start, deleted.
func TestConversationLifecycle(t *testing.T) {
	e := newChatEnv(t)
	ctx := e.ctx(alice)
	first, err := e.chat.CreateConversation(ctx, &agentv1.CreateConversationRequest{RequestId: "c-1"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.chat.CreateConversation(ctx, &agentv1.CreateConversationRequest{RequestId: "c-1"})
	if err != nil || again.Conversation.Id != first.Conversation.Id {
		t.Fatalf("retry created %v, %v; want %s", again, err, first.Conversation.Id)
	}
	conv := first.Conversation.Id

	text := "Add a health endpoint to local/demo\nthat answers 200"
	sent, err := e.chat.SendMessage(ctx, &agentv1.SendMessageRequest{RequestId: "m-1", ConversationId: conv, Text: text,
		Attachments: []*agentv1.Attachment{{Name: "notes.md", MediaType: "text/markdown; charset=utf-8", Content: []byte("# notes")},
			{Name: "shot.png", MediaType: "image/png", Content: png}}})
	if err != nil {
		t.Fatal(err)
	}
	m, r := sent.Message, sent.Reply
	if m.Role != agentv1.ChatRole_CHAT_ROLE_USER || m.Author != alice || m.Seq != 1 || r.Status != agentv1.ReplyStatus_REPLY_STATUS_RUNNING ||
		m.ReplyId != r.Id || len(m.Attachments) != 2 || m.Attachments[0].MediaType != "text/markdown" || m.Attachments[0].SizeBytes != 7 ||
		m.Attachments[0].Content != nil {
		t.Fatalf("sent %v", sent)
	}
	retry, err := e.chat.SendMessage(ctx, &agentv1.SendMessageRequest{RequestId: "m-1", ConversationId: conv, Text: text})
	if err != nil || retry.Message.Id != m.Id || retry.Reply.Id != r.Id {
		t.Fatalf("retry: %v, %v", retry, err)
	}
	_, err = e.chat.SendMessage(ctx, &agentv1.SendMessageRequest{RequestId: "m-1", ConversationId: conv, Text: "something else"})
	grpctest.WantInvalid(t, err, "request_id")
	if len(e.q.ids) != 1 || e.q.ids[0] != r.Id {
		t.Fatalf("replies enqueued %v, want [%s]", e.q.ids, r.Id)
	}
	_, err = e.chat.SendMessage(ctx, &agentv1.SendMessageRequest{ConversationId: conv, Text: "and another"})
	grpctest.WantCode(t, err, codes.FailedPrecondition, r.Id)
	got, err := e.chat.GetConversation(ctx, &agentv1.GetConversationRequest{Id: conv})
	if err != nil || got.Conversation.Title != "Add a health endpoint to local/demo" || got.Conversation.ActiveReplyId != r.Id ||
		got.Conversation.MessageCount != 1 {
		t.Fatalf("conversation %v, %v", got, err)
	}

	cancelled, err := e.chat.CancelReply(ctx, &agentv1.CancelReplyRequest{ConversationId: conv})
	if err != nil || cancelled.Reply.Status != agentv1.ReplyStatus_REPLY_STATUS_CANCELLED || cancelled.Reply.EndTime == nil {
		t.Fatalf("cancel: %v, %v", cancelled, err)
	}
	if len(e.stops.ids) != 1 || e.stops.ids[0] != r.Id {
		t.Fatalf("stopped %v", e.stops.ids)
	}
	_, err = e.chat.CancelReply(ctx, &agentv1.CancelReplyRequest{ConversationId: conv, ReplyId: r.Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "cancelled")
	second, err := e.chat.SendMessage(ctx, &agentv1.SendMessageRequest{ConversationId: conv, Text: "and another"})
	if err != nil || second.Message.Seq != 2 {
		t.Fatalf("after the cancel: %v, %v", second, err)
	}

	mask := func(p ...string) *fieldmaskpb.FieldMask { return &fieldmaskpb.FieldMask{Paths: p} }
	up, err := e.chat.UpdateConversation(ctx, &agentv1.UpdateConversationRequest{Id: conv, Conversation: &agentv1.Conversation{Title: "Health", Archived: true},
		UpdateMask: mask("title", "archived")})
	if err != nil || up.Conversation.Title != "Health" || !up.Conversation.Archived {
		t.Fatalf("update: %v, %v", up, err)
	}
	_, _ = e.chat.CancelReply(ctx, &agentv1.CancelReplyRequest{ConversationId: conv})
	_, err = e.chat.SendMessage(ctx, &agentv1.SendMessageRequest{ConversationId: conv, Text: "still there?"})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "archived")

	for i := range 3 {
		e.conversation(t, alice, "other "+string(rune('a'+i)))
	}
	var ids []string
	token := ""
	for {
		page, err := e.chat.ListConversations(ctx, &agentv1.ListConversationsRequest{PageSize: 2, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Conversations {
			ids = append(ids, c.Id)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if len(ids) != 3 {
		t.Fatalf("listed %d unarchived conversations, want 3", len(ids))
	}
	all, err := e.chat.ListConversations(ctx, &agentv1.ListConversationsRequest{IncludeArchived: true})
	if err != nil || len(all.Conversations) != 4 {
		t.Fatalf("with archived: %v, %v", all, err)
	}

	msgs, err := e.chat.ListMessages(ctx, &agentv1.ListMessagesRequest{ConversationId: conv, PageSize: 1})
	if err != nil || len(msgs.Messages) != 1 || msgs.Messages[0].Seq != 2 || msgs.NextPageToken == "" {
		t.Fatalf("newest message page: %v, %v", msgs, err)
	}
	older, err := e.chat.ListMessages(ctx, &agentv1.ListMessagesRequest{ConversationId: conv, PageToken: msgs.NextPageToken})
	if err != nil || len(older.Messages) != 1 || older.Messages[0].Id != m.Id || older.NextPageToken != "" {
		t.Fatalf("older page: %v, %v", older, err)
	}

	// The watch replays what happened, in order, and ends with the deletion.
	if _, err := e.chat.DeleteConversation(ctx, &agentv1.DeleteConversationRequest{Id: conv}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := e.chat.WatchConversation(wctx, &agentv1.WatchConversationRequest{Id: conv})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for {
		ev, err := s.Recv()
		if err != nil {
			t.Logf("watch ended: %v", err)
			break
		}
		if ev.Id != 0 {
			types = append(types, strings.TrimPrefix(ev.Type.String(), "CONVERSATION_EVENT_TYPE_"))
		}
	}
	want := "MESSAGE_ADDED REPLY_STARTED REPLY_ENDED MESSAGE_ADDED REPLY_STARTED UPDATED REPLY_ENDED DELETED"
	if strings.Join(types, " ") != want {
		t.Fatalf("events %v, want %s", types, want)
	}
	_, err = e.chat.GetConversation(ctx, &agentv1.GetConversationRequest{Id: conv})
	grpctest.WantCode(t, err, codes.NotFound)
}
