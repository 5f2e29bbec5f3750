// Package store keeps the builder's state in its PostgreSQL schema: builds and their steps,
// and the build events of the schema's outbox. Every change of a build or step is one row
// update and its events, in one transaction. A running build is held by a lease (a worker's
// id and the time it last renewed it); the engine's writes are fenced by it, so a worker
// that lost its lease (it stalled, another resumed the build) cannot write over its
// successor, and a cancelled or paused build refuses further engine writes.
package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/jobrun"
	"github.com/thefold/thefold/pkg/protoenum"
)

// Store is the builder schema. Its Renew, Release and TakeStale are the builds' leases
// (jobrun.Leases over the builds table): a build PENDING or RUNNING should have a runner.
type Store struct {
	pool *pgxpool.Pool
	hub  *events.Hub
	*jobrun.Leases
	// Instance names this process on the builds it claims (BuildJob.instance).
	Instance string
}

// New returns a store over pool (whose search_path is the builder schema); hub serves
// Watch and may be nil when nothing watches.
func New(pool *pgxpool.Pool, hub *events.Hub) *Store {
	return &Store{pool: pool, hub: hub, Leases: &jobrun.Leases{DB: pool, Table: "builds", Active: []string{"pending", "running"}}}
}

// Pool is the store's pool, for the job queue's transactions.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// ErrLeaseLost is returned by an engine write when the build is no longer held by the
// caller's lease: another worker took it over, or it is no longer running (cancelled,
// paused).
var ErrLeaseLost = jobrun.ErrLeaseLost

// Build is a build with what the engine needs beside the contract's BuildJob.
type Build struct {
	*builderv1.BuildJob
	// AdditionalContext is given to every generation.
	AdditionalContext string
	// MemoryHints are the caller's lessons from memory, given to every generation and fix.
	MemoryHints []string
	// TaskTitle and TaskDescription are the task as the person wrote it (the plan's summary
	// is the planner's reading of it), given to every generation and fix.
	TaskTitle, TaskDescription string
	// ContextPaths are the repository files the caller's context phase found relevant:
	// their outlines are the first of a generation's reference files.
	ContextPaths []string
	// RequestedStrategy is what StartBuild asked for (UNSPECIFIED: init chooses).
	RequestedStrategy builderv1.BuildStrategy
	// Generation counts RetryStep calls; it is part of the AI calls' idempotency keys.
	Generation int32
	// Paused is the time the build spent PAUSED after it started (the spans that ended):
	// not counted against its wall-time budget. Written only by Resume.
	Paused time.Duration
	// NewProject is set by init when the workspace held no files.
	NewProject     bool
	FilesWritten   int32
	FilesValidated int32
	MaxIterations  int32
	// GraphChanged makes the next write store Graph (set when init computes it).
	GraphChanged bool
	// Skills are the prompt fragments injected into every generation and fix, resolved at
	// init.
	Skills []*aiv1.SkillFragment

	// filesJSON keeps each file entry's JSON by the entry's binary encoding: every write of
	// the build stores its whole file list, and a 200-file build wrote it 400 times, each
	// entry through protojson (a sixth of the builder's CPU); the binary encoding is a
	// fraction of that, and an entry changed in place gets a new key.
	filesJSON map[string][]byte
	keyBuf    []byte
}

// marshalFiles is b.Files as marshalList makes it, reusing what earlier writes made of
// entries that have not changed since: per entry a key written into one scratch buffer and
// a map lookup, then one copy of the whole list into a buffer of its exact size.
func (b *Build) marshalFiles() ([]byte, error) {
	if b.filesJSON == nil || len(b.filesJSON) > 4*len(b.Files)+16 {
		b.filesJSON = make(map[string][]byte, len(b.Files))
	}
	parts := make([][]byte, len(b.Files))
	size := 2 + max(len(b.Files)-1, 0)
	for i, f := range b.Files {
		var err error
		if b.keyBuf, err = fileKey(b.keyBuf[:0], f); err != nil {
			return nil, err
		}
		j, ok := b.filesJSON[string(b.keyBuf)]
		if !ok {
			if j, err = jsonOut.Marshal(f); err != nil {
				return nil, err
			}
			b.filesJSON[string(b.keyBuf)] = j
		}
		parts[i] = j
		size += len(j)
	}
	out := make([]byte, 0, size)
	out = append(out, '[')
	for i, j := range parts {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, j...)
	}
	return append(out, ']'), nil
}

// fileKey appends to buf what identifies the content of file entry f for marshalFiles'
// cache. Most entries have no diagnostics: their key is their four scalar fields written
// out (a 0 byte first, which no binary encoding of a non-empty message starts with), far
// cheaper than marshalling; an entry with diagnostics (or fields this code does not know)
// is keyed by its binary encoding.
func fileKey(buf []byte, f *builderv1.BuildFile) ([]byte, error) {
	if len(f.Diagnostics) == 0 && len(f.ProtoReflect().GetUnknown()) == 0 {
		buf = append(buf, 0)
		buf = binary.AppendUvarint(buf, uint64(len(f.Path)))
		buf = append(buf, f.Path...)
		buf = binary.AppendVarint(buf, int64(f.Action))
		buf = binary.AppendVarint(buf, int64(f.Status))
		buf = binary.AppendVarint(buf, int64(f.Attempts))
		return buf, nil
	}
	return proto.MarshalOptions{Deterministic: true}.MarshalAppend(buf, f)
}

// Step is a build step with what the engine needs beside the contract's BuildStep.
type Step struct {
	*builderv1.BuildStep
	// Description is the plan step's spec; Workdir a command's working directory.
	Description, Workdir string
	// Guidance is RetryStep's extra context for the step's next run.
	Guidance string
	// Generated is set once the step's content came back from the model (a resumed step
	// does not ask again).
	Generated bool
}

// Enum names as stored: the enum value's name without its prefix, lower case.
func enumName(v protoreflect.Enum, prefix string) string { return protoenum.Name(v, prefix) }

func parseEnum[E ~int32](s, prefix string, values map[string]int32) E {
	return protoenum.Parse[E](s, prefix, values)
}

// StatusName is the stored name of a build status, e.g. "running".
func StatusName(s builderv1.BuildStatus) string { return enumName(s, "BUILD_STATUS_") }
func parseStatus(s string) builderv1.BuildStatus {
	return parseEnum[builderv1.BuildStatus](s, "BUILD_STATUS_", builderv1.BuildStatus_value)
}
func phaseName(p builderv1.BuildPhase) string { return enumName(p, "BUILD_PHASE_") }
func parsePhase(s string) builderv1.BuildPhase {
	return parseEnum[builderv1.BuildPhase](s, "BUILD_PHASE_", builderv1.BuildPhase_value)
}
func strategyName(p builderv1.BuildStrategy) string { return enumName(p, "BUILD_STRATEGY_") }
func parseStrategy(s string) builderv1.BuildStrategy {
	return parseEnum[builderv1.BuildStrategy](s, "BUILD_STRATEGY_", builderv1.BuildStrategy_value)
}
func kindName(k builderv1.StepKind) string { return enumName(k, "STEP_KIND_") }
func parseKind(s string) builderv1.StepKind {
	return parseEnum[builderv1.StepKind](s, "STEP_KIND_", builderv1.StepKind_value)
}
func stepStatusName(k builderv1.BuildStepStatus) string { return enumName(k, "BUILD_STEP_STATUS_") }
func parseStepStatus(s string) builderv1.BuildStepStatus {
	return parseEnum[builderv1.BuildStepStatus](s, "BUILD_STEP_STATUS_", builderv1.BuildStepStatus_value)
}
func actionName(a typev1.FileAction) string { return enumName(a, "FILE_ACTION_") }
func parseAction(s string) typev1.FileAction {
	return parseEnum[typev1.FileAction](s, "FILE_ACTION_", typev1.FileAction_value)
}

var (
	jsonOut = protojson.MarshalOptions{UseProtoNames: true}
	jsonIn  = protojson.UnmarshalOptions{DiscardUnknown: true}
)

// marshal writes m as protojson; a nil message is SQL NULL.
func marshal(m proto.Message) ([]byte, error) {
	if m == nil || !m.ProtoReflect().IsValid() {
		return nil, nil
	}
	return jsonOut.Marshal(m)
}

func unmarshal[M proto.Message](b []byte, m M) (M, error) {
	if len(b) == 0 {
		var zero M
		return zero, nil
	}
	return m, jsonIn.Unmarshal(b, m)
}

// marshalList writes messages as a JSON array of protojson objects.
func marshalList[M proto.Message](ms []M) ([]byte, error) {
	var b strings.Builder
	b.WriteByte('[')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		j, err := jsonOut.Marshal(m)
		if err != nil {
			return nil, err
		}
		b.Write(j)
	}
	b.WriteByte(']')
	return []byte(b.String()), nil
}

// RequestHash identifies what a StartBuild request asked for, to tell a retry (same hash)
// from a reused request_id (different hash).
func RequestHash(req proto.Message) []byte {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	h := sha256.Sum256(b)
	return h[:]
}

// Create inserts b (its owner, request and plan set) and its CREATED event, and calls
// enqueue in the same transaction (the job that runs it). A retry of the same request
// returns the first build and created false; the same request_id with another request is
// InvalidArgument.
func (s *Store) Create(ctx context.Context, b *Build, requestHash []byte, enqueue func(ctx context.Context, tx pgx.Tx, id string) error) (*Build, bool, error) {
	plan, err := marshal(b.Plan)
	if err != nil {
		return nil, false, err
	}
	budget, err := marshal(b.Budget)
	if err != nil {
		return nil, false, err
	}
	if budget == nil {
		budget = []byte("{}")
	}
	files, err := marshalList(b.Files)
	if err != nil {
		return nil, false, err
	}
	var id string
	var got *Build
	created := false
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO builds (owner_id, request_id, request_hash, task_id, job_id, sandbox_id, repo,
			requested_strategy, plan, model, additional_context, memory_hints, budget, files, max_iterations,
			task_title, task_description, context_paths)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
			ON CONFLICT (owner_id, request_id) DO NOTHING RETURNING id`,
			b.OwnerId, b.RequestId, requestHash, b.TaskId, b.JobId, b.SandboxId, b.Repo,
			strategyName(b.RequestedStrategy), plan, b.Model, b.AdditionalContext, nonNil(b.MemoryHints), budget, files, b.MaxIterations,
			b.TaskTitle, b.TaskDescription, nonNil(b.ContextPaths),
		).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			var hash []byte
			if err := tx.QueryRow(ctx, `SELECT id, request_hash FROM builds WHERE owner_id = $1 AND request_id = $2`,
				b.OwnerId, b.RequestId).Scan(&id, &hash); err != nil {
				return err
			}
			if string(hash) != string(requestHash) {
				return errs.Invalid("request_id", "was used for a different StartBuild request")
			}
			return nil
		}
		if err != nil {
			return err
		}
		created = true
		if err := enqueue(ctx, tx, id); err != nil {
			return err
		}
		b.Id = id
		batch := &pgx.Batch{}
		err = queueEvents(batch, b, []*builderv1.WatchBuildResponse{{
			Type: builderv1.BuildEventType_BUILD_EVENT_TYPE_CREATED,
			Payload: &builderv1.WatchBuildResponse_Created{Created: &builderv1.BuildCreated{
				JobId: b.JobId, TaskId: b.TaskId, SandboxId: b.SandboxId, Repo: b.Repo,
				PlanSummary: b.Plan.GetSummary(), PlanSteps: int32(len(b.Plan.GetSteps())),
				Strategy: b.RequestedStrategy, Model: b.Model,
			}},
		}})
		if err != nil {
			return err
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		// The build as created (PENDING), read before the commit lets a worker claim it:
		// read after, it may already be RUNNING.
		got, err = scanBuild(tx.QueryRow(ctx, `SELECT `+buildColumns+` FROM builds WHERE id = $1`, id))
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if got != nil {
		return got, created, nil
	}
	got, err = s.Get(ctx, b.OwnerId, id)
	return got, created, err
}

const buildColumns = `id, owner_id, request_id, task_id, job_id, sandbox_id, repo, status, requested_strategy,
	strategy, phase, plan, model, additional_context, memory_hints, current_step, total_steps, files_written, files_validated,
	iterations, max_iterations, new_project, graph, files, usage, budget, report, error, generation, skills,
	task_title, task_description, context_paths, create_time, start_time, update_time, end_time, guidance, paused_ms,
	instance, claims`

func scanBuild(row pgx.Row) (*Build, error) {
	var (
		b                                                 = &Build{BuildJob: &builderv1.BuildJob{}}
		status, requested, strategy, phase                string
		plan, graph, files, usage, budget, report, skills []byte
		guidance                                          []byte
		create, update                                    time.Time
		start, end                                        *time.Time
		pausedMS                                          int64
	)
	j := b.BuildJob
	err := row.Scan(&j.Id, &j.OwnerId, &j.RequestId, &j.TaskId, &j.JobId, &j.SandboxId, &j.Repo, &status, &requested,
		&strategy, &phase, &plan, &j.Model, &b.AdditionalContext, &b.MemoryHints, &j.CurrentStep, &j.TotalSteps, &b.FilesWritten,
		&b.FilesValidated, &j.Iterations, &b.MaxIterations, &b.NewProject, &graph, &files, &usage, &budget, &report, &j.Error,
		&b.Generation, &skills, &b.TaskTitle, &b.TaskDescription, &b.ContextPaths, &create, &start, &update, &end, &guidance, &pausedMS,
		&j.Instance, &j.Claims)
	if err != nil {
		return nil, err
	}
	b.Paused = time.Duration(pausedMS) * time.Millisecond
	j.Status, b.RequestedStrategy, j.Strategy, j.Phase = parseStatus(status), parseStrategy(requested), parseStrategy(strategy), parsePhase(phase)
	if j.Plan, err = unmarshal(plan, &typev1.Plan{}); err != nil {
		return nil, fmt.Errorf("store: build %s: plan: %w", j.Id, err)
	}
	if j.Graph, err = unmarshal(graph, &builderv1.DependencyGraph{}); err != nil {
		return nil, fmt.Errorf("store: build %s: graph: %w", j.Id, err)
	}
	if j.Usage, err = unmarshal(usage, &typev1.Usage{}); err != nil {
		return nil, fmt.Errorf("store: build %s: usage: %w", j.Id, err)
	}
	if j.Budget, err = unmarshal(budget, &typev1.Budget{}); err != nil {
		return nil, fmt.Errorf("store: build %s: budget: %w", j.Id, err)
	}
	if j.Report, err = unmarshal(report, &builderv1.BuildReport{}); err != nil {
		return nil, fmt.Errorf("store: build %s: report: %w", j.Id, err)
	}
	if b.Skills, err = unmarshalArray(skills, func() *aiv1.SkillFragment { return &aiv1.SkillFragment{} }); err != nil {
		return nil, fmt.Errorf("store: build %s: skills: %w", j.Id, err)
	}
	if j.Guidance, err = unmarshalGuidance(guidance); err != nil {
		return nil, fmt.Errorf("store: build %s: guidance: %w", j.Id, err)
	}
	if j.Files, err = unmarshalFiles(files); err != nil {
		return nil, fmt.Errorf("store: build %s: files: %w", j.Id, err)
	}
	j.CreateTime, j.UpdateTime = timestamppb.New(create), timestamppb.New(update)
	if start != nil {
		j.StartTime = timestamppb.New(*start)
	}
	if end != nil {
		j.EndTime = timestamppb.New(*end)
	}
	return b, nil
}

// Get returns owner's build id; another owner's or a missing one is errs.ErrNotFound.
func (s *Store) Get(ctx context.Context, owner, id string) (*Build, error) {
	b, err := scanBuild(s.pool.QueryRow(ctx, `SELECT `+buildColumns+` FROM builds WHERE id = $1 AND owner_id = $2`, id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("build %s: %w", id, errs.ErrNotFound)
	}
	return b, err
}

const stepColumns = `build_id, step_number, phase, kind, plan_step_id, action, path, command, workdir, description,
	model, context_files, usage, status, content, output, error, validation, fix_rounds, guidance, generated,
	start_time, end_time`

func scanStep(row pgx.Row) (*Step, error) {
	var (
		st                          = &Step{BuildStep: &builderv1.BuildStep{}}
		phase, kind, action, status string
		usage, validation, rounds   []byte
		start, end                  *time.Time
	)
	p := st.BuildStep
	err := row.Scan(&p.BuildId, &p.StepNumber, &phase, &kind, &p.PlanStepId, &action, &p.Path, &p.Command, &st.Workdir,
		&st.Description, &p.Model, &p.ContextFiles, &usage, &status, &p.Content, &p.Output, &p.Error, &validation,
		&rounds, &st.Guidance, &st.Generated, &start, &end)
	if err != nil {
		return nil, err
	}
	p.Phase, p.Kind, p.Action, p.Status = parsePhase(phase), parseKind(kind), parseAction(action), parseStepStatus(status)
	if p.Usage, err = unmarshal(usage, &typev1.Usage{}); err != nil {
		return nil, err
	}
	if p.Validation, err = unmarshal(validation, &builderv1.ValidationResult{}); err != nil {
		return nil, err
	}
	if p.FixRounds, err = unmarshalRounds(rounds); err != nil {
		return nil, err
	}
	if start != nil {
		p.StartTime = timestamppb.New(*start)
	}
	if end != nil {
		p.EndTime = timestamppb.New(*end)
	}
	return st, nil
}

// Steps returns a build's steps in step order.
func (s *Store) Steps(ctx context.Context, buildID string) ([]*Step, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+stepColumns+` FROM build_steps WHERE build_id = $1 ORDER BY step_number`, buildID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Step
	for rows.Next() {
		st, err := scanStep(rows)
		if err != nil {
			return nil, fmt.Errorf("store: build %s: step: %w", buildID, err)
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

func unmarshalFiles(b []byte) ([]*builderv1.BuildFile, error) {
	return unmarshalArray(b, func() *builderv1.BuildFile { return &builderv1.BuildFile{} })
}

func unmarshalRounds(b []byte) ([]*builderv1.FixRound, error) {
	return unmarshalArray(b, func() *builderv1.FixRound { return &builderv1.FixRound{} })
}

// unmarshalArray reads a JSON array of protojson objects (written by marshalList).
func unmarshalArray[M proto.Message](b []byte, newM func() M) ([]M, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	out := make([]M, 0, len(raw))
	for _, r := range raw {
		m := newM()
		if err := jsonIn.Unmarshal(r, m); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// nonNil is s, or an empty slice for nil (a NOT NULL array column takes '{}', not NULL).
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
