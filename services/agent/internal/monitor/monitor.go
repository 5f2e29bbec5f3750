// Package monitor is the repository monitor of RepoHealthService: it queues the periodic
// health checks of connected repositories whose owners turned them on, runs the queued
// checks in sandboxes as the owners, keeps their reports and files one healing task per new
// finding.
package monitor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/auth"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/wait"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// Config tunes a Monitor.
type Config struct {
	// Every is how often due connections and queued checks are looked for.
	Every time.Duration
	// Lease is how long a claimed check is left to one replica before another may take it
	// over: longer than a check takes.
	Lease time.Duration
	// CommandTimeout bounds each command of a check (validation's build and tests, the
	// dependency listing, the marker search).
	CommandTimeout time.Duration
	// StaleAge is how long a marker must have been there to count as stale.
	StaleAge time.Duration
	// MaxAttempts bounds the runs of a check that the sandbox could not serve.
	MaxAttempts int32
	// MaxNewTasks bounds the healing tasks one check files; the findings beyond it are kept
	// and get their task from a later check.
	MaxNewTasks int
}

// DefaultConfig is what the agent runs with.
var DefaultConfig = Config{Every: 5 * time.Second, Lease: 30 * time.Minute, CommandTimeout: 10 * time.Minute, StaleAge: 30 * 24 * time.Hour,
	MaxAttempts: 3, MaxNewTasks: 10}

// Starter starts a task's job as its owner: the agent's own StartTask.
type Starter interface {
	StartTask(ctx context.Context, req *agentv1.StartTaskRequest) (*agentv1.StartTaskResponse, error)
}

// Clients are the services a check uses.
type Clients struct {
	Sandbox sandboxv1.SandboxServiceClient
	Tasks   tasksv1.TaskServiceClient
	// Agent starts healing tasks where the connection asks for it; nil: never started.
	Agent Starter
}

// Monitor runs the health checks.
type Monitor struct {
	st       *store.Store
	c        Clients
	signer   *auth.ServiceSigner
	disabled func(user string) bool
	cfg      Config
	log      *slog.Logger
}

// New returns a monitor; disabled says whether a user's account is disabled (nil: never).
func New(st *store.Store, c Clients, signer *auth.ServiceSigner, disabled func(user string) bool, cfg Config,
	log *slog.Logger) *Monitor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Monitor{st: st, c: c, signer: signer, disabled: disabled, cfg: cfg, log: log}
}

// Run queues and runs checks until ctx ends.
func (m *Monitor) Run(ctx context.Context) error {
	wait.Every(ctx, m.cfg.Every, func(ctx context.Context) {
		if _, err := m.Once(ctx); err != nil && ctx.Err() == nil {
			m.log.WarnContext(ctx, "repo health: monitor", "err", err)
		}
	})
	return ctx.Err()
}

// Once queues the periodic checks that are due, runs the checks queued (one at a time) and
// reports how many it ran.
func (m *Monitor) Once(ctx context.Context) (int, error) {
	if _, err := m.st.QueueDueHealthChecks(ctx, 20); err != nil {
		return 0, err
	}
	due, err := m.st.ClaimHealthChecks(ctx, 2, m.cfg.Lease)
	if err != nil {
		return 0, err
	}
	for _, d := range due {
		if err := m.run(ctx, d); err != nil {
			return 0, err
		}
	}
	return len(due), nil
}

// run runs one claimed check and stores its outcome; a check the sandbox could not serve
// for now goes back to the queue while it has attempts left.
func (m *Monitor) run(ctx context.Context, d *store.DueHealthCheck) error {
	r, c := d.RepoHealthReport, d.Connection
	log := m.log.With("connection", c.Id, "repo", c.Repo, "report", r.Id)
	if d.Attempts > m.cfg.MaxAttempts {
		// Claimed again after its lease ran out each time: the replicas running it stopped.
		r.State, r.Error = agentv1.RepoHealthState_REPO_HEALTH_STATE_FAILED, fmt.Sprintf("not finished in %d attempts", d.Attempts-1)
		return m.st.FinishHealthCheck(ctx, r, nil)
	}
	if m.disabled != nil && m.disabled(c.OwnerId) {
		r.State, r.Error = agentv1.RepoHealthState_REPO_HEALTH_STATE_FAILED, "the owner's account is disabled"
		return m.st.FinishHealthCheck(ctx, r, nil)
	}
	actx := auth.OnBehalfOf(ctx, m.signer, c.OwnerId)
	done, err := m.check(actx, d)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if retryable(err) && d.Attempts < m.cfg.MaxAttempts {
			log.WarnContext(ctx, "repo health: check deferred", "attempt", d.Attempts, "err", err)
			return m.st.RequeueHealthCheck(ctx, r.Id)
		}
		log.WarnContext(ctx, "repo health: check failed", "err", err)
		r.State, r.Error = agentv1.RepoHealthState_REPO_HEALTH_STATE_FAILED, status.Convert(err).Message()
		return m.st.FinishHealthCheck(ctx, r, nil)
	}
	if err := m.file(actx, c, r, done.audited); err != nil {
		if status.Code(err) == codes.NotFound {
			log.InfoContext(ctx, "repo health: the connection was deleted while its check ran")
			return nil
		}
		return err
	}
	r.State = agentv1.RepoHealthState_REPO_HEALTH_STATE_DONE
	log.InfoContext(ctx, "repo health: checked", "commit", r.Commit, "findings", len(r.Findings), "todos", r.TodoCount, "outdated", len(r.Outdated))
	return m.st.FinishHealthCheck(ctx, r, done.marks)
}

// checked is what a check found besides its report: the fingerprints of its markers and
// the ecosystems whose dependency audit ran.
type checked struct {
	marks, audited []string
}

// check runs the parts of a check in a sandbox of the default branch and fills r with what
// they found.
func (m *Monitor) check(ctx context.Context, d *store.DueHealthCheck) (*checked, error) {
	r, c := d.RepoHealthReport, d.Connection
	sb, err := m.c.Sandbox.CreateSandbox(ctx, &sandboxv1.CreateSandboxRequest{RequestId: fmt.Sprintf("health:%s:%d", r.Id, d.Attempts), Repo: c.Repo,
		Ttl: durationpb.New(m.cfg.Lease)})
	if err != nil {
		return nil, err
	}
	id := sb.GetSandbox().GetId()
	defer func() {
		if _, err := m.c.Sandbox.DestroySandbox(context.WithoutCancel(ctx), &sandboxv1.DestroySandboxRequest{Id: id}); err != nil && status.Code(err) != codes.NotFound {
			m.log.WarnContext(ctx, "repo health: destroy the sandbox", "sandbox", id, "err", err)
		}
	}()
	r.Commit = sb.GetSandbox().GetBaseCommit()
	x := &checkRun{m: m, sandbox: id, report: r}
	deps, err := x.dependencies(ctx)
	if err != nil {
		return nil, err
	}
	vulns, err := x.vulnerabilities(ctx)
	if err != nil {
		return nil, err
	}
	build, test, err := x.validate(ctx)
	if err != nil {
		return nil, err
	}
	todos, marks, err := x.todos(ctx, c)
	if err != nil {
		return nil, err
	}
	r.Checks = []*agentv1.RepoHealthCheck{build, test, deps, vulns, todos}
	return &checked{marks: marks, audited: x.audited}, nil
}

// file records the report's findings and files a task for each new one (and for an open one
// whose task could not be filed before).
func (m *Monitor) file(ctx context.Context, c *store.ConnectionRecord, r *agentv1.RepoHealthReport, audited []string) error {
	found, ran := findings(c.Repo, r, c.GetHealth().GetTodoThreshold(), audited)
	stored, err := m.st.SeeFindings(ctx, c.Id, found, ran)
	if err != nil {
		return err
	}
	filed := 0
	for _, f := range stored {
		if f.TaskId == "" && filed < m.cfg.MaxNewTasks {
			filed++
			f.TaskId, f.TaskError = m.fileTask(ctx, c, r, f)
			if err := m.st.SetFindingTask(ctx, c.Id, f.Key, f.TaskId, f.TaskError); err != nil {
				return err
			}
		}
		r.Findings = append(r.Findings, f.RepoHealthFinding)
	}
	return nil
}

// fileTask files f's healing task as the owner (and starts it where the connection asks
// to), returning its id or why there is none.
func (m *Monitor) fileTask(ctx context.Context, c *store.ConnectionRecord, r *agentv1.RepoHealthReport, f *store.Finding) (id, problem string) {
	key := findingKey(c.Id, f.Key, f.Occurrence)
	t, err := m.c.Tasks.CreateTask(ctx, &tasksv1.CreateTaskRequest{
		RequestId: key, Title: f.Title, Repo: c.Repo, Description: taskDescription(r, f.RepoHealthFinding), Source: tasksv1.TaskSource_TASK_SOURCE_HEALING,
		Priority: priority(f.Kind), Labels: []string{"healing"}, ExternalId: key,
	})
	if err != nil {
		m.log.WarnContext(ctx, "repo health: file a healing task", "repo", c.Repo, "finding", f.Key, "err", err)
		return "", "not filed: " + status.Convert(err).Message()
	}
	id = t.GetTask().GetId()
	if !c.GetHealth().GetAutoStart() || m.c.Agent == nil {
		return id, ""
	}
	uctx := auth.WithPrincipal(ctx, auth.Principal{UserID: c.OwnerId, Service: "agent"})
	if _, err := m.c.Agent.StartTask(uctx, &agentv1.StartTaskRequest{RequestId: key + ":start", TaskId: id}); err != nil {
		m.log.WarnContext(ctx, "repo health: start a healing task", "task", id, "err", err)
		return id, "filed, not started: " + status.Convert(err).Message()
	}
	return id, ""
}

// findingKey names a finding's occurrence for the tasks service, as request_id and
// external_id (both at most 128 characters here): "healing:<connection>:<hash of key>:<n>".
func findingKey(connection, key string, occurrence int32) string {
	h := sha256.Sum256([]byte(key))
	return fmt.Sprintf("healing:%s:%s:%d", connection, hex.EncodeToString(h[:8]), occurrence)
}

// retryable reports whether err may pass on a later attempt: the sandbox or another
// service was unavailable, or busy.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}
