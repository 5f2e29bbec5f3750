package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/jobrun"
	"github.com/thefold/thefold/pkg/protoenum"
	"github.com/thefold/thefold/pkg/validate"
)

// ProjectStream is the events stream every project event is written to. A project event's
// scope is the project's id, as is the scope of its task jobs' events (EventStream), so a
// watch of the scope sees both.
const ProjectStream = "project"

// ProjectStatusName is the stored name of a project status, e.g. "pending_review".
func ProjectStatusName(s agentv1.ProjectStatus) string { return protoenum.Name(s, "PROJECT_STATUS_") }

func parseProjectStatus(s string) agentv1.ProjectStatus {
	return protoenum.Parse[agentv1.ProjectStatus](s, "PROJECT_STATUS_", agentv1.ProjectStatus_value)
}

// ProjectTerminal reports whether s ends a project.
func ProjectTerminal(s agentv1.ProjectStatus) bool {
	switch s {
	case agentv1.ProjectStatus_PROJECT_STATUS_COMPLETED, agentv1.ProjectStatus_PROJECT_STATUS_FAILED,
		agentv1.ProjectStatus_PROJECT_STATUS_REJECTED, agentv1.ProjectStatus_PROJECT_STATUS_CANCELLED:
		return true
	}
	return false
}

// ProjectState is the project runner's own checkpoint beside the project.
type ProjectState struct {
	// Done are the side effects already made, by key (a resumed run repeats none).
	Done map[string]bool `json:"done,omitempty"`
	// StartRequest is StartProject's idempotency key and request hash; RetryRequests those
	// of RetryProjectTask, by key.
	StartRequest  *ControlRequest            `json:"start_request,omitempty"`
	RetryRequests map[string]*ControlRequest `json:"retry_requests,omitempty"`
	// Generation counts the project's review rounds (RequestChanges starts a new one); it is
	// part of the idempotency keys of what a round does.
	Generation int `json:"generation,omitempty"`
	// Active is the wall time the project has run.
	Active time.Duration `json:"active,omitempty"`
	// Feedback is the last RequestChanges' feedback, given to the tasks it runs again.
	Feedback string `json:"feedback,omitempty"`
	// CommitSHA is the last commit on the project branch.
	CommitSHA string `json:"commit_sha,omitempty"`
	// Stage is where a RUNNING project is: "" running its tasks, "review" asking for its
	// review, "complete" carrying an approved review to its pull request.
	Stage string `json:"stage,omitempty"`
	// Model is StartProject's model for every task ("" selects by complexity).
	Model string `json:"model,omitempty"`
	// PreviousReview is the review the next one replaces (RequestChanges).
	PreviousReview string `json:"previous_review,omitempty"`
	// ReviewMemories are what the project's review found worth remembering.
	ReviewMemories []string `json:"review_memories,omitempty"`
	// Checks are a crew project's last checks of each task's pull request, by project task.
	Checks map[string]*CrewCheck `json:"checks,omitempty"`
	// MergeQueue is a crew's tasks with an open pull request, in the order they opened it:
	// the first is brought up to date, checked and merged; the others wait their turn.
	MergeQueue []string `json:"merge_queue,omitempty"`
	// Group is the merge group being checked: the front of the merge queue and those after
	// it, checked together in one commit.
	Group *MergeGroup `json:"group,omitempty"`
	// AloneFirst is the task to check alone before any group forms again: the front of a
	// group whose checks failed (which of its members broke them is not known).
	AloneFirst string `json:"alone_first,omitempty"`
	// Fixes are the tasks sent back by their checks, waiting for a free worker, by project
	// task.
	Fixes map[string]*CrewFix `json:"fixes,omitempty"`
}

// CrewFix is a task sent back by its checks: to fix its pull request with what the checks
// said, or (Redo) to do again from the base after its pull request conflicted.
type CrewFix struct {
	Checks string `json:"checks,omitempty"`
	Redo   bool   `json:"redo,omitempty"`
}

// MergeGroup is a crew's merge group: the forge's commit of the base with the members'
// pull requests merged in, in queue order.
type MergeGroup struct {
	Sha     string        `json:"sha"`
	Members []GroupMember `json:"members"`
}

// GroupMember is a task in a merge group, at the head its pull request had.
type GroupMember struct {
	Task   string `json:"task"`
	Number int32  `json:"number"`
	Head   string `json:"head"`
}

// States of a crew task's checks.
const (
	CheckPending = "pending"
	CheckPassed  = "passed"
	CheckFailed  = "failed"
)

// CrewCheck is what the checks of a crew task's pull request said of one head commit.
type CrewCheck struct {
	Head    string `json:"head"`
	State   string `json:"state,omitempty"`
	Summary string `json:"summary,omitempty"`
	// Reported is set once the result was acted on (an event, a fix, the merge).
	Reported bool `json:"reported,omitempty"`
	// Polls counts the looks at pending checks; Next is when to look again.
	Polls int       `json:"polls,omitempty"`
	Next  time.Time `json:"next,omitzero"`
}

// Backoff schedules the next look at pending checks: 2 s doubling to a minute.
func (c *CrewCheck) Backoff() {
	c.Polls++
	d := 2 * time.Second << min(c.Polls-1, 5)
	c.Next = time.Now().Add(min(d, time.Minute))
}

// ProjectRecord is a project with its runner checkpoint.
type ProjectRecord struct {
	Project *agentv1.Project
	State   ProjectState
	// Version is the row's version (the project's etag).
	Version int64
}

// ProjectLeases are the project runners' leases (jobrun.Leases over the projects table):
// a RUNNING project should have a runner.
func (s *Store) ProjectLeases() *jobrun.Leases {
	return &jobrun.Leases{DB: s.pool, Table: "projects", Active: []string{"running"}}
}

const projectColumns = "project, state, version, status, lease_id IS NOT NULL"

func scanProject(row pgx.Row, extra ...any) (*ProjectRecord, error) {
	var (
		doc, state []byte
		rec        ProjectRecord
		status     string
		leased     bool
	)
	if err := row.Scan(append([]any{&doc, &state, &rec.Version, &status, &leased}, extra...)...); err != nil {
		return nil, err
	}
	rec.Project = &agentv1.Project{}
	if err := jsonIn.Unmarshal(doc, rec.Project); err != nil {
		return nil, fmt.Errorf("store: decode project: %w", err)
	}
	if len(state) > 0 {
		if err := json.Unmarshal(state, &rec.State); err != nil {
			return nil, fmt.Errorf("store: decode project state: %w", err)
		}
	}
	rec.Project.Status = parseProjectStatus(status)
	rec.Project.Etag = strconv.FormatInt(rec.Version, 10)
	return &rec, nil
}

// marshalProject is p in protojson without its etag (the row's version is).
func marshalProject(p *agentv1.Project) ([]byte, error) {
	c := proto.Clone(p).(*agentv1.Project)
	c.Etag = ""
	return jsonOut.Marshal(c)
}

// projectEvents appends evs of project p to batch (scope: the project).
func queueProjectEvents(batch *pgx.Batch, p *agentv1.Project, evs []*agentv1.WatchProjectResponse) error {
	out := make([]events.Event, 0, len(evs))
	for _, e := range evs {
		e.ProjectId = p.Id
		payload, err := jsonOut.Marshal(e)
		if err != nil {
			return fmt.Errorf("store: marshal project event: %w", err)
		}
		out = append(out, events.Event{Stream: ProjectStream, AggregateID: p.Id, OwnerID: p.OwnerId, Scope: p.Id,
			Type: protoenum.Name(e.Type, "PROJECT_EVENT_TYPE_"), Payload: payload})
	}
	return events.QueueAppend(batch, nil, out...)
}

// ProjectSummaryOf is the small view of p a CREATED event carries.
func ProjectSummaryOf(p *agentv1.Project) *agentv1.ProjectSummary {
	n := 0
	for _, ph := range p.Phases {
		n += len(ph.Tasks)
	}
	return &agentv1.ProjectSummary{Id: p.Id, Repo: p.Repo, Description: p.Description, Status: p.Status,
		PhaseCount: int32(len(p.Phases)), TaskCount: int32(n), CreateTime: p.CreateTime}
}

// CreateProject inserts project p (owner, repo, request, plan set) with its CREATED event.
// A retry of the same request (requestID and requestHash) returns the first project and
// created false; the same requestID with another request is InvalidArgument.
func (s *Store) CreateProject(ctx context.Context, p *agentv1.Project, requestID string, requestHash []byte) (*agentv1.Project, bool, error) {
	var out *agentv1.Project
	created := false
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if requestID != "" {
			var hash []byte
			rec, err := scanProject(tx.QueryRow(ctx, `SELECT `+projectColumns+`, request_hash FROM projects WHERE owner_id = $1 AND request_id = $2`,
				p.OwnerId, requestID), &hash)
			switch {
			case err == nil:
				if string(hash) != string(requestHash) {
					return errs.Invalid("request_id", "was used for a different PlanProject request")
				}
				out = rec.Project
				return nil
			case !errors.Is(err, pgx.ErrNoRows):
				return err
			}
		}
		now := time.Now()
		p = proto.Clone(p).(*agentv1.Project)
		p.CreateTime, p.UpdateTime = timestamppb.New(now), timestamppb.New(now)
		if p.Usage == nil {
			p.Usage = &typev1.Usage{}
		}
		if err := tx.QueryRow(ctx, `SELECT gen_random_uuid()::text`).Scan(&p.Id); err != nil {
			return err
		}
		doc, err := marshalProject(p)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO projects (id, owner_id, request_id, request_hash, repo, status, project, create_time, update_time)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`, p.Id, p.OwnerId, requestID, requestHash, p.Repo, ProjectStatusName(p.Status), doc, now); err != nil {
			if db.IsUniqueViolation(err) {
				return fmt.Errorf("a PlanProject with request_id %q is in progress; retry: %w", requestID, errs.ErrConflict)
			}
			return err
		}
		b := &pgx.Batch{}
		if err := queueProjectEvents(b, p, []*agentv1.WatchProjectResponse{{Type: agentv1.ProjectEventType_PROJECT_EVENT_TYPE_CREATED,
			Payload: &agentv1.WatchProjectResponse_Created{Created: ProjectSummaryOf(p)}}}); err != nil {
			return err
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		p.Etag = "1"
		out, created = p, true
		return nil
	})
	return out, created, err
}

// ProjectByRequest returns owner's project planned with requestID and the hash of that
// request, or nil.
func (s *Store) ProjectByRequest(ctx context.Context, owner, requestID string) (*agentv1.Project, []byte, error) {
	var hash []byte
	rec, err := scanProject(s.pool.QueryRow(ctx, `SELECT `+projectColumns+`, request_hash FROM projects WHERE owner_id = $1 AND request_id = $2`,
		owner, requestID), &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return rec.Project, hash, nil
}

// GetProject returns owner's project id; errs.ErrNotFound when there is none of owner's.
func (s *Store) GetProject(ctx context.Context, owner, id string) (*ProjectRecord, error) {
	rec, err := scanProject(s.pool.QueryRow(ctx, `SELECT `+projectColumns+` FROM projects WHERE id = $1 AND owner_id = $2`, id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.NotFound("project", id)
	}
	return rec, err
}

// LoadProject returns project id whoever owns it, for its runner.
func (s *Store) LoadProject(ctx context.Context, id string) (*ProjectRecord, error) {
	rec, err := scanProject(s.pool.QueryRow(ctx, `SELECT `+projectColumns+` FROM projects WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.NotFound("project", id)
	}
	return rec, err
}

// ProjectFilter narrows ListProjects; empty fields match anything.
type ProjectFilter struct {
	Repo     string
	Statuses []agentv1.ProjectStatus
}

const projectTokenVersion = "p1"

// ListProjects returns a page of owner's projects, newest first, without their files.
func (s *Store) ListProjects(ctx context.Context, owner string, f ProjectFilter, pageSize int, pageToken string) ([]*agentv1.Project, string, error) {
	var c db.Conds
	c.Add("owner_id = $%d", owner)
	if f.Repo != "" {
		c.Add("repo = $%d", f.Repo)
	}
	if len(f.Statuses) > 0 {
		names := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			names[i] = ProjectStatusName(st)
		}
		c.Add("status = ANY($%d)", names)
	}
	if err := pageAfter(pageToken, projectTokenVersion, "ListProjects", &c); err != nil {
		return nil, "", err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+projectColumns+`, create_time, id::text FROM projects`+c.Where()+
		` ORDER BY create_time DESC, id DESC LIMIT `+c.Arg(pageSize+1), c.Args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var (
		out   []*agentv1.Project
		times []time.Time
	)
	for rows.Next() {
		var (
			at time.Time
			id string
		)
		rec, err := scanProject(rows, &at, &id)
		if err != nil {
			return nil, "", err
		}
		rec.Project.Files = nil
		out, times = append(out, rec.Project), append(times, at)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > pageSize {
		out = out[:pageSize]
		next = validate.EncodeTimeIDToken(projectTokenVersion, times[pageSize-1], out[pageSize-1].Id)
	}
	return out, next, nil
}

// ProjectChange changes a locked project record and returns the events of the change;
// its error aborts the change (ErrUnchanged: nothing to write, as for a retry of a change
// already made). It may set rec.Project.Status.
type ProjectChange func(rec *ProjectRecord) ([]*agentv1.WatchProjectResponse, error)

// ErrUnchanged is what a ProjectChange returns when it has nothing to change: the project
// is returned as it is, nothing written.
var ErrUnchanged = errors.New("store: unchanged")

// ChangeProject applies change to owner's project id under its row lock ("" owner: the
// runner, whoever owns it), bumps its version and writes it with the change's events, and
// calls after (may be nil) in the same transaction — e.g. to enqueue the project's run. A
// project that ends (a terminal status, or one outside RUNNING) gives up its lease, so its
// runner stops at its next renewal.
func (s *Store) ChangeProject(ctx context.Context, owner, id string, change ProjectChange,
	after func(ctx context.Context, tx pgx.Tx, rec *ProjectRecord) error) (*ProjectRecord, error) {
	var out *ProjectRecord
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		q := `SELECT ` + projectColumns + ` FROM projects WHERE id = $1 FOR UPDATE`
		args := []any{id}
		if owner != "" {
			q = `SELECT ` + projectColumns + ` FROM projects WHERE id = $1 AND owner_id = $2 FOR UPDATE`
			args = append(args, owner)
		}
		rec, err := scanProject(tx.QueryRow(ctx, q, args...))
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.NotFound("project", id)
		}
		if err != nil {
			return err
		}
		evs, err := change(rec)
		if errors.Is(err, ErrUnchanged) {
			out = rec
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.writeProject(ctx, tx, rec, ""); err != nil {
			return err
		}
		if after != nil {
			if err := after(ctx, tx, rec); err != nil {
				return err
			}
		}
		// The events last: appending takes the schema's events lock (events.Append), and a
		// transaction that held it while waiting for a row lock would deadlock with one
		// that holds that row and appends (see SaveProject).
		if err := appendProjectEvents(ctx, tx, rec.Project, evs); err != nil {
			return err
		}
		out = rec
		return nil
	})
	return out, err
}

// SaveProject writes the runner's record rec in tx, fenced by its lease, then the writes
// after it goes with (its files, a review), then evs: the runner's checkpoint, in its own
// transaction or in one with a task's job created.
//
// The project's row is locked before the events are appended and nothing is written after
// them, as in every transaction that changes a project: appending takes the schema's
// events lock until commit (events.Append), so a transaction that appended and then
// waited for the project's row would deadlock with one that holds the row and appends —
// a CancelProject (ChangeProject) beside the runner starting a task's job, which it did
// before 2026-12-01 (TestProjectChangesBesideAJobStartDoNotDeadlock).
func (s *Store) SaveProject(ctx context.Context, tx pgx.Tx, rec *ProjectRecord, lease string, evs []*agentv1.WatchProjectResponse,
	after ...func(context.Context, pgx.Tx) error) error {
	if err := s.writeProject(ctx, tx, rec, lease); err != nil {
		return err
	}
	for _, f := range after {
		if err := f(ctx, tx); err != nil {
			return err
		}
	}
	return appendProjectEvents(ctx, tx, rec.Project, evs)
}

// InTx runs fn in a transaction of the store's database.
func (s *Store) InTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return db.InTx(ctx, s.pool, fn)
}

// writeProject writes rec (version bumped, update time set) in tx; with lease, only while
// the lease holds it (ErrLeaseLost otherwise). A status other than RUNNING clears the
// lease. Its events are the caller's to append, last (appendProjectEvents).
func (s *Store) writeProject(ctx context.Context, tx pgx.Tx, rec *ProjectRecord, lease string) error {
	p := rec.Project
	now := time.Now()
	p.UpdateTime = timestamppb.New(now)
	if ProjectTerminal(p.Status) && p.EndTime == nil {
		p.EndTime = timestamppb.New(now)
	}
	doc, err := marshalProject(p)
	if err != nil {
		return err
	}
	state, err := json.Marshal(rec.State)
	if err != nil {
		return err
	}
	status := ProjectStatusName(p.Status)
	keep := status == "running"
	q := `UPDATE projects SET project = $2, state = $3, status = $4, version = version + 1, update_time = $5,
		lease_id = CASE WHEN $6 THEN lease_id END, lease_time = CASE WHEN $6 THEN lease_time END
		WHERE id = $1`
	args := []any{p.Id, doc, state, status, now, keep}
	if lease != "" {
		q += ` AND lease_id = $7`
		args = append(args, lease)
	}
	q += ` RETURNING version`
	if err := tx.QueryRow(ctx, q, args...).Scan(&rec.Version); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrLeaseLost
		}
		return err
	}
	p.Etag = strconv.FormatInt(rec.Version, 10)
	return nil
}

// batchSender is a transaction or the pool: where appendProjectEvents sends its batch.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// appendProjectEvents appends evs of project p through db: in a transaction, its last
// writes.
func appendProjectEvents(ctx context.Context, db batchSender, p *agentv1.Project, evs []*agentv1.WatchProjectResponse) error {
	if len(evs) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	if err := queueProjectEvents(b, p, evs); err != nil {
		return err
	}
	return db.SendBatch(ctx, b).Close()
}

// ProjectStatusEvent is the STATUS_CHANGED event of p's move from prev.
func ProjectStatusEvent(prev agentv1.ProjectStatus, p *agentv1.Project) *agentv1.WatchProjectResponse {
	return &agentv1.WatchProjectResponse{Type: agentv1.ProjectEventType_PROJECT_EVENT_TYPE_STATUS_CHANGED,
		Payload: &agentv1.WatchProjectResponse_StatusChange{StatusChange: &agentv1.ProjectStatusChange{
			PreviousStatus: prev, Status: p.Status, Reason: p.StatusReason}}}
}

// ProjectFinishing reports whether e ends its project: a move to a terminal status.
func ProjectFinishing(e *agentv1.WatchProjectResponse) bool {
	sc := e.GetStatusChange()
	return sc != nil && ProjectTerminal(sc.Status)
}

// decodeProjectEvent turns an event of a project's scope into the WatchProject message: its
// own events as they are, its task jobs' events relayed (taskOf names the project task of a
// job; "" when unknown).
func decodeProjectEvent(e events.Event, taskOf func(jobID string) (string, int32)) (*agentv1.WatchProjectResponse, error) {
	if e.Stream == EventStream {
		je, err := decodeEvent(e)
		if err != nil {
			return nil, err
		}
		task, worker := taskOf(je.JobId)
		return &agentv1.WatchProjectResponse{Id: e.ID, Time: timestamppb.New(e.CreateTime), ProjectId: e.Scope,
			Type: agentv1.ProjectEventType_PROJECT_EVENT_TYPE_JOB_EVENT, Worker: worker, ProjectTaskId: task,
			Payload: &agentv1.WatchProjectResponse_JobEvent{JobEvent: &agentv1.ProjectJobEvent{ProjectTaskId: task, Event: je}}}, nil
	}
	resp := &agentv1.WatchProjectResponse{}
	if err := jsonIn.Unmarshal(e.Payload, resp); err != nil {
		return nil, fmt.Errorf("store: project event %d: decode: %w", e.ID, err)
	}
	resp.Id, resp.Time = e.ID, timestamppb.New(e.CreateTime)
	return resp, nil
}

// ProjectWatchHandler is the project stream's Watch handler (events.Handler); taskOf names
// the project task a relayed job event's job runs and, in a crew, its worker.
func (s *Store) ProjectWatchHandler(taskOf func(jobID string) (string, int32)) *events.Handler[*agentv1.WatchProjectResponse] {
	return &events.Handler[*agentv1.WatchProjectResponse]{
		Hub: s.hub, Stream: ProjectStream,
		Decode: func(e events.Event) (*agentv1.WatchProjectResponse, error) { return decodeProjectEvent(e, taskOf) },
		Heartbeat: func(hb *typev1.Heartbeat) *agentv1.WatchProjectResponse {
			return &agentv1.WatchProjectResponse{Time: hb.Time, Payload: &agentv1.WatchProjectResponse_Heartbeat{Heartbeat: hb}}
		},
	}
}

// ProjectWatchState reports whether owner's project id is finished, for a watch of it;
// errs.ErrNotFound when there is no such project of owner's.
func (s *Store) ProjectWatchState(ctx context.Context, owner, id string) (finished bool, err error) {
	var status string
	err = s.pool.QueryRow(ctx, "SELECT status FROM projects WHERE id = $1 AND owner_id = $2", id, owner).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("project %s: %w", id, errs.ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("store: project %s: %w", id, err)
	}
	return ProjectTerminal(parseProjectStatus(status)), nil
}

// ProjectFile is one file a project's tasks wrote, as it stands.
type ProjectFile struct {
	Path    string
	Content []byte
	Deleted bool
	// TaskID is the project task whose version stands.
	TaskID string
}

// ProjectFiles returns the files project id's tasks wrote so far, by path: those at paths
// when any are given, else all.
func (s *Store) ProjectFiles(ctx context.Context, id string, paths ...string) ([]ProjectFile, error) {
	q, args := `SELECT path, content, deleted, project_task_id FROM project_files WHERE project_id = $1`, []any{id}
	if len(paths) > 0 {
		q, args = q+` AND path = ANY($2)`, append(args, paths)
	}
	rows, err := s.pool.Query(ctx, q+` ORDER BY path`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: project files: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ProjectFile, error) {
		var f ProjectFile
		err := row.Scan(&f.Path, &f.Content, &f.Deleted, &f.TaskID)
		return f, err
	})
}

// PutProjectFiles records files as project id's standing versions (a path's earlier
// version is replaced), in tx.
func PutProjectFiles(ctx context.Context, tx pgx.Tx, id string, files []ProjectFile) error {
	b := &pgx.Batch{}
	for _, f := range files {
		content := f.Content
		if content == nil {
			content = []byte{}
		}
		b.Queue(`INSERT INTO project_files (project_id, path, content, deleted, project_task_id) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (project_id, path) DO UPDATE SET content = excluded.content, deleted = excluded.deleted, project_task_id = excluded.project_task_id`,
			id, f.Path, content, f.Deleted, f.TaskID)
	}
	return tx.SendBatch(ctx, b).Close()
}

// ClaimProject gives project id's lease to lease when the project is RUNNING and no live
// runner holds it, and returns it; ok is false otherwise.
func (s *Store) ClaimProject(ctx context.Context, id, lease string, expiry time.Duration) (rec *ProjectRecord, ok bool, err error) {
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		r, err := scanProject(tx.QueryRow(ctx, `SELECT `+projectColumns+` FROM projects WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if ok, err = s.ProjectLeases().Claim(ctx, tx, id, lease, expiry); err != nil || !ok {
			return err
		}
		rec = r
		return nil
	})
	return rec, ok, err
}

// statusChanged is the stored type of a job's STATUS_CHANGED event.
var statusChanged = protoenum.Name(agentv1.JobEventType_JOB_EVENT_TYPE_STATUS_CHANGED, "JOB_EVENT_TYPE_")

// errJobEvent ends AwaitJobEnd's watch.
var errJobEvent = errors.New("store: a job event")

// LatestEvent is the id of the newest event, a cursor for AwaitJobEnd.
func (s *Store) LatestEvent(ctx context.Context) (int64, error) { return events.Latest(ctx, s.pool) }

// Hub is the events hub (nil when the store has none).
func (s *Store) Hub() *events.Hub { return s.hub }

// AwaitProjectJobs returns once a job of project id changes status by an event with an id
// above after, or when d has passed (nil then too, unless ctx ended): a crew's wait on its
// workers.
func (s *Store) AwaitProjectJobs(ctx context.Context, id string, after int64, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := s.hub.Watch(wctx, after, events.Filter{Stream: EventStream, Scope: id}, func(e events.Event) error {
		if e.Type == statusChanged {
			return errJobEvent
		}
		return nil
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, errJobEvent) || wctx.Err() != nil {
		return nil
	}
	return err
}

// AwaitJobEnd returns once an event that ends job id (Finishing) with an id above after
// commits, or when d has passed or ctx ended (nil then too, unless ctx ended): the project
// runner's wait on its task's job, woken by the job's end rather than polling.
func (s *Store) AwaitJobEnd(ctx context.Context, id string, after int64, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	// An end this process writes wakes the wait at once.
	local, stop := s.ends.wait(id)
	defer stop()
	go func() {
		select {
		case <-local:
			cancel()
		case <-wctx.Done():
		}
	}()
	if s.hub == nil {
		<-wctx.Done()
		return ctx.Err()
	}
	// (The local wake cancels wctx: Watch returns its error, which is no error here.)
	err := s.hub.Watch(wctx, after, events.Filter{Stream: EventStream, AggregateID: id}, func(e events.Event) error {
		if e.Type != statusChanged {
			return nil
		}
		if je, err := decodeEvent(e); err != nil || Finishing(je) {
			return errJobEvent // an event that cannot be read: look at the job itself
		}
		return nil
	})
	if errors.Is(err, errJobEvent) || (err != nil && ctx.Err() == nil && wctx.Err() != nil) {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
