package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/pkg/linear"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// Limits of Linear connections.
const (
	// LinearWebhookPath is where the gateway takes Linear's webhook deliveries.
	LinearWebhookPath = "/hooks/linear"
	maxLinearTeams    = 20
	maxLinearProjects = 50
	maxLinearKey      = 256
	// maxTeamConnections bounds the connections of one team (the secrets a delivery is
	// checked against).
	maxTeamConnections    = 50
	defaultLinearInterval = 10 * time.Minute
	minLinearInterval     = time.Minute
	maxLinearInterval     = 24 * time.Hour
)

var (
	// linearID is the shape of Linear's ids (UUIDs) and of Linear-Delivery.
	linearID = regexp.MustCompile(`^[A-Za-z0-9-]{1,100}$`)
	// linearStates are the state types whose issues may become tasks.
	linearStates        = []string{linear.StateBacklog, linear.StateUnstarted, linear.StateStarted, linear.StateTriage}
	defaultLinearStates = []string{linear.StateUnstarted, linear.StateStarted}
	linearSignature     = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// linearService is the LinearService side of the server.
type linearService struct {
	agentv1.UnimplementedLinearServiceServer
	s *Server
}

// Linear is the LinearService side of the server.
func (s *Server) Linear() agentv1.LinearServiceServer { return &linearService{s: s} }

// ConnectLinear checks a Linear key and its teams and connects them.
func (l *linearService) ConnectLinear(ctx context.Context, req *agentv1.ConnectLinearRequest) (*agentv1.ConnectLinearResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if req.RequestId != "" {
		if err := validate.RequestID("request_id", req.RequestId); err != nil {
			return nil, err
		}
	}
	in := req.GetConnection()
	if in == nil {
		return nil, errs.Invalid("connection", "required: api_key, repo and team_ids")
	}
	c, err := checkLinearConnection(in)
	if err != nil {
		return nil, err
	}
	if l.s.o.Secrets == nil {
		return nil, errs.Precondition("the agent has no secret key to seal the API key with (THEFOLD_AGENT_SECRET_KEY_FILE)")
	}
	if l.s.o.Linear == nil || l.s.o.Repos == nil {
		return nil, errs.Precondition("the agent cannot sync Linear here (no Linear sync or github service configured)")
	}
	if _, err := l.s.o.Repos.GetRepo(ctx, &githubv1.GetRepoRequest{Repo: c.Repo}); err != nil {
		if status.Code(err) == codes.NotFound {
			return nil, errs.NotFound("repository", c.Repo)
		}
		return nil, err
	}
	if err := l.checkWithLinear(ctx, in.ApiKey, c); err != nil {
		return nil, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	secret := hex.EncodeToString(raw)
	keySealed, err := l.s.o.Secrets.Seal(in.ApiKey)
	if err != nil {
		return nil, err
	}
	secretSealed, err := l.s.o.Secrets.Seal(secret)
	if err != nil {
		return nil, err
	}
	c.OwnerId, c.ApiKeyHint = owner, "…"+in.ApiKey[len(in.ApiKey)-4:]
	out, created, err := l.s.store.CreateLinearConnection(ctx, c, keySealed, secretSealed, req.RequestId)
	if err != nil {
		return nil, err
	}
	if created {
		out.WebhookSecret = secret
	}
	out.WebhookPath = LinearWebhookPath
	return &agentv1.ConnectLinearResponse{Connection: out}, nil
}

// checkLinearConnection checks what ConnectLinear is given and returns the connection to
// store, its defaults filled in (the key is not in it).
func checkLinearConnection(in *agentv1.LinearConnection) (*agentv1.LinearConnection, error) {
	key := in.GetApiKey()
	switch {
	case key == "":
		return nil, errs.Invalid("connection.api_key", "required: a Linear personal API key (Settings → Account → Security & access)")
	case len(key) < 8 || len(key) > maxLinearKey || !validate.PrintableASCII(key, false):
		return nil, errs.Invalid("connection.api_key", "8–%d printable characters without spaces", maxLinearKey)
	}
	if err := validate.Repo("connection.repo", in.GetRepo(), true); err != nil {
		return nil, err
	}
	teams := in.GetTeamIds()
	if len(teams) == 0 || len(teams) > maxLinearTeams {
		return nil, errs.Invalid("connection.team_ids", "1–%d Linear team ids, got %d", maxLinearTeams, len(teams))
	}
	if err := linearIDs("connection.team_ids", teams); err != nil {
		return nil, err
	}
	if len(in.GetProjectIds()) > maxLinearProjects {
		return nil, errs.Invalid("connection.project_ids", "at most %d, got %d", maxLinearProjects, len(in.GetProjectIds()))
	}
	if err := linearIDs("connection.project_ids", in.GetProjectIds()); err != nil {
		return nil, err
	}
	states := slices.Clone(in.GetStateTypes())
	if len(states) == 0 {
		states = slices.Clone(defaultLinearStates)
	}
	for i, st := range states {
		if !slices.Contains(linearStates, st) {
			return nil, errs.Invalid(fmt.Sprintf("connection.state_types[%d]", i), "one of %s, got %q", strings.Join(linearStates, ", "), validate.Truncate(st, 40))
		}
	}
	slices.Sort(states)
	interval := defaultLinearInterval
	if d := in.GetSyncInterval(); d != nil {
		if err := d.CheckValid(); err != nil {
			return nil, errs.Invalid("connection.sync_interval", "not a duration: %v", err)
		}
		if d.AsDuration() != 0 {
			interval = d.AsDuration().Round(time.Second)
		}
	}
	if interval < minLinearInterval || interval > maxLinearInterval {
		return nil, errs.Invalid("connection.sync_interval", "between %s and %s (0 takes %s), got %s", minLinearInterval, maxLinearInterval,
			defaultLinearInterval, interval)
	}
	return &agentv1.LinearConnection{Repo: in.Repo, TeamIds: slices.Compact(slices.Sorted(slices.Values(teams))), ProjectIds: in.GetProjectIds(),
		StateTypes: slices.Compact(states), SyncInterval: durationpb.New(interval)}, nil
}

func linearIDs(field string, ids []string) error {
	for i, id := range ids {
		if !linearID.MatchString(id) {
			return errs.Invalid(fmt.Sprintf("%s[%d]", field, i), "a Linear id (letters, digits and -, at most 100), got %q", validate.Truncate(id, 110))
		}
	}
	return nil
}

// checkWithLinear asks Linear whether key works and sees c's teams, and fills in the
// key's user and the teams' keys.
func (l *linearService) checkWithLinear(ctx context.Context, key string, c *agentv1.LinearConnection) error {
	client := l.s.o.Linear.NewClient(key)
	me, err := client.Viewer(ctx)
	if err != nil {
		return linearError(err)
	}
	teams, err := client.Teams(ctx)
	if err != nil {
		return linearError(err)
	}
	for i, id := range c.TeamIds {
		j := slices.IndexFunc(teams, func(t linear.Team) bool { return t.ID == id })
		if j < 0 {
			return errs.Invalid(fmt.Sprintf("connection.team_ids[%d]", i), "no team %s is visible to the key", id)
		}
		c.TeamKeys = append(c.TeamKeys, teams[j].Key)
	}
	c.LinearUser = me.Name
	if me.Email != "" {
		c.LinearUser += " <" + me.Email + ">"
	}
	return nil
}

// linearError is how a failed call to Linear reaches the caller: a refused key is the
// caller's input; anything else is Linear being unavailable to us.
func linearError(err error) error {
	var rl *linear.RateLimitError
	switch {
	case errors.Is(err, linear.ErrUnauthorized):
		return errs.Invalid("connection.api_key", "Linear refused the key")
	case errors.As(err, &rl):
		return status.Errorf(codes.ResourceExhausted, "Linear's rate limit: try again after %s", rl.Reset.UTC().Format(time.RFC3339))
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return status.FromContextError(err).Err()
	}
	return status.Errorf(codes.Unavailable, "Linear did not answer as expected: %v", err)
}

// ListLinearConnections lists the caller's connections.
func (l *linearService) ListLinearConnections(ctx context.Context, req *agentv1.ListLinearConnectionsRequest) (*agentv1.ListLinearConnectionsResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	size, err := validate.PageSize(req.PageSize, 50, 100)
	if err != nil {
		return nil, err
	}
	list, next, err := l.s.store.ListLinearConnections(ctx, owner, size, req.PageToken)
	if err != nil {
		return nil, err
	}
	for _, c := range list {
		c.WebhookPath = LinearWebhookPath
	}
	return &agentv1.ListLinearConnectionsResponse{Connections: list, NextPageToken: next}, nil
}

// DeleteLinearConnection disconnects one of the caller's Linear connections.
func (l *linearService) DeleteLinearConnection(ctx context.Context, req *agentv1.DeleteLinearConnectionRequest) (*agentv1.DeleteLinearConnectionResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.Id, true)
	if err != nil {
		return nil, err
	}
	if err := l.s.store.DeleteLinearConnection(ctx, owner, id); err != nil {
		return nil, err
	}
	return &agentv1.DeleteLinearConnectionResponse{}, nil
}

// SyncLinear syncs one of the caller's connections now.
func (l *linearService) SyncLinear(ctx context.Context, req *agentv1.SyncLinearRequest) (*agentv1.SyncLinearResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("connection_id", req.ConnectionId, true)
	if err != nil {
		return nil, err
	}
	rec, err := l.s.store.GetLinearConnection(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if l.s.o.Linear == nil {
		return nil, errs.Precondition("the agent cannot sync Linear here")
	}
	out, err := l.s.o.Linear.Sync(ctx, rec, true)
	if err != nil {
		return nil, linearError(err)
	}
	return out, nil
}

// ListLinearIssues lists the issues one of the caller's connections synced.
func (l *linearService) ListLinearIssues(ctx context.Context, req *agentv1.ListLinearIssuesRequest) (*agentv1.ListLinearIssuesResponse, error) {
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
	if _, err := l.s.store.GetLinearConnection(ctx, owner, id); err != nil {
		return nil, err
	}
	list, next, err := l.s.store.ListLinearIssues(ctx, id, size, req.PageToken)
	if err != nil {
		return nil, err
	}
	return &agentv1.ListLinearIssuesResponse{Issues: list, NextPageToken: next}, nil
}

// linearDelivery is what the webhook handler reads of a delivery before it is verified.
type linearDelivery struct {
	Type string `json:"type"`
	Data struct {
		ID     string `json:"id"`
		TeamID string `json:"teamId"`
	} `json:"data"`
}

// HandleLinearWebhook verifies a delivery against the secrets of the connections of the
// issue's team and has its issue synced in the background.
func (l *linearService) HandleLinearWebhook(ctx context.Context, req *agentv1.HandleLinearWebhookRequest) (*agentv1.HandleLinearWebhookResponse, error) {
	if err := fromGateway(ctx, "webhook deliveries"); err != nil {
		return nil, err
	}
	h := req.GetHeaders()
	sig, id := h["linear-signature"], h["linear-delivery"]
	log := l.s.log.With("delivery", validate.Truncate(id, 100), "event", validate.Truncate(h["linear-event"], 40))
	if !linearSignature.MatchString(sig) {
		log.WarnContext(ctx, "linear webhook refused: no Linear-Signature of 64 hex digits")
		return nil, errBadSignature
	}
	switch {
	case len(req.Body) > MaxWebhookBody:
		return nil, errs.Invalid("body", "at most %d bytes, got %d", MaxWebhookBody, len(req.Body))
	case !linearID.MatchString(id):
		return nil, errs.Invalid("linear-delivery", "Linear's delivery id (letters, digits and -, at most 100), got %q", validate.Truncate(id, 110))
	}
	var d linearDelivery
	if err := json.Unmarshal(req.Body, &d); err != nil {
		return nil, errs.Invalid("body", "not a Linear webhook payload: %v", err)
	}
	if d.Type != linear.WebhookTypeIssue {
		return &agentv1.HandleLinearWebhookResponse{Reason: fmt.Sprintf("%s events are not synced", validate.Truncate(d.Type, 40))}, nil
	}
	if !linearID.MatchString(d.Data.ID) || !linearID.MatchString(d.Data.TeamID) {
		return nil, errs.Invalid("body", "an Issue event without data.id and data.teamId")
	}
	conns, err := l.s.store.LinearConnectionsOfTeam(ctx, d.Data.TeamID, maxTeamConnections)
	if err != nil {
		return nil, err
	}
	conn, why := l.verifyLinear(ctx, conns, sig, req.Body)
	if conn == nil {
		log.WarnContext(ctx, "linear webhook refused", "team", d.Data.TeamID, "why", why)
		return nil, errBadSignature
	}
	if l.s.o.Disabled != nil && l.s.o.Disabled(conn.OwnerId) {
		log.WarnContext(ctx, "linear webhook of a disabled owner refused", "owner", conn.OwnerId)
		return nil, status.Error(codes.PermissionDenied, "the connection's owner is disabled: the delivery was not taken")
	}
	dup, err := l.s.store.AddLinearDelivery(ctx, conn.Id, id, d.Data.ID)
	if err != nil {
		return nil, err
	}
	log.InfoContext(ctx, "linear webhook taken", "connection", conn.Id, "issue", d.Data.ID, "duplicate", dup)
	return &agentv1.HandleLinearWebhookResponse{Accepted: true, Duplicate: dup}, nil
}

// verifyLinear returns the connection whose secret signed body (within Linear's minute),
// or nil and why none did.
func (l *linearService) verifyLinear(ctx context.Context, conns []*store.LinearRecord, sig string, body []byte) (*store.LinearRecord, string) {
	if len(conns) == 0 {
		return nil, "no connection of the team"
	}
	if l.s.o.Secrets == nil {
		return nil, "the agent has no secret key to open webhook secrets with"
	}
	for _, c := range conns {
		secret, err := l.s.o.Secrets.Open(c.SecretSealed)
		if err != nil {
			l.s.log.ErrorContext(ctx, "a Linear webhook secret cannot be opened with this agent's key", "connection", c.Id, "err", err)
			continue
		}
		_, err = linear.VerifyWebhook(secret, body, sig, time.Now())
		switch {
		case err == nil:
			return c, ""
		case errors.Is(err, linear.ErrStaleWebhook):
			return nil, "signed by connection " + c.Id + " but " + err.Error()
		}
	}
	return nil, fmt.Sprintf("the signature matches none of the team's %d connection secrets", len(conns))
}
