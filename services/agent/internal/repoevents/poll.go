package repoevents

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/pkg/wait"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// PollConfig tunes a Poller.
type PollConfig struct {
	// Every is how often due connections are looked for.
	Every time.Duration
	// MinInterval is the least wait between two reads of one feed, whatever GitHub asks.
	MinInterval time.Duration
	// Lease is how long a claimed connection is left to one poller.
	Lease time.Duration
	// Backoff is the wait after a read that failed (not a rate limit, whose wait GitHub
	// says).
	Backoff time.Duration
}

// DefaultPollConfig is what the agent runs with.
var DefaultPollConfig = PollConfig{Every: 5 * time.Second, MinInterval: 60 * time.Second, Lease: 2 * time.Minute, Backoff: 5 * time.Minute}

// Poller reads the GitHub event feeds of polled connections (RepoConnection.poll) and
// stores their new events as deliveries, which the Processor then handles as it handles the
// webhook's.
type Poller struct {
	st     *store.Store
	repos  githubv1.RepoServiceClient
	signer *auth.ServiceSigner
	cfg    PollConfig
	log    *slog.Logger
}

// NewPoller returns a poller.
func NewPoller(st *store.Store, repos githubv1.RepoServiceClient, signer *auth.ServiceSigner, cfg PollConfig, log *slog.Logger) *Poller {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Poller{st: st, repos: repos, signer: signer, cfg: cfg, log: log}
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) error {
	wait.Every(ctx, p.cfg.Every, func(ctx context.Context) {
		if _, err := p.Once(ctx); err != nil && ctx.Err() == nil {
			p.log.WarnContext(ctx, "repo events: poll", "err", err)
		}
	})
	return ctx.Err()
}

// Once reads the feeds that are due and reports how many it read.
func (p *Poller) Once(ctx context.Context) (int, error) {
	due, err := p.st.ClaimPolls(ctx, 10, p.cfg.Lease)
	if err != nil {
		return 0, err
	}
	for _, c := range due {
		if err := p.poll(ctx, c); err != nil {
			return 0, err
		}
	}
	return len(due), nil
}

// poll reads one connection's feed as its owner and records what it found; a failed read is
// recorded too, with the wait before the next (GitHub's for a rate limit).
func (p *Poller) poll(ctx context.Context, c *store.ConnectionRecord) error {
	resp, err := p.repos.ReadRepoEventFeed(auth.OnBehalfOf(ctx, p.signer, c.OwnerId), &githubv1.ReadRepoEventFeedRequest{Repo: c.Repo, Etag: c.PollETag})
	if err != nil {
		next := p.cfg.Backoff
		if d, ok := retryAfter(err); ok {
			next = max(d, p.cfg.MinInterval)
		}
		p.log.WarnContext(ctx, "repo events: the event feed could not be read", "repo", c.Repo, "connection", c.Id, "next", next, "err", err)
		return p.st.Polled(ctx, c, nil, nil, c.PollETag, c.PollLastEvent,
			fmt.Sprintf("read failed (%s): %s; next read in %s", status.Code(err), status.Convert(err).Message(), next.Round(time.Second)), next)
	}
	next := max(resp.GetPollInterval().AsDuration(), p.cfg.MinInterval)
	if resp.GetNotModified() {
		return p.st.Polled(ctx, c, nil, nil, c.PollETag, c.PollLastEvent, "unchanged", next)
	}
	last := c.PollLastEvent
	var (
		deliveries []*agentv1.RepoDelivery
		payloads   [][]byte
	)
	events := slices.Clone(resp.GetEvents())
	slices.Reverse(events) // oldest first
	for _, e := range events {
		id, err := strconv.ParseInt(e.GetId(), 10, 64)
		if err != nil || id <= c.PollLastEvent {
			continue
		}
		last = max(last, id)
		if c.PollLastEvent == 0 {
			continue // the first read starts the feed: what came before is not replayed
		}
		d := &agentv1.RepoDelivery{ConnectionId: c.Id, DeliveryId: "event-" + e.GetId(), Event: e.GetType(), Action: e.GetAction()}
		ev, err := Parse(e.GetType(), e.GetPayload())
		if err != nil {
			d.State, d.Outcome = ignored, "unreadable: "+status.Convert(err).Message()
		} else {
			d.State, d.Outcome = ev.Triage()
		}
		deliveries, payloads = append(deliveries, d), append(payloads, e.GetPayload())
	}
	msg := fmt.Sprintf("%d new events", len(deliveries))
	if c.PollLastEvent == 0 {
		msg = "started: events from now on are taken"
	}
	return p.st.Polled(ctx, c, deliveries, payloads, resp.GetEtag(), last, msg, next)
}

// retryAfter is the wait a RESOURCE_EXHAUSTED error's RetryInfo names.
func retryAfter(err error) (time.Duration, bool) {
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}
