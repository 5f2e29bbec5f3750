package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/validate"
)

// MaxHookBody bounds an inbound hook's body (413 above it): the agent takes at most 64 KiB,
// and a slash command or an interaction is a few hundred bytes.
const MaxHookBody = 64 << 10

// Option adds to what New serves.
type Option func(*options)

type options struct {
	hookSigner *auth.ServiceSigner
}

// WithInboundHooks serves POST /hooks/slack and POST /hooks/discord: each request is handed
// to the agent's ChatService.HandleInbound as signer's service speaking for itself (the
// gateway's own identity). Without a signer those routes answer 503.
func WithInboundHooks(signer *auth.ServiceSigner) Option {
	return func(o *options) { o.hookSigner = signer }
}

// hook is one inbound hook route: Slack's slash commands or Discord's interactions. They
// carry no bearer token — Slack and Discord sign them, and the agent verifies the signature
// against the integration of the user a request names — so no caller's token is forwarded:
// the edge calls as itself. The request-size and rate limits apply as to any request.
type hook struct {
	route   string
	kind    agentv1.IntegrationKind
	headers []string // canonical names of the headers the agent needs
	chat    agentv1.ChatServiceClient
	signer  *auth.ServiceSigner
	log     *slog.Logger
}

// hookRoutes are the inbound hooks' paths, with their kinds and the headers they forward.
var hookRoutes = []struct {
	path    string
	kind    agentv1.IntegrationKind
	headers []string
}{
	{"/hooks/slack", agentv1.IntegrationKind_INTEGRATION_KIND_SLACK, []string{"Content-Type", "X-Slack-Signature", "X-Slack-Request-Timestamp"}},
	{"/hooks/discord", agentv1.IntegrationKind_INTEGRATION_KIND_DISCORD, []string{"Content-Type", "X-Signature-Ed25519", "X-Signature-Timestamp"}},
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, ok := takeHook(w, r, h.route, "Slack and Discord post their requests", h.signer, MaxHookBody)
	if !ok {
		return
	}
	ctx := hookContext(r, h.signer)
	resp, err := h.chat.HandleInbound(ctx, &agentv1.HandleInboundRequest{Kind: h.kind, Body: body, Headers: hookHeaders(r, h.headers)})
	if err != nil {
		hookFailed(w, r, err, h.route, h.log)
		return
	}
	code, ct := int(resp.GetHttpStatus()), resp.GetContentType()
	if code < 200 || code > 599 || !validate.PrintableASCII(ct, true) {
		h.log.WarnContext(r.Context(), "inbound hook: the agent's answer cannot be sent", "route", h.route, "status", code, "content_type", ct)
		hookError(w, http.StatusBadGateway, "TheFold could not take the request now; try again")
		return
	}
	if ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(code)
	_, _ = w.Write(resp.GetBody())
}

// takeHook names the request's route for the counts and logs, refuses what is not a POST or
// what the gateway cannot pass on, and reads the body (at most limit bytes); false: it
// answered the request already.
func takeHook(w http.ResponseWriter, r *http.Request, route, who string, signer *auth.ServiceSigner, limit int64) ([]byte, bool) {
	if ex, ok := r.Context().Value(exchangeKey{}).(*exchange); ok {
		ex.route = route // counted and logged as a route of its own
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		hookError(w, http.StatusMethodNotAllowed, "POST only: "+who)
		return nil, false
	}
	if signer == nil {
		hookError(w, http.StatusServiceUnavailable, "inbound hooks need the gateway's service identity (THEFOLD_AUTH_SERVICE_KEY_FILE)")
		return nil, false
	}
	return readHookBody(w, r, limit)
}

// hookError answers an inbound hook that failed: {"error": msg}, the shape Slack and
// Discord (and whoever configures them) read; the X-Request-Id header names the request.
func hookError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// readHookBody reads a hook's body of at most limit bytes; otherwise it answers (413 or 400)
// and returns false.
func readHookBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	tooLarge := fmt.Sprintf("request body too large: at most %d bytes", limit)
	if r.ContentLength > limit {
		w.Header().Set("Connection", "close")
		hookError(w, http.StatusRequestEntityTooLarge, tooLarge)
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		hookError(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		return nil, false
	}
	if int64(len(body)) > limit {
		w.Header().Set("Connection", "close")
		hookError(w, http.StatusRequestEntityTooLarge, tooLarge)
		return nil, false
	}
	return body, true
}

// hookHeaders are the values of r's headers names (in lower case), those present.
func hookHeaders(r *http.Request, names []string) map[string]string {
	out := make(map[string]string, len(names))
	for _, name := range names {
		if v := r.Header.Get(name); v != "" {
			out[strings.ToLower(name)] = v
		}
	}
	return out
}

// hookContext is the context a hook calls the agent in: as the gateway itself, with the
// request's id.
func hookContext(r *http.Request, signer *auth.ServiceSigner) context.Context {
	ctx := auth.AsService(r.Context(), signer)
	if id := r.Header.Get("X-Request-Id"); id != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-request-id", id)
	}
	return ctx
}

// hookFailed answers a hook the agent refused or could not take: its refusals (401, 403,
// 400) are the caller's answer; its own trouble is logged and mapped to 502.
func hookFailed(w http.ResponseWriter, r *http.Request, err error, route string, log *slog.Logger) {
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unauthenticated:
		hookError(w, http.StatusUnauthorized, st.Message())
	case codes.PermissionDenied:
		hookError(w, http.StatusForbidden, st.Message())
	case codes.InvalidArgument:
		hookError(w, http.StatusBadRequest, st.Message())
	default:
		// The agent's own trouble is not the caller's answer: mapped, not passed on.
		log.WarnContext(r.Context(), "inbound hook: the agent did not take the request", "route", route, "code", st.Code().String(), "err", st.Message())
		hookError(w, http.StatusBadGateway, "TheFold could not take the request now ("+codeName(st.Code())+"); try again")
	}
}

// MaxGitHubHookBody bounds a GitHub (or Linear) webhook delivery's body (413 above it): the agent takes
// at most 1 MiB; issue and review payloads are tens of KiB.
const MaxGitHubHookBody = 1 << 20

// githubHookPath is where GitHub posts a connected repository's webhook deliveries.
const githubHookPath = "/hooks/github"

// githubHookHeaders are the headers of a delivery the agent needs.
var githubHookHeaders = []string{"Content-Type", "X-GitHub-Event", "X-GitHub-Delivery", "X-Hub-Signature-256"}

// githubHook takes GitHub's webhook deliveries (POST /hooks/github) and hands them to the
// agent's RepoEventService.HandleGitHubWebhook, which verifies their signature against the
// secrets of the repository's connections; like the other hooks it carries no bearer token
// and calls as the gateway itself.
type githubHook struct {
	events agentv1.RepoEventServiceClient
	signer *auth.ServiceSigner
	log    *slog.Logger
}

func (h *githubHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, ok := takeHook(w, r, githubHookPath, "GitHub posts its webhook deliveries", h.signer, MaxGitHubHookBody)
	if !ok {
		return
	}
	resp, err := h.events.HandleGitHubWebhook(hookContext(r, h.signer),
		&agentv1.HandleGitHubWebhookRequest{Body: body, Headers: hookHeaders(r, githubHookHeaders)})
	if err != nil {
		hookFailed(w, r, err, githubHookPath, h.log)
		return
	}
	d := resp.GetDelivery()
	code := http.StatusOK
	if d.GetState() == agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING && !resp.GetDuplicate() {
		code = http.StatusAccepted // taken, to be handled
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"delivery_id": d.GetDeliveryId(),
		"state":       strings.ToLower(strings.TrimPrefix(d.GetState().String(), "REPO_DELIVERY_STATE_")),
		"outcome":     d.GetOutcome(),
		"duplicate":   resp.GetDuplicate(),
	})
}

// linearHookPath is where Linear posts the webhook deliveries of a connected workspace.
const linearHookPath = "/hooks/linear"

// linearHookHeaders are the headers of a delivery the agent needs.
var linearHookHeaders = []string{"Content-Type", "Linear-Signature", "Linear-Delivery", "Linear-Event"}

// linearHook takes Linear's webhook deliveries (POST /hooks/linear) and hands them to the
// agent's LinearService as the gateway itself: the agent verifies Linear-Signature against
// the secrets of the connections of the team. A delivery taken is 200 (Linear
// retries anything else), as is one of a kind not synced.
type linearHook struct {
	linear agentv1.LinearServiceClient
	signer *auth.ServiceSigner
	log    *slog.Logger
}

func (h *linearHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, ok := takeHook(w, r, linearHookPath, "Linear posts its webhook deliveries", h.signer, MaxGitHubHookBody)
	if !ok {
		return
	}
	resp, err := h.linear.HandleLinearWebhook(hookContext(r, h.signer),
		&agentv1.HandleLinearWebhookRequest{Body: body, Headers: hookHeaders(r, linearHookHeaders)})
	if err != nil {
		hookFailed(w, r, err, linearHookPath, h.log)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(map[string]any{"accepted": resp.GetAccepted(), "duplicate": resp.GetDuplicate(), "reason": resp.GetReason()})
}
