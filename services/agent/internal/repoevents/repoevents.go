// Package repoevents handles the GitHub webhook deliveries of connected repositories
// (agent RepoEventService): what a delivery says (Parse), whether TheFold acts on it
// (Event.Triage), and the Processor that acts on the pending ones in the background, on
// behalf of each connection's owner, with retries.
package repoevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/wait"

	"github.com/thefold/thefold/services/agent/internal/store"
)

const (
	pending = agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING
	done    = agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_DONE
	ignored = agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED
	failed  = agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_FAILED
)

// issueActions are the actions of an issues event that change what its task holds.
var issueActions = []string{"opened", "edited", "labeled", "unlabeled", "closed", "reopened"}

// Event is what a delivery's payload says, as far as TheFold reads it.
type Event struct {
	// Name is X-GitHub-Event; Action the payload's action ("" when it has none).
	Name, Action string
	// Repo is repository.full_name.
	Repo string
	// Issue is the issue's number (issues events); PullRequest is set when that "issue" is
	// a pull request.
	Issue       int32
	PullRequest bool
	// HookID is a ping's hook_id.
	HookID int64
}

// payload is the part of GitHub's webhook payloads TheFold reads.
type payload struct {
	Action     string `json:"action"`
	HookID     int64  `json:"hook_id"`
	Repository *struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
	Issue *struct {
		Number      int32           `json:"number"`
		PullRequest json.RawMessage `json:"pull_request"`
	} `json:"issue"`
}

// Parse reads a delivery of event name; a payload that is not a JSON object, or an issues
// event without an issue number, is INVALID_ARGUMENT naming the field.
func Parse(name string, raw []byte) (*Event, error) {
	var p payload
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, errs.Invalid("body", "not a GitHub webhook payload: %v", err)
	}
	ev := &Event{Name: name, Action: p.Action, HookID: p.HookID}
	if p.Repository != nil {
		ev.Repo = p.Repository.FullName
	}
	if name == "issues" {
		if p.Issue == nil || p.Issue.Number < 1 {
			return nil, errs.Invalid("issue.number", "an issues event names its issue's number")
		}
		ev.Issue = p.Issue.Number
		ev.PullRequest = len(p.Issue.PullRequest) > 0 && string(p.Issue.PullRequest) != "null"
	}
	return ev, nil
}

// Triage says what becomes of a delivery when it arrives: PENDING when the processor acts
// on it, DONE for a ping, IGNORED (with why) for the rest.
func (e *Event) Triage() (agentv1.RepoDeliveryState, string) {
	switch {
	case e.Name == "ping":
		return done, fmt.Sprintf("ping: the webhook (hook %d) reaches TheFold", e.HookID)
	case e.Name == "issues" && e.PullRequest:
		return ignored, fmt.Sprintf("#%d is a pull request", e.Issue)
	case e.Name == "issues" && slices.Contains(issueActions, e.Action):
		return pending, ""
	case e.Name == "issues":
		return ignored, fmt.Sprintf("issues %q changes nothing a task holds (TheFold follows %s)", e.Action, strings.Join(issueActions, ", "))
	}
	return ignored, fmt.Sprintf("TheFold does not act on %s events (it follows issues)", e.Name)
}

// Config tunes a Processor.
type Config struct {
	// Every is how often due deliveries are looked for.
	Every time.Duration
	// Lease is how long a claimed delivery is left to one processor before another may take
	// it again.
	Lease time.Duration
	// Backoff is the wait after a first failure; it doubles with each attempt, up to
	// MaxBackoff. MaxAttempts is how often one delivery is tried.
	Backoff, MaxBackoff time.Duration
	MaxAttempts         int
	// Keep is how long finished deliveries stay in the log.
	Keep time.Duration
}

// DefaultConfig is what the agent runs with.
var DefaultConfig = Config{Every: 500 * time.Millisecond, Lease: 2 * time.Minute, Backoff: 2 * time.Second, MaxBackoff: 5 * time.Minute,
	MaxAttempts: 8, Keep: 14 * 24 * time.Hour}

// Processor acts on pending deliveries: an issue's event imports that issue
// (TaskService.ImportIssues with its number) as the connection's owner.
type Processor struct {
	st       *store.Store
	tasks    tasksv1.TaskServiceClient
	signer   *auth.ServiceSigner
	disabled func(string) bool
	cfg      Config
	log      *slog.Logger
}

// NewProcessor returns a processor; disabled (nil: none) says whether an owner may no
// longer act.
func NewProcessor(st *store.Store, tasks tasksv1.TaskServiceClient, signer *auth.ServiceSigner, disabled func(string) bool, cfg Config, log *slog.Logger) *Processor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Processor{st: st, tasks: tasks, signer: signer, disabled: disabled, cfg: cfg, log: log}
}

// Run acts on deliveries until ctx ends; every hour it also forgets the finished ones
// older than Keep.
func (p *Processor) Run(ctx context.Context) error {
	go wait.Every(ctx, time.Hour, func(ctx context.Context) {
		if err := p.st.PruneRepoDeliveries(ctx, p.cfg.Keep); err != nil {
			p.log.WarnContext(ctx, "repo events: prune deliveries", "err", err)
		}
	})
	wait.Every(ctx, p.cfg.Every, func(ctx context.Context) {
		for {
			n, err := p.Once(ctx)
			if err != nil {
				if ctx.Err() == nil {
					p.log.WarnContext(ctx, "repo events: handle deliveries", "err", err)
				}
				return
			}
			if n == 0 {
				return
			}
		}
	})
	return ctx.Err()
}

// Once acts on the deliveries that are due now and reports how many it took.
func (p *Processor) Once(ctx context.Context) (int, error) {
	due, err := p.st.ClaimRepoDeliveries(ctx, 10, p.cfg.Lease)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	for _, d := range due {
		state, outcome, err := p.handle(ctx, d)
		retry := time.Duration(0)
		if err != nil {
			state, outcome = failed, err.Error()
			if transient(err) && int(d.Attempts) < p.cfg.MaxAttempts {
				state, retry = pending, min(p.cfg.Backoff<<min(d.Attempts-1, 16), p.cfg.MaxBackoff)
				outcome = fmt.Sprintf("attempt %d failed, trying again in %s: %v", d.Attempts, retry, err)
			} else if transient(err) {
				outcome = fmt.Sprintf("gave up after %d attempts: %v", d.Attempts, err)
			}
			p.log.WarnContext(ctx, "repo events: a delivery was not handled", "delivery", d.DeliveryId, "event", d.Event,
				"connection", d.ConnectionId, "attempt", d.Attempts, "err", err)
		}
		if err := p.st.FinishRepoDelivery(ctx, d.RepoDelivery, state, outcome, retry); err != nil {
			return 0, err
		}
	}
	return len(due), nil
}

// handle acts on one delivery and says what became of it; an error is a failure (tried again
// when transient).
func (p *Processor) handle(ctx context.Context, d *store.DueDelivery) (agentv1.RepoDeliveryState, string, error) {
	c := d.Connection
	if p.disabled != nil && p.disabled(c.OwnerId) {
		return failed, "the connection's owner is disabled", nil
	}
	ev, err := Parse(d.Event, d.Payload)
	if err != nil {
		return failed, "", err
	}
	if ev.Repo != c.Repo {
		return failed, fmt.Sprintf("the payload names %s, the connection %s", ev.Repo, c.Repo), nil
	}
	if st, why := ev.Triage(); st != pending {
		return st, why, nil
	}
	ctx = auth.OnBehalfOf(ctx, p.signer, c.OwnerId)
	resp, err := p.tasks.ImportIssues(ctx, &tasksv1.ImportIssuesRequest{Repo: c.Repo, Labels: c.IssueLabels, Numbers: []int32{ev.Issue}})
	if err != nil {
		return failed, "", err
	}
	return done, importOutcome(ev, resp), nil
}

// importOutcome says what an issue's import changed.
func importOutcome(ev *Event, resp *tasksv1.ImportIssuesResponse) string {
	switch {
	case len(resp.Created) > 0:
		return fmt.Sprintf("issue #%d (%s) became task %s", ev.Issue, ev.Action, resp.Created[0].Id)
	case len(resp.Updated) > 0:
		t := resp.Updated[0]
		return fmt.Sprintf("issue #%d (%s): task %s updated, %s", ev.Issue, ev.Action, t.Id,
			strings.ToLower(strings.TrimPrefix(t.Status.String(), "TASK_STATUS_")))
	}
	return fmt.Sprintf("issue #%d (%s): no task to change (it is up to date, or the issue is closed, gone or without the connection's labels)", ev.Issue, ev.Action)
}

// transient reports whether a failed call may succeed when tried again: the callee was
// unavailable, slow, overloaded or aborted, not refusing the request itself.
func transient(err error) bool {
	var d *errs.Downstream
	code := status.Code(err)
	if errors.As(err, &d) {
		code = d.Status.Code()
	}
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted, codes.Internal, codes.Unknown:
		return true
	}
	return false
}
