// Package linearsync syncs a person's Linear issues with their tasks, both ways
// (LinearService): it pulls the issues of a connection's teams and states into tasks,
// follows them as they change, writes the tasks' statuses back as Linear states and
// comments, and settles an edit made on both sides by keeping the newer one.
package linearsync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/thefold/thefold/pkg/auth"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/linear"
	"github.com/thefold/thefold/pkg/protoenum"
	"github.com/thefold/thefold/pkg/validate"
	"github.com/thefold/thefold/pkg/wait"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// Config tunes a Syncer.
type Config struct {
	// Every is how often due connections are looked for.
	Every time.Duration
	// Lease is how long a claimed connection is left to one replica.
	Lease time.Duration
	// PushEvery is how often the tasks' statuses are written back between syncs.
	PushEvery time.Duration
	// Backoff is the wait after a sync that failed as a whole (Linear unreachable, the key
	// refused); a rate limit waits until Linear's reset instead.
	Backoff time.Duration
	// BaseURL is Linear's GraphQL endpoint (empty: Linear's own).
	BaseURL string
	// HTTP sends the requests to Linear (nil: a client with a 30 s timeout).
	HTTP *http.Client
}

// DefaultConfig is what the agent runs with.
var DefaultConfig = Config{Every: 5 * time.Second, Lease: 5 * time.Minute, PushEvery: 30 * time.Second, Backoff: 5 * time.Minute}

// Opener opens sealed secrets (the agent's seal.Box).
type Opener interface {
	Open(sealed []byte) (string, error)
}

// Syncer runs the syncs.
type Syncer struct {
	st       *store.Store
	tasks    tasksv1.TaskServiceClient
	secrets  Opener
	signer   *auth.ServiceSigner
	disabled func(user string) bool
	cfg      Config
	log      *slog.Logger
}

// New returns a syncer; disabled says whether a user's account is disabled (nil: never):
// a disabled owner's connections are not synced.
func New(st *store.Store, tasks tasksv1.TaskServiceClient, secrets Opener, signer *auth.ServiceSigner, disabled func(user string) bool, cfg Config,
	log *slog.Logger) *Syncer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	return &Syncer{st: st, tasks: tasks, secrets: secrets, signer: signer, disabled: disabled, cfg: cfg, log: log}
}

// Client is a Linear client with the connection's key.
func (s *Syncer) Client(rec *store.LinearRecord) (*linear.Client, error) {
	key, err := s.secrets.Open(rec.KeySealed)
	if err != nil {
		return nil, fmt.Errorf("linearsync: the API key of connection %s cannot be opened with this agent's key: %w", rec.Id, err)
	}
	return s.NewClient(key), nil
}

// NewClient is a Linear client with key.
func (s *Syncer) NewClient(key string) *linear.Client {
	return &linear.Client{BaseURL: s.cfg.BaseURL, APIKey: key, HTTP: s.cfg.HTTP}
}

// Run syncs the connections that are due until ctx ends.
func (s *Syncer) Run(ctx context.Context) error {
	wait.Every(ctx, s.cfg.Every, func(ctx context.Context) {
		if _, err := s.Once(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "linear: sync", "err", err)
		}
	})
	return ctx.Err()
}

// Once syncs the connections that are due, then pushes the statuses of those whose push
// alone is due, and reports how many it synced.
func (s *Syncer) Once(ctx context.Context) (int, error) {
	due, err := s.st.ClaimLinearSyncs(ctx, 5, s.cfg.Lease)
	if err != nil {
		return 0, err
	}
	for _, rec := range due {
		if _, err := s.Sync(ctx, rec, rec.FullSync); err != nil && ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
	pushes, err := s.st.ClaimLinearPushes(ctx, 20, s.cfg.PushEvery)
	if err != nil {
		return 0, err
	}
	for _, rec := range pushes {
		if _, err := s.Push(ctx, rec); err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			s.log.WarnContext(ctx, "linear: push", "connection", rec.Id, "err", err)
		}
	}
	return len(due), nil
}

// Push writes the statuses of rec's tasks that changed since they were last written, without
// reading Linear's issues, and says how many it wrote.
func (s *Syncer) Push(ctx context.Context, rec *store.LinearRecord) (*agentv1.SyncLinearResponse, error) {
	if s.disabled != nil && s.disabled(rec.OwnerId) {
		return nil, errOwnerDisabled
	}
	client, err := s.Client(rec)
	if err != nil {
		return nil, err
	}
	x := &syncRun{s: s, rec: rec, ctx: auth.OnBehalfOf(ctx, s.signer, rec.OwnerId), out: &agentv1.SyncLinearResponse{}, client: client}
	return x.out, x.push()
}

// Sync pulls rec's issues (every issue of the chosen states when full, else what changed
// since the last sync and what webhooks named) and pushes the statuses waiting, records the
// sync and says what it did. An error is a sync that failed as a whole; it is recorded too.
func (s *Syncer) Sync(ctx context.Context, rec *store.LinearRecord, full bool) (*agentv1.SyncLinearResponse, error) {
	x := &syncRun{s: s, rec: rec, ctx: auth.OnBehalfOf(ctx, s.signer, rec.OwnerId), out: &agentv1.SyncLinearResponse{}}
	client, err := s.Client(rec)
	if err == nil && s.disabled != nil && s.disabled(rec.OwnerId) {
		err = errOwnerDisabled
	}
	if err == nil {
		x.client = client
		err = x.run(full || rec.SyncedTo.IsZero())
	}
	next := rec.SyncInterval.AsDuration()
	msg := fmt.Sprintf("%d created, %d updated, %d unchanged, %d pushed, %d conflicts", x.out.Created, x.out.Updated, x.out.Unchanged,
		x.out.Pushed, x.out.Conflicts)
	if len(x.out.Problems) > 0 {
		msg += fmt.Sprintf("; %d problems, the first: %s", len(x.out.Problems), x.out.Problems[0])
	}
	if err != nil {
		next = s.cfg.Backoff
		var rl *linear.RateLimitError
		if errors.As(err, &rl) && !rl.Reset.IsZero() {
			next = max(time.Until(rl.Reset), time.Second)
		}
		msg = "failed: " + err.Error()
		s.log.WarnContext(ctx, "linear: sync failed", "connection", rec.Id, "next", next, "err", err)
	}
	if rerr := s.st.LinearSynced(context.WithoutCancel(ctx), rec.Id, x.deliveries, x.syncedTo, err == nil && x.full, msg, next, err == nil); rerr != nil {
		return nil, rerr
	}
	if err != nil {
		return nil, err
	}
	return x.out, nil
}

// errOwnerDisabled stops the syncs of a disabled owner's connections.
var errOwnerDisabled = status.Error(codes.FailedPrecondition, "the connection's owner is disabled")

// syncRun is one sync of a connection.
type syncRun struct {
	s      *Syncer
	rec    *store.LinearRecord
	ctx    context.Context // as the owner
	client *linear.Client
	out    *agentv1.SyncLinearResponse
	// full: every issue of the chosen states was asked for.
	full bool
	// syncedTo is the newest updatedAt read; deliveries the webhook deliveries read.
	syncedTo   time.Time
	deliveries []string
	// teams are the connection's teams with their states, read when a status is pushed.
	teams []linear.Team
}

func (x *syncRun) problem(format string, args ...any) {
	x.out.Problems = append(x.out.Problems, validate.Truncate(fmt.Sprintf(format, args...), 300))
}

// run pulls, then pushes.
func (x *syncRun) run(full bool) error {
	issues, err := x.read(full)
	if err != nil {
		return err
	}
	for _, is := range issues {
		if _, err := x.pull(is); err != nil {
			return err
		}
	}
	if err := x.link(issues); err != nil {
		return err
	}
	return x.push()
}

// read is the issues to pull: every issue of the chosen states (full), or those changed
// since the last sync, and the ones webhook deliveries named.
func (x *syncRun) read(full bool) ([]linear.Issue, error) {
	x.full = full
	f := linear.IssueFilter{TeamIDs: x.rec.TeamIds, ProjectIDs: x.rec.ProjectIds}
	if full {
		f.StateTypes = x.rec.StateTypes
	} else {
		// Every state: an issue synced before is followed wherever it moves.
		f.UpdatedAfter = x.rec.SyncedTo
	}
	issues, err := x.client.AllIssues(x.ctx, f, 50)
	if err != nil {
		return nil, err
	}
	ids, deliveries, err := x.s.st.PendingLinearDeliveries(x.ctx, x.rec.Id)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if slices.ContainsFunc(issues, func(i linear.Issue) bool { return i.ID == id }) {
			continue
		}
		is, err := x.client.Issue(x.ctx, id)
		if err != nil {
			if linear.IsRetryable(err) || errors.Is(err, linear.ErrUnauthorized) {
				return nil, err
			}
			x.problem("issue %s named by a webhook: %v", id, err)
			continue
		}
		issues = append(issues, *is)
	}
	x.deliveries = deliveries
	for _, is := range issues {
		if is.UpdatedAt.After(x.syncedTo) {
			x.syncedTo = is.UpdatedAt
		}
	}
	return issues, nil
}

// pull makes or updates the task of one issue and returns what is stored of it (nil: an
// issue not synced, in a state not chosen or a team or project not chosen).
func (x *syncRun) pull(is linear.Issue) (*store.LinearIssueRecord, error) {
	if !slices.Contains(x.rec.TeamIds, is.Team.ID) || (len(x.rec.ProjectIds) > 0 && (is.Project == nil || !slices.Contains(x.rec.ProjectIds, is.Project.ID))) {
		return nil, nil
	}
	prev, err := x.s.st.LinearIssue(x.ctx, x.rec.Id, is.ID)
	if err != nil {
		return nil, err
	}
	title, desc := taskTitle(is), validate.Truncate(is.Description, maxDescription)
	if prev == nil {
		if !slices.Contains(x.rec.StateTypes, is.State.Type) {
			return nil, nil
		}
		return x.create(is, title, desc)
	}
	t, err := x.s.tasks.GetTask(x.ctx, &tasksv1.GetTaskRequest{Id: prev.TaskID})
	if status.Code(err) == codes.NotFound {
		x.problem("%s: its task %s was deleted; it is no longer synced", is.Identifier, prev.TaskID)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	task := t.GetTask()
	r := *prev
	r.Identifier, r.URL, r.TeamID, r.StateName, r.StateType, r.LinearUpdatedAt = is.Identifier, is.URL, is.Team.ID, is.State.Name, is.State.Type, is.UpdatedAt
	linearEdited := title != prev.Title || desc != prev.Description
	taskEdited := task.GetTitle() != prev.Title || task.GetDescription() != prev.Description
	changed := false
	switch {
	case !linearEdited:
	case taskEdited && (task.GetTitle() != title || task.GetDescription() != desc):
		x.out.Conflicts++
		now := time.Now()
		r.ConflictTime = &now
		if task.GetUpdateTime().AsTime().After(is.UpdatedAt) {
			r.Conflict = fmt.Sprintf("title or description edited in Linear and in TheFold; kept TheFold's, edited %s, after Linear's (%s)",
				task.GetUpdateTime().AsTime().UTC().Format(time.RFC3339), is.UpdatedAt.UTC().Format(time.RFC3339))
			break
		}
		r.Conflict = fmt.Sprintf("title or description edited in Linear and in TheFold; kept Linear's, edited %s, after TheFold's (%s)",
			is.UpdatedAt.UTC().Format(time.RFC3339), task.GetUpdateTime().AsTime().UTC().Format(time.RFC3339))
		fallthrough
	default:
		if _, err := x.s.tasks.UpdateTask(x.ctx, &tasksv1.UpdateTaskRequest{Id: prev.TaskID, Task: &tasksv1.Task{Title: title, Description: desc,
			Priority: priority(is.Priority), ExternalUrl: is.URL}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"title", "description", "priority", "external_url"}}}); err != nil {
			return nil, x.taskError(is, "update", err)
		}
		changed = true
	}
	// Linear's last values, whichever side was kept: the next sync compares with them.
	r.Title, r.Description = title, desc
	if done, err := x.followState(is, task, &r); err != nil {
		return nil, err
	} else if done {
		changed = true
	}
	if changed {
		x.out.Updated++
	} else {
		x.out.Unchanged++
	}
	r.TaskUpdatedAt = task.GetUpdateTime().AsTime()
	return &r, x.s.st.PutLinearIssue(x.ctx, &r)
}

// create makes the task of a new issue.
func (x *syncRun) create(is linear.Issue, title, desc string) (*store.LinearIssueRecord, error) {
	t, err := x.s.tasks.CreateTask(x.ctx, &tasksv1.CreateTaskRequest{RequestId: "linear:" + x.rec.Id + ":" + is.ID, Title: title, Repo: x.rec.Repo,
		Description: desc, Source: tasksv1.TaskSource_TASK_SOURCE_LINEAR, Priority: priority(is.Priority), Labels: []string{"linear"},
		ExternalId: "linear:" + is.ID, ExternalUrl: is.URL})
	if err != nil {
		return nil, x.taskError(is, "create", err)
	}
	x.out.Created++
	r := &store.LinearIssueRecord{ConnectionID: x.rec.Id, IssueID: is.ID, Identifier: is.Identifier, URL: is.URL, TeamID: is.Team.ID,
		StateName: is.State.Name, StateType: is.State.Type, TaskID: t.GetTask().GetId(), Title: title, Description: desc,
		LinearUpdatedAt: is.UpdatedAt, TaskUpdatedAt: t.GetTask().GetUpdateTime().AsTime()}
	return r, x.s.st.PutLinearIssue(x.ctx, r)
}

// taskError is nil for a refusal of one issue's task (recorded as a problem; the sync goes
// on) and err itself for a tasks service that is unavailable.
func (x *syncRun) taskError(is linear.Issue, what string, err error) error {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return err
	}
	x.problem("%s: the task could not be %sd: %s", is.Identifier, what, status.Convert(err).Message())
	return nil
}

// followState completes or cancels the task of an issue completed or canceled in Linear,
// and reports whether it did. As with a closed GitHub issue, a task that was never worked
// on (backlog, planned, blocked) cannot be done: it is cancelled, with the reason. The
// status set this way is not written back.
func (x *syncRun) followState(is linear.Issue, task *tasksv1.Task, r *store.LinearIssueRecord) (bool, error) {
	cur := task.GetStatus()
	if cur == tasksv1.TaskStatus_TASK_STATUS_DONE || cur == tasksv1.TaskStatus_TASK_STATUS_CANCELLED {
		return false, nil
	}
	var want tasksv1.TaskStatus
	switch {
	case is.State.Type == linear.StateCompleted && (cur == tasksv1.TaskStatus_TASK_STATUS_IN_PROGRESS || cur == tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW):
		want = tasksv1.TaskStatus_TASK_STATUS_DONE
	case is.State.Type == linear.StateCompleted || is.State.Type == linear.StateCanceled:
		want = tasksv1.TaskStatus_TASK_STATUS_CANCELLED
	default:
		return false, nil
	}
	_, err := x.s.tasks.SetTaskStatus(x.ctx, &tasksv1.SetTaskStatusRequest{Id: task.GetId(), Status: want, ExpectedStatus: cur,
		Reason: fmt.Sprintf("%s in Linear (%s)", is.State.Type, is.State.Name)})
	if err != nil {
		return false, x.taskError(is, "update", err)
	}
	r.PushedStatus = statusName(want)
	return true, nil
}

// link adds the blocked-by edges of Linear's "blocks" relations between synced issues.
func (x *syncRun) link(issues []linear.Issue) error {
	for _, is := range issues {
		blockers := is.BlockedBy()
		if len(blockers) == 0 {
			continue
		}
		r, err := x.s.st.LinearIssue(x.ctx, x.rec.Id, is.ID)
		if err != nil || r == nil {
			return err
		}
		for _, b := range blockers {
			br, err := x.s.st.LinearIssue(x.ctx, x.rec.Id, b.ID)
			if err != nil {
				return err
			}
			if br == nil {
				continue // a blocker not synced (another team, a state not chosen)
			}
			if _, err := x.s.tasks.AddDependency(x.ctx, &tasksv1.AddDependencyRequest{TaskId: r.TaskID, BlockedById: br.TaskID}); err != nil {
				if err := x.taskError(is, "link", err); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// maxDescription bounds a task's description taken from an issue.
const maxDescription = 20000

// taskTitle is "ENG-12: title", within the tasks service's bound.
func taskTitle(is linear.Issue) string {
	return validate.Truncate(is.Identifier+": "+strings.TrimSpace(is.Title), 500)
}

// priority maps Linear's priority (0 none, 1 urgent … 4 low) to a task's.
func priority(p int) typev1.Priority {
	switch p {
	case 1:
		return typev1.Priority_PRIORITY_URGENT
	case 2:
		return typev1.Priority_PRIORITY_HIGH
	case 4:
		return typev1.Priority_PRIORITY_LOW
	}
	return typev1.Priority_PRIORITY_MEDIUM
}

// statusName is a task status as stored ("in_review").
func statusName(s tasksv1.TaskStatus) string { return protoenum.Name(s, "TASK_STATUS_") }
