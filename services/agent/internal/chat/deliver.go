package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/seal"
	"github.com/thefold/thefold/pkg/wait"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// Poster posts messages to Slack and Discord incoming webhooks.
type Poster struct {
	allowed []string
	client  *http.Client
}

// NewPoster returns a poster that posts only to the kinds' own webhook hosts and to the
// operator's allowed ones, and follows no redirect.
func NewPoster(allowed []string) *Poster {
	return &Poster{allowed: allowed, client: &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// maxDiscordContent is the longest content Discord takes.
const maxDiscordContent = 2000

// Post posts text to the webhook at raw for kind and returns the HTTP status (0: no answer).
func (p *Poster) Post(ctx context.Context, kind agentv1.IntegrationKind, raw, text string) (int, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return 0, fmt.Errorf("webhook URL: %w", err)
	}
	host := strings.ToLower(u.Hostname())
	if !slices.Contains(p.allowed, host) && !strings.HasSuffix(host, ".slack.com") && !strings.HasSuffix("."+host, ".discord.com") &&
		host != "discordapp.com" {
		return 0, fmt.Errorf("webhook host %s is not allowed", host)
	}
	var payload any
	switch kind {
	case agentv1.IntegrationKind_INTEGRATION_KIND_SLACK:
		payload = map[string]string{"text": text}
	case agentv1.IntegrationKind_INTEGRATION_KIND_DISCORD:
		if len(text) > maxDiscordContent {
			text = text[:maxDiscordContent-1] + "…"
		}
		payload = map[string]any{"content": text, "allowed_mentions": map[string]any{"parse": []string{}}}
	default:
		return 0, fmt.Errorf("unknown integration kind %v", kind)
	}
	body, _ := json.Marshal(payload)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, raw, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "TheFold")
	resp, err := p.client.Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return 0, errors.New("the webhook did not answer within 10s")
		}
		return 0, fmt.Errorf("the webhook could not be reached: %v", errors.Unwrap(err))
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("the webhook answered HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(snippet)))
	}
	return resp.StatusCode, nil
}

// DelivererConfig tunes the delivery of notices.
type DelivererConfig struct {
	// Every is how often due deliveries are looked for.
	Every time.Duration
	// Backoff is the wait after a delivery's first failure; it doubles with each attempt,
	// up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// MaxAttempts is how often one notice is tried; MaxFailures how many failures in a row
	// disable an integration.
	MaxAttempts, MaxFailures int
}

// DefaultDelivererConfig is what the service runs with unless told otherwise.
var DefaultDelivererConfig = DelivererConfig{Every: 500 * time.Millisecond, Backoff: 2 * time.Second, MaxBackoff: 5 * time.Minute,
	MaxAttempts: 6, MaxFailures: 5}

// Deliverer posts the notices waiting in integration_deliveries to their webhooks, with
// retries and backoff; an integration whose posts keep failing is disabled and its owner
// told in the conversation of the notice that failed.
type Deliverer struct {
	st     *store.Store
	box    *seal.Box
	poster *Poster
	cfg    DelivererConfig
	log    *slog.Logger
}

// NewDeliverer returns a deliverer; box opens the sealed webhook URLs.
func NewDeliverer(st *store.Store, box *seal.Box, poster *Poster, cfg DelivererConfig, log *slog.Logger) *Deliverer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Deliverer{st: st, box: box, poster: poster, cfg: cfg, log: log}
}

// Run delivers until ctx ends; every minute it also forgets the inbound requests too old to
// be accepted again.
func (d *Deliverer) Run(ctx context.Context) error {
	go wait.Every(ctx, time.Minute, func(ctx context.Context) {
		if err := d.st.PruneInbound(ctx, 15*time.Minute); err != nil {
			d.log.WarnContext(ctx, "chat: prune inbound requests", "err", err)
		}
	})
	wait.Every(ctx, d.cfg.Every, func(ctx context.Context) {
		for {
			n, err := d.Once(ctx)
			if err != nil {
				d.log.WarnContext(ctx, "chat: deliver notices", "err", err)
				return
			}
			if n == 0 {
				return
			}
		}
	})
	return ctx.Err()
}

// Once posts the deliveries that are due now and reports how many it took.
func (d *Deliverer) Once(ctx context.Context) (int, error) {
	due, err := d.st.DueDeliveries(ctx, 20, time.Minute)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	for _, dl := range due {
		in := dl.Integration
		var perr error
		url, err := d.box.Open(in.WebhookSealed)
		if err != nil {
			perr = fmt.Errorf("the webhook cannot be opened with this agent's key: %w", err)
		} else {
			_, perr = d.poster.Post(ctx, in.Kind, url, dl.Text)
		}
		if perr == nil {
			if err := d.st.Delivered(ctx, dl); err != nil {
				return 0, err
			}
			continue
		}
		backoff := min(d.cfg.Backoff<<min(dl.Attempts, 16), d.cfg.MaxBackoff)
		disabled, err := d.st.DeliveryFailed(ctx, dl, perr.Error(), backoff, d.cfg.MaxAttempts, d.cfg.MaxFailures)
		if err != nil {
			return 0, err
		}
		d.log.WarnContext(ctx, "chat: a notice was not posted", "integration", in.Id, "owner", in.OwnerId, "attempt", dl.Attempts+1, "err", perr)
		if disabled {
			kind := strings.ToLower(strings.TrimPrefix(in.Kind.String(), "INTEGRATION_KIND_"))
			n := notice(agentv1.NoticeKind_NOTICE_KIND_FAILED, nil, fmt.Sprintf("Your %s integration %q is disabled: its webhook failed %d times in a row "+
				"(the last: %s). Fix the webhook and test it (TestIntegration) to enable it again.", kind, in.Name, d.cfg.MaxFailures, perr))
			if err := d.st.AddNotice(ctx, dl.ConversationID, n); err != nil && !errors.Is(err, context.Canceled) {
				d.log.WarnContext(ctx, "chat: tell of a disabled integration", "integration", in.Id, "err", err)
			}
		}
	}
	return len(due), nil
}
