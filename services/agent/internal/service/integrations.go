package service

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/validate"

	chatrun "github.com/thefold/thefold/services/agent/internal/chat"
)

// Limits of integrations.
const (
	maxIntegrationName = 100
	maxWebhookURL      = 2000
	maxInboundSecret   = 200
	maxExternalUser    = 100
)

// webhookHosts are the hosts a webhook may be posted to without the operator's leave.
var webhookHosts = map[agentv1.IntegrationKind][]string{
	agentv1.IntegrationKind_INTEGRATION_KIND_SLACK:   {"hooks.slack.com"},
	agentv1.IntegrationKind_INTEGRATION_KIND_DISCORD: {"discord.com", "discordapp.com", "ptb.discord.com", "canary.discord.com"},
}

// checkWebhook checks that raw is a webhook URL integrations of kind may post to: https to
// the kind's own hosts or to one the operator allowed (THEFOLD_AGENT_WEBHOOK_HOSTS), or
// http to an allowed loopback address. The poster refuses redirects, so a webhook cannot
// send the agent elsewhere.
func checkWebhook(field, raw string, kind agentv1.IntegrationKind, allowed []string) error {
	if err := validate.MaxLen(field, raw, maxWebhookURL); err != nil {
		return err
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return errs.Invalid(field, "not a webhook URL (https://host/path)")
	}
	host := strings.ToLower(u.Hostname())
	operator := slices.Contains(allowed, host)
	switch {
	case !operator && !slices.Contains(webhookHosts[kind], host):
		return errs.Invalid(field, "%s is not a %s webhook host (%s); the operator may allow others with THEFOLD_AGENT_WEBHOOK_HOSTS",
			host, strings.ToLower(strings.TrimPrefix(kind.String(), "INTEGRATION_KIND_")), strings.Join(webhookHosts[kind], ", "))
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && operator && net.ParseIP(host) != nil && net.ParseIP(host).IsLoopback():
		return nil
	}
	return errs.Invalid(field, "must be an https URL")
}

// webhookHint is the host and the last four characters of a webhook URL.
func webhookHint(raw string) string {
	u, _ := url.Parse(raw)
	tail := raw
	if len(tail) > 4 {
		tail = tail[len(tail)-4:]
	}
	return u.Host + "/…" + tail
}

// CreateIntegration connects the caller's Slack or Discord.
func (c *chat) CreateIntegration(ctx context.Context, req *agentv1.CreateIntegrationRequest) (*agentv1.CreateIntegrationResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if req.RequestId != "" {
		if err := validate.RequestID("request_id", req.RequestId); err != nil {
			return nil, err
		}
	}
	in := req.GetIntegration()
	if in == nil {
		return nil, errs.Invalid("integration", "required")
	}
	if in.Kind != agentv1.IntegrationKind_INTEGRATION_KIND_SLACK && in.Kind != agentv1.IntegrationKind_INTEGRATION_KIND_DISCORD {
		return nil, errs.Invalid("integration.kind", "INTEGRATION_KIND_SLACK or INTEGRATION_KIND_DISCORD")
	}
	name, err := validate.RequiredText("integration.name", in.Name, maxIntegrationName)
	if err != nil {
		return nil, err
	}
	if in.WebhookUrl == "" {
		return nil, errs.Invalid("integration.webhook_url", "required: the incoming webhook the notices are posted to")
	}
	if err := checkWebhook("integration.webhook_url", in.WebhookUrl, in.Kind, c.s.o.WebhookHosts); err != nil {
		return nil, err
	}
	if err := validate.MaxLen("integration.inbound_secret", in.InboundSecret, maxInboundSecret); err != nil {
		return nil, err
	}
	if in.Kind == agentv1.IntegrationKind_INTEGRATION_KIND_DISCORD && in.InboundSecret != "" {
		if k, err := hex.DecodeString(in.InboundSecret); err != nil || len(k) != 32 {
			return nil, errs.Invalid("integration.inbound_secret", "a Discord application's public key: 64 hex digits")
		}
	}
	if err := validate.MaxLen("integration.external_user_id", in.ExternalUserId, maxExternalUser); err != nil {
		return nil, err
	}
	if strings.ContainsAny(in.ExternalUserId, " \t\r\n") {
		return nil, errs.Invalid("integration.external_user_id", "a user id has no spaces")
	}
	if in.InboundSecret != "" && in.ExternalUserId == "" {
		return nil, errs.Invalid("integration.external_user_id", "required with an inbound_secret: whose requests are the person's")
	}
	if in.ConversationId != "" {
		id, err := validate.UUID("integration.conversation_id", in.ConversationId, true)
		if err != nil {
			return nil, err
		}
		if _, err := c.s.store.GetConversation(ctx, owner, id); err != nil {
			return nil, err
		}
	}
	for i, n := range in.Notices {
		if _, ok := agentv1.NoticeKind_name[int32(n)]; !ok || n == agentv1.NoticeKind_NOTICE_KIND_UNSPECIFIED {
			return nil, errs.Invalid(fmt.Sprintf("integration.notices[%d]", i), "unknown notice kind %d", n)
		}
	}
	if c.s.o.Secrets == nil {
		return nil, errs.Precondition("the agent has no secret key to seal integration secrets with (THEFOLD_AGENT_SECRET_KEY_FILE)")
	}
	webhook, err := c.s.o.Secrets.Seal(in.WebhookUrl)
	if err != nil {
		return nil, err
	}
	var inbound []byte
	if in.InboundSecret != "" {
		if inbound, err = c.s.o.Secrets.Seal(in.InboundSecret); err != nil {
			return nil, err
		}
	}
	out, err := c.s.store.CreateIntegration(ctx, &agentv1.Integration{OwnerId: owner, Kind: in.Kind, Name: name, WebhookHint: webhookHint(in.WebhookUrl),
		ExternalUserId: in.ExternalUserId, ConversationId: in.ConversationId, Notices: in.Notices}, webhook, inbound, req.RequestId)
	if err != nil {
		return nil, err
	}
	return &agentv1.CreateIntegrationResponse{Integration: out}, nil
}

// ListIntegrations lists the caller's integrations.
func (c *chat) ListIntegrations(ctx context.Context, req *agentv1.ListIntegrationsRequest) (*agentv1.ListIntegrationsResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	size, err := validate.PageSize(req.PageSize, 50, 100)
	if err != nil {
		return nil, err
	}
	out, next, err := c.s.store.ListIntegrations(ctx, owner, size, req.PageToken)
	if err != nil {
		return nil, err
	}
	return &agentv1.ListIntegrationsResponse{Integrations: out, NextPageToken: next}, nil
}

// TestIntegration posts a test message now.
func (c *chat) TestIntegration(ctx context.Context, req *agentv1.TestIntegrationRequest) (*agentv1.TestIntegrationResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.Id, true)
	if err != nil {
		return nil, err
	}
	rec, err := c.s.store.GetIntegration(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if c.s.o.Secrets == nil {
		return nil, errs.Precondition("the agent has no secret key to open integration secrets with (THEFOLD_AGENT_SECRET_KEY_FILE)")
	}
	url, err := c.s.o.Secrets.Open(rec.WebhookSealed)
	if err != nil {
		return nil, fmt.Errorf("open the webhook of integration %s: %w", id, err)
	}
	status, perr := c.poster().Post(ctx, rec.Kind, url, "TheFold: a test message from your "+rec.Name+" integration. Notices of your conversations come here.")
	resp := &agentv1.TestIntegrationResponse{Delivered: perr == nil, HttpStatus: int32(status)}
	if perr != nil {
		resp.Error = perr.Error()
	}
	if resp.Integration, err = c.s.store.SetIntegrationHealth(ctx, owner, id, perr == nil); err != nil {
		return nil, err
	}
	return resp, nil
}

// DeleteIntegration deletes one of the caller's integrations.
func (c *chat) DeleteIntegration(ctx context.Context, req *agentv1.DeleteIntegrationRequest) (*agentv1.DeleteIntegrationResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.Id, true)
	if err != nil {
		return nil, err
	}
	if err := c.s.store.DeleteIntegration(ctx, owner, id); err != nil {
		return nil, err
	}
	return &agentv1.DeleteIntegrationResponse{}, nil
}

// poster posts to webhooks within the hosts allowed.
func (c *chat) poster() *chatrun.Poster { return chatrun.NewPoster(c.s.o.WebhookHosts) }
