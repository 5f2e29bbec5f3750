package service

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/agent/internal/repoevents"
	"github.com/thefold/thefold/services/agent/internal/store"
)

// Limits of repository connections and webhook deliveries.
const (
	// WebhookPath is where the gateway takes GitHub's webhook deliveries.
	WebhookPath = "/hooks/github"
	// MaxWebhookBody bounds a delivery's body; GitHub's issue and review payloads are tens
	// of KiB.
	MaxWebhookBody = 1 << 20
	// maxRepoConnections bounds the connections of one repository (the secrets a delivery
	// is checked against).
	maxRepoConnections = 50
	maxIssueLabels     = 20
	maxIssueLabel      = 50
)

// deliveryID is the shape of GitHub's X-GitHub-Delivery (a GUID); eventName that of
// X-GitHub-Event.
var (
	deliveryID = regexp.MustCompile(`^[A-Za-z0-9-]{1,100}$`)
	eventName  = regexp.MustCompile(`^[a-z_]{1,64}$`)
	signature  = regexp.MustCompile(`^sha256=[0-9a-f]{64}$`)
)

// repoEvents is the RepoEventService side of the server.
type repoEvents struct {
	agentv1.UnimplementedRepoEventServiceServer
	s *Server
}

// RepoEvents is the RepoEventService side of the server.
func (s *Server) RepoEvents() agentv1.RepoEventServiceServer { return &repoEvents{s: s} }

// ConnectRepository connects one of the caller's repositories and returns its webhook
// secret once.
func (r *repoEvents) ConnectRepository(ctx context.Context, req *agentv1.ConnectRepositoryRequest) (*agentv1.ConnectRepositoryResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if req.RequestId != "" {
		if err := validate.RequestID("request_id", req.RequestId); err != nil {
			return nil, err
		}
	}
	if err := validate.Repo("repo", req.Repo, true); err != nil {
		return nil, err
	}
	labels, err := validate.Labels("issue_labels", req.IssueLabels, maxIssueLabel, maxIssueLabels)
	if err != nil {
		return nil, err
	}
	health, err := healthSettings("health", req.Health)
	if err != nil {
		return nil, err
	}
	if r.s.o.Secrets == nil {
		return nil, errs.Precondition("the agent has no secret key to seal webhook secrets with (THEFOLD_AGENT_SECRET_KEY_FILE)")
	}
	if r.s.o.Repos == nil {
		return nil, errs.Precondition("the github service is not configured: connecting a repository needs it (THEFOLD_GITHUB_ADDR)")
	}
	// The caller must be able to read the repository: its issues become their tasks.
	if err := r.checkPoll(ctx, "poll", req.Repo, req.Poll); err != nil {
		return nil, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	secret := hex.EncodeToString(raw)
	sealed, err := r.s.o.Secrets.Seal(secret)
	if err != nil {
		return nil, err
	}
	c, created, err := r.s.store.CreateConnection(ctx, &agentv1.RepoConnection{OwnerId: owner, Repo: req.Repo, IssueLabels: labels, Poll: req.Poll, Health: health},
		sealed, req.RequestId)
	if err != nil {
		return nil, err
	}
	if created {
		c.WebhookSecret = secret
	}
	c.WebhookPath = WebhookPath
	return &agentv1.ConnectRepositoryResponse{Connection: c}, nil
}

// checkPoll checks that the caller can read repo and, where poll is asked for, that repo
// has a GitHub event feed.
func (r *repoEvents) checkPoll(ctx context.Context, field, repo string, poll bool) error {
	got, err := r.s.o.Repos.GetRepo(ctx, &githubv1.GetRepoRequest{Repo: repo})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return errs.NotFound("repository", repo)
		}
		return err
	}
	if poll && got.GetRepo().GetProvider() != githubv1.RepoProvider_REPO_PROVIDER_GITHUB {
		return errs.Invalid(field, "only GitHub repositories have an event feed to read; %s is not on GitHub", repo)
	}
	return nil
}

// connectionPaths are UpdateRepoConnection's updatable paths.
var connectionPaths = []string{"issue_labels", "poll", "health", "health.enabled", "health.interval", "health.todo_threshold", "health.auto_start"}

// UpdateRepoConnection changes one of the caller's connections.
func (r *repoEvents) UpdateRepoConnection(ctx context.Context, req *agentv1.UpdateRepoConnectionRequest) (*agentv1.UpdateRepoConnectionResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.Id, true)
	if err != nil {
		return nil, err
	}
	in := req.GetConnection()
	if in == nil {
		return nil, errs.Invalid("connection", "required")
	}
	if in.Id != "" && !strings.EqualFold(in.Id, id) {
		return nil, errs.Invalid("connection.id", "must equal id (%s) when set", id)
	}
	paths := req.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		return nil, errs.Invalid("update_mask", "required: name the fields to change among %s", strings.Join(connectionPaths, ", "))
	}
	for i, path := range paths {
		if !slices.Contains(connectionPaths, path) {
			return nil, errs.Invalid(fmt.Sprintf("update_mask.paths[%d]", i), "%q is not updatable; the updatable fields are %s", path,
				strings.Join(connectionPaths, ", "))
		}
	}
	has := func(f string) bool { return slices.Contains(paths, f) }
	var u store.ConnectionUpdate
	if has("issue_labels") {
		if u.Labels, err = validate.Labels("connection.issue_labels", in.IssueLabels, maxIssueLabel, maxIssueLabels); err != nil {
			return nil, err
		}
		u.SetLabels = true
	}
	health := &agentv1.RepoHealthSettings{}
	if in.GetHealth() != nil {
		health = proto.Clone(in.GetHealth()).(*agentv1.RepoHealthSettings)
	}
	partial := slices.ContainsFunc(paths, func(p string) bool { return strings.HasPrefix(p, "health.") })
	if partial && has("health") {
		return nil, errs.Invalid("update_mask", "name either health or fields of health, not both")
	}
	cur, err := r.s.store.GetConnection(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if partial {
		// The fields not named keep their values.
		merged := proto.Clone(cur.GetHealth()).(*agentv1.RepoHealthSettings)
		for _, p := range paths {
			switch p {
			case "health.enabled":
				merged.Enabled = health.Enabled
			case "health.interval":
				merged.Interval = health.Interval
			case "health.todo_threshold":
				merged.TodoThreshold = health.TodoThreshold
			case "health.auto_start":
				merged.AutoStart = health.AutoStart
			}
		}
		health = merged
	}
	if partial || has("health") {
		if u.Health, err = healthSettings("connection.health", health); err != nil {
			return nil, err
		}
	}
	if has("poll") {
		if in.Poll && !cur.Poll {
			if r.s.o.Repos == nil {
				return nil, errs.Precondition("the github service is not configured: polling needs it (THEFOLD_GITHUB_ADDR)")
			}
			if err := r.checkPoll(ctx, "connection.poll", cur.Repo, true); err != nil {
				return nil, err
			}
		}
		u.SetPoll, u.Poll = true, in.Poll
	}
	c, err := r.s.store.UpdateConnection(ctx, owner, id, u)
	if err != nil {
		return nil, err
	}
	c.WebhookPath = WebhookPath
	return &agentv1.UpdateRepoConnectionResponse{Connection: c}, nil
}

// ListRepoConnections lists the caller's connections.
func (r *repoEvents) ListRepoConnections(ctx context.Context, req *agentv1.ListRepoConnectionsRequest) (*agentv1.ListRepoConnectionsResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	size, err := validate.PageSize(req.PageSize, 50, 100)
	if err != nil {
		return nil, err
	}
	list, next, err := r.s.store.ListConnections(ctx, owner, size, req.PageToken)
	if err != nil {
		return nil, err
	}
	for _, c := range list {
		c.WebhookPath = WebhookPath
	}
	return &agentv1.ListRepoConnectionsResponse{Connections: list, NextPageToken: next}, nil
}

// DeleteRepoConnection disconnects one of the caller's repositories.
func (r *repoEvents) DeleteRepoConnection(ctx context.Context, req *agentv1.DeleteRepoConnectionRequest) (*agentv1.DeleteRepoConnectionResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.Id, true)
	if err != nil {
		return nil, err
	}
	if err := r.s.store.DeleteConnection(ctx, owner, id); err != nil {
		return nil, err
	}
	return &agentv1.DeleteRepoConnectionResponse{}, nil
}

// ListRepoDeliveries lists one of the caller's connections' deliveries.
func (r *repoEvents) ListRepoDeliveries(ctx context.Context, req *agentv1.ListRepoDeliveriesRequest) (*agentv1.ListRepoDeliveriesResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("connection_id", req.ConnectionId, true)
	if err != nil {
		return nil, err
	}
	size, err := validate.PageSize(req.PageSize, 50, 100)
	if err != nil {
		return nil, err
	}
	if _, err := r.s.store.GetConnection(ctx, owner, id); err != nil {
		return nil, err
	}
	list, next, err := r.s.store.ListRepoDeliveries(ctx, id, size, req.PageToken)
	if err != nil {
		return nil, err
	}
	return &agentv1.ListRepoDeliveriesResponse{Deliveries: list, NextPageToken: next}, nil
}

// HandleGitHubWebhook verifies a delivery against the secrets of its repository's
// connections and stores it once, to be handled in the background.
func (r *repoEvents) HandleGitHubWebhook(ctx context.Context, req *agentv1.HandleGitHubWebhookRequest) (*agentv1.HandleGitHubWebhookResponse, error) {
	if err := fromGateway(ctx, "webhook deliveries"); err != nil {
		return nil, err
	}
	h := req.GetHeaders()
	event, id, sig := h["x-github-event"], h["x-github-delivery"], h["x-hub-signature-256"]
	log := r.s.log.With("event", event, "delivery", validate.Truncate(id, 100))
	// Unsigned first: a request without a signature learns nothing else.
	if sig == "" || !signature.MatchString(sig) {
		log.WarnContext(ctx, "github webhook refused: no X-Hub-Signature-256 of the form sha256=<64 hex digits>")
		return nil, errBadSignature
	}
	switch {
	case len(req.Body) > MaxWebhookBody:
		return nil, errs.Invalid("body", "at most %d bytes, got %d", MaxWebhookBody, len(req.Body))
	case !eventName.MatchString(event):
		return nil, errs.Invalid("x-github-event", "GitHub's event name (lower case and _, at most 64), got %q", validate.Truncate(event, 70))
	case !deliveryID.MatchString(id):
		return nil, errs.Invalid("x-github-delivery", "GitHub's delivery id (letters, digits and -, at most 100), got %q", validate.Truncate(id, 110))
	}
	payload, err := webhookPayload(h["content-type"], req.Body)
	if err != nil {
		return nil, err
	}
	ev, err := repoevents.Parse(event, payload)
	if err != nil {
		return nil, err
	}
	if err := validate.Repo("repository.full_name", ev.Repo, true); err != nil {
		return nil, err
	}
	conn, why, err := r.verify(ctx, ev.Repo, sig, req.Body)
	if err != nil {
		return nil, err
	}
	if conn == nil {
		log.WarnContext(ctx, "github webhook refused", "repo", ev.Repo, "why", why)
		return nil, errBadSignature
	}
	if r.s.o.Disabled != nil && r.s.o.Disabled(conn.OwnerId) {
		log.WarnContext(ctx, "github webhook of a disabled owner refused", "repo", ev.Repo, "owner", conn.OwnerId)
		return nil, status.Error(codes.PermissionDenied, "the connection's owner is disabled: the delivery was not taken")
	}
	state, outcome := ev.Triage()
	d, dup, err := r.s.store.AddRepoDelivery(ctx, &agentv1.RepoDelivery{ConnectionId: conn.Id, DeliveryId: id, Event: event,
		Action: validate.Truncate(ev.Action, 100), State: state, Outcome: outcome}, payload)
	if err != nil {
		return nil, err
	}
	log.InfoContext(ctx, "github webhook taken", "repo", ev.Repo, "owner", conn.OwnerId, "state", d.State.String(), "duplicate", dup)
	return &agentv1.HandleGitHubWebhookResponse{Delivery: d, Duplicate: dup}, nil
}

// verify returns the connection of repo whose secret signed body, or nil and why none did.
func (r *repoEvents) verify(ctx context.Context, repo, sig string, body []byte) (*store.ConnectionRecord, string, error) {
	conns, err := r.s.store.ConnectionsOfRepo(ctx, repo, maxRepoConnections)
	if err != nil {
		return nil, "", err
	}
	if len(conns) == 0 {
		return nil, "no connection of the repository", nil
	}
	if r.s.o.Secrets == nil {
		return nil, "", errs.Precondition("the agent has no secret key to open webhook secrets with (THEFOLD_AGENT_SECRET_KEY_FILE)")
	}
	want, _ := hex.DecodeString(strings.TrimPrefix(sig, "sha256="))
	for _, c := range conns {
		secret, err := r.s.o.Secrets.Open(c.SecretSealed)
		if err != nil {
			r.s.log.ErrorContext(ctx, "a webhook secret cannot be opened with this agent's key", "connection", c.Id, "err", err)
			continue
		}
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		if hmac.Equal(mac.Sum(nil), want) {
			return c, "", nil
		}
	}
	return nil, fmt.Sprintf("the signature matches none of the repository's %d connection secrets", len(conns)), nil
}

// webhookPayload is the JSON of a delivery: the body itself (application/json), or its
// payload field (application/x-www-form-urlencoded, GitHub's other content type).
func webhookPayload(contentType string, body []byte) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if contentType == "" {
		mt, err = "application/json", nil
	}
	switch {
	case err != nil:
		return nil, errs.Invalid("content-type", "not a media type: %q", validate.Truncate(contentType, 100))
	case mt == "application/json":
		if !json.Valid(body) {
			return nil, errs.Invalid("body", "not JSON")
		}
		return body, nil
	case mt == "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(body))
		if err != nil || !json.Valid([]byte(form.Get("payload"))) {
			return nil, errs.Invalid("body", "a form without a JSON payload field")
		}
		return []byte(form.Get("payload")), nil
	}
	return nil, errs.Invalid("content-type", "application/json or application/x-www-form-urlencoded, got %s", validate.Truncate(mt, 100))
}

// StartRevision starts a job revising prev's pull request with feedback: the changes people
// with write access asked for on it (RepoEventService). requestID keys the start, so the
// same delivery handled twice starts one job. prev's task, done or cancelled, goes back to
// the backlog first; another unfinished job of the task is ALREADY_EXISTS. ctx acts for
// prev's owner.
func (s *Server) StartRevision(ctx context.Context, prev *agentv1.Job, requestID, feedback string) (*agentv1.Job, error) {
	if s.o.Tasks == nil || s.o.Queue == nil {
		return nil, errs.Precondition("the agent cannot start jobs here (no tasks service or job queue)")
	}
	t, err := s.o.Tasks.GetTask(ctx, &tasksv1.GetTaskRequest{Id: prev.TaskId})
	if status.Code(err) == codes.NotFound {
		return nil, errs.Precondition("the task of pull request #%d (%s) was deleted", prev.GetPullRequest().GetNumber(), prev.TaskId)
	}
	if err != nil {
		return nil, err
	}
	switch t.GetTask().GetStatus() {
	case tasksv1.TaskStatus_TASK_STATUS_DONE, tasksv1.TaskStatus_TASK_STATUS_CANCELLED:
		if _, err := s.o.Tasks.SetTaskStatus(ctx, &tasksv1.SetTaskStatusRequest{Id: prev.TaskId, Status: tasksv1.TaskStatus_TASK_STATUS_BACKLOG,
			Reason: fmt.Sprintf("changes asked for on pull request #%d", prev.GetPullRequest().GetNumber())}); err != nil {
			return nil, err
		}
	}
	prefs, err := s.store.GetPreferences(ctx, prev.OwnerId)
	if err != nil {
		return nil, err
	}
	j := &agentv1.Job{OwnerId: prev.OwnerId, TaskId: prev.TaskId, Repo: prev.Repo, BaseBranch: prev.BaseBranch, Model: prev.Model,
		Budget: withDefaults(prefs.JobBudget, s.o.Budget), Usage: &typev1.Usage{}, Preferences: prefs,
		Branch: prev.Branch, PullRequest: prev.PullRequest, IssueNumber: prev.IssueNumber, RevisesJobId: prev.Id}
	rec, _, err := s.store.CreateWithContext(ctx, j, &aiv1.PlanTaskRequest{Feedback: feedback}, requestID, nil, s.o.RateLimit, s.o.Queue.Enqueue)
	if err != nil {
		return nil, rateLimited(err)
	}
	return rec.Job, nil
}

// JobOfPullRequest is owner's latest job whose pull request is number in repo; nil when
// there is none.
func (s *Server) JobOfPullRequest(ctx context.Context, owner, repo string, number int32) (*agentv1.Job, error) {
	return s.store.JobOfPullRequest(ctx, owner, repo, number)
}

// JobOfBranch is owner's latest job with a pull request from branch in repo; nil when there
// is none.
func (s *Server) JobOfBranch(ctx context.Context, owner, repo, branch string) (*agentv1.Job, error) {
	return s.store.JobOfBranch(ctx, owner, repo, branch)
}

// Revisions counts the revisions of owner's pull request number in repo.
func (s *Server) Revisions(ctx context.Context, owner, repo string, number int32) (int, error) {
	return s.store.RevisionsOf(ctx, owner, repo, number)
}
