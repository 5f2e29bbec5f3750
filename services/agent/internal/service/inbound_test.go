package service_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/seal"

	"github.com/thefold/thefold/services/agent/internal/service"
)

const (
	slackKind   = agentv1.IntegrationKind_INTEGRATION_KIND_SLACK
	discordKind = agentv1.IntegrationKind_INTEGRATION_KIND_DISCORD
	badSig      = "the request's signature does not verify"
)

// logBuffer is a log sink the server writes to from its handlers' goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// inboundEnv is chatEnv with a secret key (so integrations have sealed secrets), the
// server's log, its database, and the gateway's own identity.
type inboundEnv struct {
	*chatEnv
	pool *pgxpool.Pool
	box  *seal.Box
	logs *logBuffer
	grpc *grpctest.Env
	// gateway calls as the gateway speaking for itself.
	gateway context.Context
}

func newInboundEnv(t *testing.T) *inboundEnv {
	t.Helper()
	return newInboundEnvWith(t, nil)
}

// newInboundEnvWith is newInboundEnv with the users disabled tells of.
func newInboundEnvWith(t *testing.T, disabled func(string) bool) *inboundEnv {
	t.Helper()
	st, pool := testStore(t)
	key := make([]byte, seal.KeySize)
	_, _ = rand.Read(key)
	box, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	q, sp := &queue{}, &stops{}
	srv := service.New(st, service.Options{Queue: q, Heartbeat: time.Second, MaxWatches: 8, Secrets: box, Disabled: disabled,
		Log: slog.New(slog.NewJSONHandler(logs, nil))})
	e := grpctest.Start(t, func(s *grpc.Server) {
		agentv1.RegisterAgentServiceServer(s, srv)
		agentv1.RegisterChatServiceServer(s, srv.Chat(q, sp))
	})
	gctx, gcancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(gcancel)
	return &inboundEnv{
		chatEnv: &chatEnv{st: st, q: q, stops: sp, chat: agentv1.NewChatServiceClient(e.Conn), agent: agentv1.NewAgentServiceClient(e.Conn),
			ctx: func(user string) context.Context { return e.Context(t, user) }},
		pool: pool, box: box, logs: logs, grpc: e, gateway: auth.AsService(gctx, e.ServiceSigner(t, "gateway")),
	}
}

// integration connects owner's Slack or Discord through the store (CreateIntegration's
// checks are tested on their own): external user user, inbound secret secret ("" for none).
func (e *inboundEnv) integration(t *testing.T, owner string, kind agentv1.IntegrationKind, user, secret string) *agentv1.Integration {
	t.Helper()
	webhook, err := e.box.Seal("https://hooks.slack.com/services/T0/B0/x")
	if err != nil {
		t.Fatal(err)
	}
	var inbound []byte
	if secret != "" {
		if inbound, err = e.box.Seal(secret); err != nil {
			t.Fatal(err)
		}
	}
	in, err := e.st.CreateIntegration(context.Background(), &agentv1.Integration{OwnerId: owner, Kind: kind, Name: "mine",
		WebhookHint: "hooks.slack.com/…/x", ExternalUserId: user}, webhook, inbound, "")
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// stored counts what inbound requests may have left: owner's conversations, their
// messages, the replies enqueued, and the inbound requests recorded.
func (e *inboundEnv) stored(t *testing.T, owner string) (convs, msgs, replies, taken int) {
	t.Helper()
	ctx := context.Background()
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM conversations WHERE owner_id = $1`, owner).Scan(&convs); err != nil {
		t.Fatal(err)
	}
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM conversation_messages m JOIN conversations c ON c.id = m.conversation_id
		WHERE c.owner_id = $1`, owner).Scan(&msgs); err != nil {
		t.Fatal(err)
	}
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM integration_inbound`).Scan(&taken); err != nil {
		t.Fatal(err)
	}
	e.q.mu.Lock()
	defer e.q.mu.Unlock()
	return convs, msgs, len(e.q.ids), taken
}

// slackCommand is a slash command of user saying text, signed with secret at time at.
func slackCommand(secret, user, text string, at time.Time) *agentv1.HandleInboundRequest {
	body := url.Values{"command": {"/thefold"}, "team_id": {"T0"}, "user_id": {user}, "user_name": {"someone"}, "text": {text}}.Encode()
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + ts + ":" + body))
	return &agentv1.HandleInboundRequest{Kind: slackKind, Body: []byte(body), Headers: map[string]string{
		"content-type":              "application/x-www-form-urlencoded",
		"x-slack-request-timestamp": ts,
		"x-slack-signature":         "v0=" + hex.EncodeToString(mac.Sum(nil)),
	}}
}

// discordRequest is an interaction with body, signed with key at time at.
func discordRequest(key ed25519.PrivateKey, body string, at time.Time) *agentv1.HandleInboundRequest {
	ts := strconv.FormatInt(at.Unix(), 10)
	sig := ed25519.Sign(key, []byte(ts+body))
	return &agentv1.HandleInboundRequest{Kind: discordKind, Body: []byte(body), Headers: map[string]string{
		"content-type":          "application/json",
		"x-signature-timestamp": ts,
		"x-signature-ed25519":   hex.EncodeToString(sig),
	}}
}

// discordCommand is the body of a slash command of user (in a server) with one string
// option.
func discordCommand(user, text string) string {
	b, _ := json.Marshal(map[string]any{"type": 2, "id": "i1", "member": map[string]any{"user": map[string]any{"id": user}},
		"data": map[string]any{"name": "thefold", "options": []map[string]any{{"name": "text", "type": 3, "value": text}}}})
	return string(b)
}

func newKey(t *testing.T) (string, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(pub), priv
}

// slackAnswer decodes a Slack answer: 200, JSON, ephemeral; it returns the text.
func slackAnswer(t *testing.T, resp *agentv1.HandleInboundResponse, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		ResponseType string `json:"response_type"`
		Text         string `json:"text"`
	}
	if resp.HttpStatus != 200 || resp.ContentType != "application/json" || json.Unmarshal(resp.Body, &got) != nil || got.ResponseType != "ephemeral" {
		t.Fatalf("answer %d %s %s", resp.HttpStatus, resp.ContentType, resp.Body)
	}
	return got.Text
}

// discord sends req as the gateway and decodes the answer: an ephemeral message (type 4,
// flags 64); it returns the content.
func (e *inboundEnv) discord(t *testing.T, req *agentv1.HandleInboundRequest) string {
	t.Helper()
	resp, err := e.chat.HandleInbound(e.gateway, req)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Type int `json:"type"`
		Data struct {
			Content string `json:"content"`
			Flags   int    `json:"flags"`
		} `json:"data"`
	}
	if resp.HttpStatus != 200 || resp.ContentType != "application/json" || json.Unmarshal(resp.Body, &got) != nil || got.Type != 4 || got.Data.Flags != 64 {
		t.Fatalf("answer %d %s %s", resp.HttpStatus, resp.ContentType, resp.Body)
	}
	return got.Data.Content
}

// A verified slash command becomes the owner's message in a new conversation the
// integration keeps, and starts a reply; a redelivery stores nothing twice; while the
// reply runs the person is told to wait, and nothing is kept of that request, so it can
// be sent again.
func TestHandleInboundSlack(t *testing.T) {
	t.Parallel()
	e := newInboundEnv(t)
	const secret = "8f14e45fceea167a5a36dedd4bea2543"
	in := e.integration(t, alice, slackKind, "U0ALICE", secret)
	e.integration(t, bob, slackKind, "U0BOB", "bobs-secret")
	now := time.Now()

	first := slackCommand(secret, "U0ALICE", "Which repositories do I have?", now)
	resp, err := e.chat.HandleInbound(e.gateway, first)
	text := slackAnswer(t, resp, err)
	convs, err := e.chat.ListConversations(e.ctx(alice), &agentv1.ListConversationsRequest{})
	if err != nil || len(convs.Conversations) != 1 {
		t.Fatalf("alice's conversations: %v, %v", convs, err)
	}
	conv := convs.Conversations[0]
	if conv.Title != "Slack" || conv.ActiveReplyId == "" || !strings.Contains(text, "TheFold is on it") || !strings.Contains(text, conv.Id) {
		t.Fatalf("conversation %v; answered %q", conv, text)
	}
	msgs, err := e.chat.ListMessages(e.ctx(alice), &agentv1.ListMessagesRequest{ConversationId: conv.Id})
	if err != nil || len(msgs.Messages) != 1 {
		t.Fatalf("messages %v, %v", msgs, err)
	}
	if m := msgs.Messages[0]; m.Role != agentv1.ChatRole_CHAT_ROLE_USER || m.Author != alice || m.Text != "Which repositories do I have?" ||
		m.ReplyId != conv.ActiveReplyId {
		t.Fatalf("message %v", m)
	}
	if rec, err := e.st.GetIntegration(context.Background(), alice, in.Id); err != nil || rec.ConversationId != conv.Id {
		t.Fatalf("the integration keeps conversation %q (%v), want %s", rec.GetConversationId(), err, conv.Id)
	}
	if c, m, r, taken := e.stored(t, alice); c != 1 || m != 1 || r != 1 || taken != 1 {
		t.Fatalf("stored %d conversations, %d messages, %d replies, %d requests; want 1 of each", c, m, r, taken)
	}

	// The same request again (a redelivery): the same answer, nothing new.
	again, err := e.chat.HandleInbound(e.gateway, first)
	if err != nil || !bytes.Equal(again.Body, resp.Body) {
		t.Fatalf("redelivery answered %s, %v; want %s", again.GetBody(), err, resp.Body)
	}
	if c, m, r, taken := e.stored(t, alice); c != 1 || m != 1 || r != 1 || taken != 1 {
		t.Fatalf("after a redelivery: %d conversations, %d messages, %d replies, %d requests", c, m, r, taken)
	}

	// Another message while the reply runs: the person is told, nothing is kept.
	second := slackCommand(secret, "U0ALICE", "And which tasks?", now.Add(time.Second))
	for range 2 {
		resp, err := e.chat.HandleInbound(e.gateway, second)
		if got := slackAnswer(t, resp, err); got != "TheFold is still answering your last message; try again in a moment." {
			t.Fatalf("while a reply runs: %q", got)
		}
	}
	if c, m, r, taken := e.stored(t, alice); c != 1 || m != 1 || r != 1 || taken != 1 {
		t.Fatalf("while a reply runs: %d conversations, %d messages, %d replies, %d requests", c, m, r, taken)
	}
	// An empty command asks for text and keeps nothing.
	resp, err = e.chat.HandleInbound(e.gateway, slackCommand(secret, "U0ALICE", "  ", now))
	if got := slackAnswer(t, resp, err); !strings.Contains(got, "/thefold") {
		t.Fatalf("empty command: %q", got)
	}

	// Once the reply has ended the same request is taken, in the same conversation.
	if _, err := e.chat.CancelReply(e.ctx(alice), &agentv1.CancelReplyRequest{ConversationId: conv.Id}); err != nil {
		t.Fatal(err)
	}
	resp, err = e.chat.HandleInbound(e.gateway, second)
	if got := slackAnswer(t, resp, err); !strings.Contains(got, conv.Id) {
		t.Fatalf("after the reply: %q", got)
	}
	if c, m, r, taken := e.stored(t, alice); c != 1 || m != 2 || r != 2 || taken != 2 {
		t.Fatalf("after the reply: %d conversations, %d messages, %d replies, %d requests", c, m, r, taken)
	}
	if c, m, _, _ := e.stored(t, bob); c != 0 || m != 0 {
		t.Fatalf("bob has %d conversations, %d messages", c, m)
	}

	// Slack's certificate check is answered 200 and changes nothing.
	ack, err := e.chat.HandleInbound(e.gateway, &agentv1.HandleInboundRequest{Kind: slackKind, Body: []byte("ssl_check=1&token=x")})
	if err != nil || ack.HttpStatus != 200 || len(ack.Body) != 0 {
		t.Fatalf("ssl check: %v, %v", ack, err)
	}
}

// A request that does not verify — bad, missing or stale signature, a user with no
// integration or none with an inbound secret, a body changed after signing — is
// UNAUTHENTICATED with one message that does not say which, stores nothing, and is logged.
// A genuine slash command of a disabled owner's integration is answered that the account
// is disabled, and nothing is stored or run; another owner's goes through.
func TestHandleInboundRefusesADisabledOwner(t *testing.T) {
	t.Parallel()
	e := newInboundEnvWith(t, func(user string) bool { return user == alice })
	const secret = "8f14e45fceea167a5a36dedd4bea2543"
	e.integration(t, alice, slackKind, "U0ALICE", secret)
	e.integration(t, bob, slackKind, "U0BOB", "bobs-secret")
	resp, err := e.chat.HandleInbound(e.gateway, slackCommand(secret, "U0ALICE", "Which repositories do I have?", time.Now()))
	if text := slackAnswer(t, resp, err); !strings.Contains(text, "disabled") {
		t.Fatalf("answered %q", text)
	}
	if c, m, r, taken := e.stored(t, alice); c != 0 || m != 0 || r != 0 || taken != 0 {
		t.Fatalf("stored %d conversations, %d messages, %d replies, %d requests for a disabled owner", c, m, r, taken)
	}
	if !strings.Contains(e.logs.String(), "disabled owner refused") {
		t.Errorf("the refusal is not logged: %s", e.logs.String())
	}
	resp, err = e.chat.HandleInbound(e.gateway, slackCommand("bobs-secret", "U0BOB", "Hello", time.Now()))
	if text := slackAnswer(t, resp, err); !strings.Contains(text, "TheFold is on it") {
		t.Fatalf("bob answered %q", text)
	}
}

func TestHandleInboundRefusesWhatDoesNotVerify(t *testing.T) {
	t.Parallel()
	e := newInboundEnv(t)
	const secret = "c4ca4238a0b923820dcc509a6f75849b"
	e.integration(t, alice, slackKind, "U0ALICE", secret)
	e.integration(t, bob, slackKind, "U0BOB", "")
	now := time.Now()
	unsigned := slackCommand(secret, "U0ALICE", "hi", now)
	delete(unsigned.Headers, "x-slack-signature")
	tampered := slackCommand(secret, "U0ALICE", "hi", now)
	tampered.Body = bytes.Replace(tampered.Body, []byte("text=hi"), []byte("text=ho"), 1)
	noTime := slackCommand(secret, "U0ALICE", "hi", now)
	delete(noTime.Headers, "x-slack-request-timestamp")
	upper := slackCommand(secret, "U0ALICE", "hi", now)
	upper.Headers["x-slack-signature"] = strings.ToUpper(upper.Headers["x-slack-signature"])
	cases := []struct {
		name, user string
		req        *agentv1.HandleInboundRequest
	}{
		{"wrong secret", "U0ALICE", slackCommand("not-the-secret", "U0ALICE", "hi", now)},
		{"no signature", "U0ALICE", unsigned},
		{"no timestamp", "U0ALICE", noTime},
		{"signature in another form", "U0ALICE", upper},
		{"stale timestamp", "U0ALICE", slackCommand(secret, "U0ALICE", "hi", now.Add(-6*time.Minute))},
		{"timestamp in the future", "U0ALICE", slackCommand(secret, "U0ALICE", "hi", now.Add(6*time.Minute))},
		{"body changed after signing", "U0ALICE", tampered},
		{"unknown user", "U0NOBODY", slackCommand(secret, "U0NOBODY", "hi", now)},
		{"no inbound secret", "U0BOB", slackCommand("", "U0BOB", "hi", now)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.chat.HandleInbound(e.gateway, tc.req)
			grpctest.WantCode(t, err, codes.Unauthenticated)
			if msg := status.Convert(err).Message(); msg != badSig {
				t.Errorf("message %q, want %q", msg, badSig)
			}
			if !strings.Contains(e.logs.String(), `"user":"`+tc.user+`"`) {
				t.Errorf("no log line names user %s:\n%s", tc.user, e.logs.String())
			}
		})
	}
	for _, owner := range []string{alice, bob} {
		if c, m, r, taken := e.stored(t, owner); c+m+r+taken != 0 {
			t.Fatalf("%s: stored %d conversations, %d messages, %d replies, %d requests; want none", owner, c, m, r, taken)
		}
	}
	if n := strings.Count(e.logs.String(), `"msg":"inbound request refused","kind":"slack"`); n != len(cases) {
		t.Fatalf("%d refusals logged, want %d:\n%s", n, len(cases), e.logs.String())
	}
}

// Only the gateway, speaking for itself, may hand the agent an inbound request: a person,
// another service, or the gateway acting for a person may not.
func TestHandleInboundOnlyFromTheGateway(t *testing.T) {
	t.Parallel()
	e := newInboundEnv(t)
	const secret = "a87ff679a2f3e71d9181a67b7542122c"
	e.integration(t, alice, slackKind, "U0ALICE", secret)
	req := slackCommand(secret, "U0ALICE", "hi", time.Now())
	cases := []struct {
		name string
		ctx  context.Context
		code codes.Code
	}{
		{"a person", e.ctx(alice), codes.PermissionDenied},
		{"the agent as itself", auth.AsService(context.Background(), e.grpc.ServiceSigner(t, "agent")), codes.PermissionDenied},
		{"the agent for the owner", e.grpc.ServiceContext(t, "agent", alice), codes.PermissionDenied},
		{"no token", context.Background(), codes.Unauthenticated},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.chat.HandleInbound(tc.ctx, req)
			grpctest.WantCode(t, err, tc.code)
		})
	}
	if c, m, r, taken := e.stored(t, alice); c+m+r+taken != 0 {
		t.Fatalf("stored %d conversations, %d messages, %d replies, %d requests; want none", c, m, r, taken)
	}
	// The request itself was good.
	resp, err := e.chat.HandleInbound(e.gateway, req)
	slackAnswer(t, resp, err)
}

// Discord: a PING verifies against the Discord integrations' public keys; a command
// verified with its user's key becomes their message (its first string option, else the
// command's name); a forged one is refused; the same signature in another hex case is the
// same request.
func TestHandleInboundDiscord(t *testing.T) {
	t.Parallel()
	e := newInboundEnv(t)
	otherPub, _ := newKey(t)
	bobPub, bobKey := newKey(t)
	carolPub, carolKey := newKey(t)
	_, forger := newKey(t)
	e.integration(t, alice, discordKind, "100", otherPub) // first: a PING is tried against more than one key
	e.integration(t, bob, discordKind, "200", bobPub)
	e.integration(t, carol, discordKind, "300", carolPub)
	e.integration(t, "user-dan", discordKind, "400", "") // no key: not among those a PING tries
	now := time.Now()

	ping := `{"type":1,"id":"p1","application_id":"a1"}`
	resp, err := e.chat.HandleInbound(e.gateway, discordRequest(bobKey, ping, now))
	if err != nil || resp.HttpStatus != 200 || string(resp.Body) != `{"type":1}` || resp.ContentType != "application/json" {
		t.Fatalf("PING: %v, %v", resp, err)
	}
	_, err = e.chat.HandleInbound(e.gateway, discordRequest(forger, ping, now))
	grpctest.WantCode(t, err, codes.Unauthenticated, badSig)
	_, err = e.chat.HandleInbound(e.gateway, discordRequest(bobKey, ping, now.Add(-10*time.Minute)))
	grpctest.WantCode(t, err, codes.Unauthenticated, badSig)

	cmd := discordCommand("200", "Which repositories do I have?")
	req := discordRequest(bobKey, cmd, now)
	content := e.discord(t, req)
	convs, err := e.chat.ListConversations(e.ctx(bob), &agentv1.ListConversationsRequest{})
	if err != nil || len(convs.Conversations) != 1 || convs.Conversations[0].Title != "Discord" || !strings.Contains(content, convs.Conversations[0].Id) {
		t.Fatalf("bob's conversations %v, %v; answered %q", convs, err, content)
	}
	msgs, err := e.chat.ListMessages(e.ctx(bob), &agentv1.ListMessagesRequest{ConversationId: convs.Conversations[0].Id})
	if err != nil || len(msgs.Messages) != 1 || msgs.Messages[0].Text != "Which repositories do I have?" || msgs.Messages[0].Author != bob {
		t.Fatalf("bob's messages %v, %v", msgs, err)
	}
	req.Headers["x-signature-ed25519"] = strings.ToUpper(req.Headers["x-signature-ed25519"])
	if again := e.discord(t, req); again != content {
		t.Fatalf("the same request again answered %q, want %q", again, content)
	}
	// Forged: bob's command signed with another key, and bob's command claiming carol.
	_, err = e.chat.HandleInbound(e.gateway, discordRequest(forger, discordCommand("200", "Delete everything"), now))
	grpctest.WantCode(t, err, codes.Unauthenticated, badSig)
	_, err = e.chat.HandleInbound(e.gateway, discordRequest(bobKey, discordCommand("300", "I am carol"), now))
	grpctest.WantCode(t, err, codes.Unauthenticated, badSig)
	if c, m, r, _ := e.stored(t, bob); c != 1 || m != 1 || r != 1 {
		t.Fatalf("bob: %d conversations, %d messages, %d replies; want 1 each", c, m, r)
	}
	if c, m, _, _ := e.stored(t, carol); c != 0 || m != 0 {
		t.Fatalf("carol: %d conversations, %d messages", c, m)
	}

	// In a direct message the user is user.id; without options the text is the name.
	dm := `{"type":2,"user":{"id":"300"},"data":{"name":"status"}}`
	e.discord(t, discordRequest(carolKey, dm, now))
	convs, err = e.chat.ListConversations(e.ctx(carol), &agentv1.ListConversationsRequest{})
	if err != nil || len(convs.Conversations) != 1 {
		t.Fatalf("carol's conversations %v, %v", convs, err)
	}
	msgs, err = e.chat.ListMessages(e.ctx(carol), &agentv1.ListMessagesRequest{ConversationId: convs.Conversations[0].Id})
	if err != nil || len(msgs.Messages) != 1 || msgs.Messages[0].Text != "status" {
		t.Fatalf("carol's messages %v, %v", msgs, err)
	}
	// A button press (type 3) is verified and answered, and stores nothing.
	button := `{"type":3,"user":{"id":"300"},"data":{"custom_id":"x"}}`
	if got := e.discord(t, discordRequest(carolKey, button, now)); !strings.Contains(got, "slash command") {
		t.Fatalf("button: %q", got)
	}
	if c, m, _, _ := e.stored(t, carol); c != 1 || m != 1 {
		t.Fatalf("carol after a button: %d conversations, %d messages", c, m)
	}
}

const carol = "user-carol"

// malformedInbound are HandleInbound requests that are bad input before any signature is
// looked at, with the field each names.
func malformedInbound() []struct {
	name, field string
	req         *agentv1.HandleInboundRequest
} {
	slack := func(body string) *agentv1.HandleInboundRequest {
		return &agentv1.HandleInboundRequest{Kind: slackKind, Body: []byte(body)}
	}
	discord := func(body string) *agentv1.HandleInboundRequest {
		return &agentv1.HandleInboundRequest{Kind: discordKind, Body: []byte(body)}
	}
	many := map[string]string{}
	for i := range 33 {
		many["x-h"+strconv.Itoa(i)] = "v"
	}
	return []struct {
		name, field string
		req         *agentv1.HandleInboundRequest
	}{
		{"no kind", "kind", &agentv1.HandleInboundRequest{Body: []byte("user_id=U1")}},
		{"unknown kind", "kind", &agentv1.HandleInboundRequest{Kind: 99, Body: []byte("user_id=U1")}},
		{"no body", "body", slack("")},
		{"body over 64 KiB", "body", slack("user_id=U1&text=" + strings.Repeat("x", 64<<10))},
		{"Slack: no user", "body", slack("command=%2Fthefold&text=hi")},
		{"Slack: not a form", "body", slack("user_id=%zz")},
		{"Slack: NUL in the text", "body", slack("user_id=U1&text=a%00b")},
		{"Slack: invalid UTF-8 in the text", "body", slack("user_id=U1&text=%FF")},
		{"Discord: not JSON", "body", discord("{type:2")},
		{"Discord: no type", "body", discord(`{"user":{"id":"1"}}`)},
		{"Discord: no user", "body", discord(`{"type":2,"data":{"name":"thefold"}}`)},
		{"too many headers", "headers", &agentv1.HandleInboundRequest{Kind: slackKind, Body: []byte("user_id=U1"), Headers: many}},
		{"a header too long", "headers", &agentv1.HandleInboundRequest{Kind: slackKind, Body: []byte("user_id=U1"),
			Headers: map[string]string{"x-slack-signature": strings.Repeat("a", 2000)}}},
	}
}

func TestHandleInboundMalformedInput(t *testing.T) {
	t.Parallel()
	e := newInboundEnv(t)
	e.integration(t, alice, slackKind, "U1", "secret")
	for _, tc := range malformedInbound() {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.chat.HandleInbound(e.gateway, tc.req)
			grpctest.WantInvalid(t, err, tc.field)
		})
	}
	if c, m, r, taken := e.stored(t, alice); c+m+r+taken != 0 {
		t.Fatalf("stored %d conversations, %d messages, %d replies, %d requests; want none", c, m, r, taken)
	}
}

// inboundEnvs are the servers gatewayInbound made, one per test.
var inboundEnvs sync.Map // *testing.T → *inboundEnv

// gatewayInbound calls HandleInbound with req as the gateway, on a server of the test's
// own (chatEnv's server has no secret key, and its callers are people), made on first use.
func gatewayInbound(t *testing.T, req *agentv1.HandleInboundRequest) error {
	v, ok := inboundEnvs.Load(t)
	if !ok {
		v, _ = inboundEnvs.LoadOrStore(t, newInboundEnv(t))
		t.Cleanup(func() { inboundEnvs.Delete(t) })
	}
	e := v.(*inboundEnv)
	_, err := e.chat.HandleInbound(e.gateway, req)
	return err
}
