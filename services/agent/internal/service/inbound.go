package service

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// Limits of inbound requests.
const (
	maxInboundBody      = 64 << 10
	maxInboundHeaders   = 32
	maxInboundHeaderKey = 100
	maxInboundHeaderVal = 1024
	// inboundWindow is how far a request's timestamp may be from now (Slack's own advice):
	// an older request, replayed, is refused without a lookup.
	inboundWindow = 5 * time.Minute
	// maxPingKeys bounds the Discord keys a PING (which names no user) is tried against.
	maxPingKeys = 500
	// inboundCaller is the one service that may hand the agent inbound requests.
	inboundCaller = "gateway"
)

// errBadSignature is the answer to every inbound request that does not verify, whatever
// the reason (no integration, no secret, a wrong, missing or stale signature): the caller
// learns nothing about which, and the log says why.
var errBadSignature = status.Error(codes.Unauthenticated, "the request's signature does not verify")

// fromGateway refuses a call not made by the gateway as itself: only it hands what arrives
// at its hooks (what, e.g. "webhook deliveries") to the agent.
func fromGateway(ctx context.Context, what string) error {
	p, err := auth.RequireService(ctx)
	if err != nil {
		return err
	}
	if p.Service != inboundCaller {
		return status.Errorf(codes.PermissionDenied, "only the gateway hands %s to the agent, not service %s", what, p.Service)
	}
	return nil
}

// inboundTitles are the titles of the conversations inbound messages start.
var inboundTitles = map[agentv1.IntegrationKind]string{
	agentv1.IntegrationKind_INTEGRATION_KIND_SLACK:   "Slack",
	agentv1.IntegrationKind_INTEGRATION_KIND_DISCORD: "Discord",
}

// inbound is an inbound request as parsed, before it is verified.
type inbound struct {
	kind agentv1.IntegrationKind
	// user is the external user it claims to come from; "" for a Discord PING.
	user string
	// text is what the person wrote.
	text string
	// command is how the person calls TheFold ("/thefold"), for a hint.
	command string
	// ping is a Discord PING (the endpoint's check), answered once verified.
	ping bool
	// other is a verified kind of request TheFold does not take (a Discord button).
	other bool
	// ack answers a request that needs no verification and changes nothing (Slack's SSL
	// check); nil otherwise.
	ack *agentv1.HandleInboundResponse
	// key identifies the request for deduplication: its kind and its signature.
	key string
	// verify reports why the request is not signed with secret at now; "" when it is.
	verify func(secret string, now time.Time) string
}

// HandleInbound takes a Slack slash command or a Discord interaction as the gateway
// received it: verified against the secret of the integration of the user it names, its
// text becomes a message of the integration's owner in the integration's conversation.
func (c *chat) HandleInbound(ctx context.Context, req *agentv1.HandleInboundRequest) (*agentv1.HandleInboundResponse, error) {
	if err := fromGateway(ctx, "inbound requests"); err != nil {
		return nil, err
	}
	in, err := parseInbound(req)
	if err != nil {
		return nil, err
	}
	if in.ack != nil {
		return in.ack, nil
	}
	if c.s.o.Secrets == nil {
		return nil, errs.Precondition("the agent has no secret key to open integration secrets with (THEFOLD_AGENT_SECRET_KEY_FILE)")
	}
	now := time.Now()
	if in.ping {
		if why, err := c.verifyPing(ctx, in, now); err != nil {
			return nil, err
		} else if why != "" {
			return nil, c.refuse(ctx, in, why)
		}
		return jsonAnswer(map[string]int{"type": 1}), nil
	}
	rec, err := c.s.store.IntegrationOfUser(ctx, in.kind, in.user)
	if err != nil {
		return nil, err
	}
	if why := c.verifyUser(ctx, rec, in, now); why != "" {
		return nil, c.refuse(ctx, in, why)
	}
	if c.s.o.Disabled != nil && c.s.o.Disabled(rec.OwnerId) {
		// Genuine, but its owner may no longer act: nothing is stored or run.
		c.s.log.WarnContext(ctx, "inbound message of a disabled owner refused", "kind", in.kind.String(), "owner", rec.OwnerId)
		return answer(in, "This TheFold account is disabled: the message was not taken."), nil
	}
	switch {
	case in.other:
		return answer(in, "TheFold takes its slash command only."), nil
	case in.text == "":
		return answer(in, "Tell TheFold what you want after the command, e.g. "+in.command+" which repositories do I have?"), nil
	case utf8.RuneCountInString(in.text) > maxMessageText:
		return answer(in, fmt.Sprintf("That is longer than TheFold takes in one message (%d characters).", maxMessageText)), nil
	}
	// A redelivery is answered as the first was and stores nothing; SendMessage's
	// request_id (from the signature too) covers the moment between the send and the record.
	if seen, err := c.s.store.InboundSeen(ctx, in.key); err != nil {
		return nil, err
	} else if seen != nil {
		return &agentv1.HandleInboundResponse{HttpStatus: http.StatusOK, ContentType: "application/json", Body: seen}, nil
	}
	conv, err := c.inboundConversation(ctx, rec.Integration)
	if err != nil {
		return nil, err
	}
	if conv.Archived {
		return answer(in, fmt.Sprintf("Your TheFold conversation %q is archived; unarchive it to write in it.", conv.Title)), nil
	}
	owner := auth.WithPrincipal(ctx, auth.Principal{UserID: rec.OwnerId, Service: "agent", Roles: []string{auth.RoleUser}})
	sum := sha256.Sum256([]byte(in.key))
	_, err = c.SendMessage(owner, &agentv1.SendMessageRequest{RequestId: "inbound-" + hex.EncodeToString(sum[:20]), ConversationId: conv.Id, Text: in.text})
	switch {
	case status.Code(err) == codes.FailedPrecondition:
		// A reply is running: the person is told so and may send it again; nothing is
		// recorded, so the same request (if it comes again) is tried again.
		return answer(in, "TheFold is still answering your last message; try again in a moment."), nil
	case err != nil:
		return nil, err
	}
	resp := answer(in, onIt(conv, rec.Integration))
	if _, err := c.s.store.InboundTaken(ctx, in.key, resp.Body); err != nil {
		return nil, err
	}
	return resp, nil
}

// refuse logs an inbound request that did not verify and returns the one answer to it.
func (c *chat) refuse(ctx context.Context, in *inbound, why string) error {
	c.s.log.WarnContext(ctx, "inbound request refused", "kind", store.IntegrationKindName(in.kind), "user", in.user, "reason", why)
	return errBadSignature
}

// verifyUser reports why in does not verify as a request of rec's user; "" when it does.
func (c *chat) verifyUser(ctx context.Context, rec *store.IntegrationRecord, in *inbound, now time.Time) string {
	switch {
	case rec == nil:
		return "no integration of this user"
	case len(rec.InboundSealed) == 0:
		return "the user's integration has no inbound secret"
	}
	secret, err := c.s.o.Secrets.Open(rec.InboundSealed)
	if err != nil {
		c.s.log.ErrorContext(ctx, "an integration's inbound secret does not open (was the agent's secret key replaced?)", "integration", rec.Id, "err", err)
		return "the integration's inbound secret does not open"
	}
	return in.verify(secret, now)
}

// verifyPing reports why a Discord PING verifies with none of the Discord integrations'
// public keys; "" when one does.
func (c *chat) verifyPing(ctx context.Context, in *inbound, now time.Time) (string, error) {
	recs, err := c.s.store.InboundIntegrations(ctx, in.kind, maxPingKeys)
	if err != nil {
		return "", err
	}
	why := "no Discord integration has a public key"
	for _, rec := range recs {
		if why = c.verifyUser(ctx, rec, in, now); why == "" {
			return "", nil
		}
	}
	return why, nil
}

// inboundConversation returns the conversation of integration in: its own, else a new one
// it keeps from now on. The new one's request_id is the integration's, so two first
// messages at once make one conversation.
func (c *chat) inboundConversation(ctx context.Context, in *agentv1.Integration) (*agentv1.Conversation, error) {
	if in.ConversationId != "" {
		rec, err := c.s.store.GetConversation(ctx, in.OwnerId, in.ConversationId)
		if err == nil {
			return rec.Conversation, nil
		}
		if status.Code(err) != codes.NotFound {
			return nil, err
		}
	}
	conv, err := c.s.store.CreateConversation(ctx, &agentv1.Conversation{OwnerId: in.OwnerId, Title: inboundTitles[in.Kind]}, "inbound-"+in.Id)
	if err != nil {
		return nil, err
	}
	if err := c.s.store.SetIntegrationConversation(ctx, in.Id, conv.Id); err != nil {
		return nil, err
	}
	return conv, nil
}

// onIt is the answer to a message taken: TheFold is on it, and where its answer appears.
func onIt(conv *agentv1.Conversation, in *agentv1.Integration) string {
	s := fmt.Sprintf("TheFold is on it: the answer appears in your TheFold conversation %q (%s).", conv.Title, conv.Id)
	if in.Enabled {
		s += " Notices of the work it starts are posted here."
	}
	return s
}

// answer is the ephemeral reply to in that only the person sees.
func answer(in *inbound, text string) *agentv1.HandleInboundResponse {
	if in.kind == agentv1.IntegrationKind_INTEGRATION_KIND_SLACK {
		return jsonAnswer(struct {
			ResponseType string `json:"response_type"`
			Text         string `json:"text"`
		}{"ephemeral", text})
	}
	// An interaction response of type 4 (CHANNEL_MESSAGE_WITH_SOURCE) with flag 64
	// (EPHEMERAL).
	type data struct {
		Content string `json:"content"`
		Flags   int    `json:"flags"`
	}
	return jsonAnswer(struct {
		Type int  `json:"type"`
		Data data `json:"data"`
	}{4, data{text, 64}})
}

func jsonAnswer(v any) *agentv1.HandleInboundResponse {
	b, _ := json.Marshal(v) // plain structs and maps of strings and ints
	return &agentv1.HandleInboundResponse{HttpStatus: http.StatusOK, ContentType: "application/json", Body: b}
}

// parseInbound checks req and parses its body by its kind.
func parseInbound(req *agentv1.HandleInboundRequest) (*inbound, error) {
	switch req.Kind {
	case agentv1.IntegrationKind_INTEGRATION_KIND_SLACK, agentv1.IntegrationKind_INTEGRATION_KIND_DISCORD:
	case agentv1.IntegrationKind_INTEGRATION_KIND_UNSPECIFIED:
		return nil, errs.Invalid("kind", "required: INTEGRATION_KIND_SLACK or INTEGRATION_KIND_DISCORD")
	default:
		return nil, errs.Invalid("kind", "unknown integration kind %d: INTEGRATION_KIND_SLACK or INTEGRATION_KIND_DISCORD", req.Kind)
	}
	switch n := len(req.Body); {
	case n == 0:
		return nil, errs.Invalid("body", "required: the request's body as received")
	case n > maxInboundBody:
		return nil, errs.Invalid("body", "at most %d bytes (64 KiB), not %d", maxInboundBody, n)
	}
	if len(req.Headers) > maxInboundHeaders {
		return nil, errs.Invalid("headers", "at most %d headers, not %d: only those the signature needs", maxInboundHeaders, len(req.Headers))
	}
	for k, v := range req.Headers {
		if len(k) > maxInboundHeaderKey || len(v) > maxInboundHeaderVal {
			return nil, errs.Invalid("headers", "a header name may have at most %d bytes and a value %d", maxInboundHeaderKey, maxInboundHeaderVal)
		}
	}
	var in *inbound
	var err error
	if req.Kind == agentv1.IntegrationKind_INTEGRATION_KIND_SLACK {
		in, err = parseSlack(req)
	} else {
		in, err = parseDiscord(req)
	}
	if err != nil {
		return nil, err
	}
	if !utf8.ValidString(in.text) || strings.ContainsRune(in.text, 0) {
		return nil, errs.Invalid("body", "the text must be UTF-8 without NUL bytes")
	}
	return in, nil
}

// fresh reports why ts (Unix seconds) is not within inboundWindow of now; "" when it is.
func fresh(ts string, now time.Time) string {
	sec, err := strconv.ParseInt(ts, 10, 64)
	switch {
	case ts == "":
		return "no timestamp"
	case err != nil:
		return "the timestamp is not Unix seconds"
	}
	if d := now.Sub(time.Unix(sec, 0)); d > inboundWindow || d < -inboundWindow {
		return fmt.Sprintf("the timestamp is %s from now", d.Round(time.Second))
	}
	return ""
}

// parseSlack reads a slash command (application/x-www-form-urlencoded), signed as Slack
// documents: "v0=" + hex(HMAC-SHA256(signing secret, "v0:" + timestamp + ":" + body)).
func parseSlack(req *agentv1.HandleInboundRequest) (*inbound, error) {
	form, err := url.ParseQuery(string(req.Body))
	if err != nil {
		return nil, errs.Invalid("body", "not a Slack slash command (application/x-www-form-urlencoded)")
	}
	user := form.Get("user_id")
	if user == "" {
		if form.Get("ssl_check") == "1" {
			// Slack checks the endpoint's certificate with an unsigned request that asks
			// only for a 200.
			return &inbound{ack: &agentv1.HandleInboundResponse{HttpStatus: http.StatusOK, ContentType: "text/plain"}}, nil
		}
		return nil, errs.Invalid("body", "a Slack slash command names its user (user_id)")
	}
	if len(user) > maxExternalUser {
		return nil, errs.Invalid("body", "user_id: at most %d bytes", maxExternalUser)
	}
	command := form.Get("command")
	if len(command) > 40 || !strings.HasPrefix(command, "/") || !validate.PrintableASCII(command, false) {
		command = "/thefold"
	}
	ts, sig := req.Headers["x-slack-request-timestamp"], req.Headers["x-slack-signature"]
	body := req.Body
	return &inbound{kind: req.Kind, user: user, text: strings.TrimSpace(form.Get("text")), command: command, key: "slack:" + sig,
		verify: func(secret string, now time.Time) string {
			if sig == "" {
				return "no signature"
			}
			if why := fresh(ts, now); why != "" {
				return why
			}
			mac := hmac.New(sha256.New, []byte(secret))
			mac.Write([]byte("v0:" + ts + ":"))
			mac.Write(body)
			want := "v0=" + hex.EncodeToString(mac.Sum(nil))
			if !hmac.Equal([]byte(want), []byte(sig)) {
				return "the signature is not the signing secret's"
			}
			return ""
		}}, nil
}

// discordInteraction is the part of a Discord interaction TheFold reads.
type discordInteraction struct {
	Type   int `json:"type"`
	Member *struct {
		User *discordUser `json:"user"`
	} `json:"member"`
	User *discordUser `json:"user"`
	Data *struct {
		Name    string `json:"name"`
		Options []struct {
			Value json.RawMessage `json:"value"`
		} `json:"options"`
	} `json:"data"`
}

type discordUser struct {
	ID string `json:"id"`
}

// Discord interaction types.
const (
	discordPing    = 1
	discordCommand = 2
)

// parseDiscord reads an interaction (JSON), signed as Discord documents: Ed25519 over
// timestamp + body with the application's public key.
func parseDiscord(req *agentv1.HandleInboundRequest) (*inbound, error) {
	var it discordInteraction
	if err := json.Unmarshal(req.Body, &it); err != nil {
		return nil, errs.Invalid("body", "not a Discord interaction (JSON)")
	}
	if it.Type <= 0 {
		return nil, errs.Invalid("body", "a Discord interaction has a type")
	}
	in := &inbound{kind: req.Kind, ping: it.Type == discordPing, other: it.Type != discordPing && it.Type != discordCommand, command: "/thefold"}
	if !in.ping {
		switch {
		case it.Member != nil && it.Member.User != nil && it.Member.User.ID != "":
			in.user = it.Member.User.ID
		case it.User != nil && it.User.ID != "":
			in.user = it.User.ID
		default:
			return nil, errs.Invalid("body", "a Discord interaction names its user (member.user.id or user.id)")
		}
		if len(in.user) > maxExternalUser {
			return nil, errs.Invalid("body", "the user id: at most %d bytes", maxExternalUser)
		}
	}
	if it.Data != nil {
		in.command = "/" + it.Data.Name
		for _, o := range it.Data.Options {
			var s string
			if json.Unmarshal(o.Value, &s) == nil && strings.TrimSpace(s) != "" {
				in.text = strings.TrimSpace(s)
				break
			}
		}
		if in.text == "" {
			in.text = strings.TrimSpace(it.Data.Name)
		}
	}
	ts := req.Headers["x-signature-timestamp"]
	sig, err := hex.DecodeString(req.Headers["x-signature-ed25519"])
	if err != nil || len(sig) != ed25519.SignatureSize {
		sig = nil
	}
	// The key is the signature's bytes, so that the same signature in upper-case hex is
	// the same request.
	in.key = "discord:" + hex.EncodeToString(sig)
	msg := append([]byte(ts), req.Body...)
	in.verify = func(secret string, now time.Time) string {
		if sig == nil {
			return "no signature (64 bytes in hex)"
		}
		if why := fresh(ts, now); why != "" {
			return why
		}
		pub, err := hex.DecodeString(secret)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return "the integration's public key is not 32 bytes in hex"
		}
		if !ed25519.Verify(ed25519.PublicKey(pub), msg, sig) {
			return "the signature is not the public key's"
		}
		return ""
	}
	return in, nil
}
