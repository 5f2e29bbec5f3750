package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v84/github"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
)

// eventTypes are the webhook event names of the feed's event types.
var eventTypes = map[string]string{
	"IssuesEvent":                   "issues",
	"IssueCommentEvent":             "issue_comment",
	"PullRequestEvent":              "pull_request",
	"PullRequestReviewEvent":        "pull_request_review",
	"PullRequestReviewCommentEvent": "pull_request_review_comment",
	"PushEvent":                     "push",
	"CreateEvent":                   "create",
	"DeleteEvent":                   "delete",
	"ReleaseEvent":                  "release",
}

// defaultPollInterval is the wait between reads when GitHub names none.
const defaultPollInterval = 60 * time.Second

// RepoEvents reads repo's event feed (newest first, one page of 100); with etag from the
// last read it is conditional, and an unchanged feed is notModified with no events.
func (p *Provider) RepoEvents(ctx context.Context, repo, etag string) (*githubv1.ReadRepoEventFeedResponse, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	var events []*github.Event
	resp, err := readNoValue(ctx, p, func(ctx context.Context) (*github.Response, error) {
		req, err := p.gh.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/events?per_page=100", owner, name), nil)
		if err != nil {
			return nil, err
		}
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		events = nil
		return p.gh.Do(ctx, req, &events)
	})
	out := &githubv1.ReadRepoEventFeedResponse{}
	if resp != nil && resp.Response != nil {
		out.PollInterval = pollInterval(resp.Header.Get("X-Poll-Interval"))
		out.Etag = resp.Header.Get("ETag")
	}
	if httpStatus(err) == http.StatusNotModified {
		out.NotModified, out.Etag = true, etag
		return out, nil
	}
	if err != nil {
		return nil, p.mapErr(ctx, err, fmt.Sprintf("the events of %q", repo))
	}
	for _, e := range events {
		ev, err := repoEvent(repo, e)
		if err != nil {
			p.log.WarnContext(ctx, "github: an event of the feed is unreadable", "repo", repo, "id", e.GetID(), "type", e.GetType(), "err", err)
			continue
		}
		out.Events = append(out.Events, ev)
	}
	return out, nil
}

// repoEvent is e as a webhook delivery of its type would carry it: its payload with
// repository.full_name set.
func repoEvent(repo string, e *github.Event) (*githubv1.RepoEvent, error) {
	if _, err := strconv.ParseUint(e.GetID(), 10, 64); err != nil {
		return nil, fmt.Errorf("event id %q is not a number", e.GetID())
	}
	payload := map[string]any{}
	if e.RawPayload != nil {
		if err := json.Unmarshal(*e.RawPayload, &payload); err != nil {
			return nil, err
		}
	}
	payload["repository"] = map[string]any{"full_name": repo}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	typ, ok := eventTypes[e.GetType()]
	if !ok {
		typ = strings.ToLower(strings.TrimSuffix(e.GetType(), "Event"))
	}
	action, _ := payload["action"].(string)
	ev := &githubv1.RepoEvent{Id: e.GetID(), Type: typ, Action: action, Payload: raw}
	if e.CreatedAt != nil {
		ev.CreateTime = timestamppb.New(e.CreatedAt.Time)
	}
	return ev, nil
}

// pollInterval is X-Poll-Interval (seconds) as a duration, defaultPollInterval when unset
// or unreadable.
func pollInterval(h string) *durationpb.Duration {
	d := defaultPollInterval
	if n, err := strconv.Atoi(h); err == nil && n > 0 {
		d = time.Duration(n) * time.Second
	}
	return durationpb.New(d)
}
