-- +goose Up
-- Jobs: one run of the task loop for one task. The contract's Job is kept whole as protojson
-- (job, without its plan; plan beside it); the columns are what queries filter, lock and
-- fence on. context is the loop's gathered context (the ai service's PlanTaskRequest in
-- protojson: task, tree, files, memories, skills, strategy hint, attempts, feedback, plan),
-- state the loop's own checkpoint (JSON): both are written with the job after every step,
-- so a resumed job continues from the last one.
CREATE TABLE jobs (
    id           UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id     TEXT        NOT NULL,
    -- StartTask's idempotency key ('' for none) and a hash of the request it came with.
    request_id   TEXT        NOT NULL DEFAULT '',
    request_hash BYTEA,
    task_id      TEXT        NOT NULL,
    project_id   TEXT        NOT NULL DEFAULT '',
    repo         TEXT        NOT NULL,
    base_branch  TEXT        NOT NULL DEFAULT '',
    status       TEXT        NOT NULL
        CHECK (status IN ('queued', 'running', 'waiting_clarification', 'pending_review', 'paused',
                          'human_needed', 'completed', 'failed', 'cancelled', 'skipped', 'rejected')),
    -- The job has left QUEUED once: from then on it holds its repository branch's lock until
    -- it ends.
    phase        TEXT        NOT NULL DEFAULT '',
    started      BOOLEAN     NOT NULL DEFAULT false,
    job          JSONB       NOT NULL,
    plan         JSONB,
    context      JSONB       NOT NULL DEFAULT '{}',
    state        JSONB       NOT NULL DEFAULT '{}',
    -- The worker running the loop and when it last said so (see builder.builds).
    lease_id     UUID,
    lease_time   TIMESTAMPTZ,
    create_time  TIMESTAMPTZ NOT NULL DEFAULT now(),
    update_time  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX jobs_request ON jobs (owner_id, request_id) WHERE request_id <> '';
-- One unfinished job per task.
CREATE UNIQUE INDEX jobs_task_active ON jobs (task_id)
    WHERE status NOT IN ('completed', 'failed', 'cancelled', 'skipped', 'rejected');
CREATE INDEX jobs_owner_create ON jobs (owner_id, create_time DESC, id DESC);
CREATE INDEX jobs_lock ON jobs (repo, base_branch) WHERE started
    AND status NOT IN ('completed', 'failed', 'cancelled', 'skipped', 'rejected');
CREATE INDEX jobs_runnable ON jobs (lease_time) WHERE status IN ('queued', 'running');

-- Reviews: a job's work at the human review gate (the contract's Review as protojson, files
-- with content and diff included).
CREATE TABLE reviews (
    id          UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id    TEXT        NOT NULL,
    job_id      UUID        NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    task_id     TEXT        NOT NULL,
    repo        TEXT        NOT NULL,
    status      TEXT        NOT NULL CHECK (status IN ('pending', 'approved', 'changes_requested', 'rejected')),
    -- The loop step that submitted it: a resumed job does not submit a second one.
    submit_key  TEXT        NOT NULL UNIQUE,
    review      JSONB       NOT NULL,
    create_time TIMESTAMPTZ NOT NULL DEFAULT now(),
    update_time TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX reviews_owner_create ON reviews (owner_id, create_time DESC, id DESC);
CREATE INDEX reviews_job ON reviews (job_id);

-- The audit trail: one row per side effect the agent (or a person) caused. key makes a
-- resumed step's entry the same row.
CREATE TABLE audit_log (
    id          BIGSERIAL   PRIMARY KEY,
    job_id      UUID        NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    task_id     TEXT        NOT NULL,
    owner_id    TEXT        NOT NULL,
    actor       TEXT        NOT NULL,
    action      TEXT        NOT NULL,
    key         TEXT        NOT NULL UNIQUE,
    details     JSONB       NOT NULL DEFAULT '{}',
    success     BOOLEAN     NOT NULL,
    error       TEXT        NOT NULL DEFAULT '',
    duration_ms BIGINT      NOT NULL DEFAULT 0,
    create_time TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX audit_owner_time ON audit_log (owner_id, create_time DESC, id DESC);
CREATE INDEX audit_job ON audit_log (job_id);

-- What each phase of a job cost, summed over its steps and attempts: tokens, cost, calls,
-- wall time, and the tokens of each model used (the one with most is the phase's model).
CREATE TABLE phase_metrics (
    job_id             UUID    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    phase              TEXT    NOT NULL,
    input_tokens       BIGINT  NOT NULL DEFAULT 0,
    output_tokens      BIGINT  NOT NULL DEFAULT 0,
    cache_read_tokens  BIGINT  NOT NULL DEFAULT 0,
    cache_write_tokens BIGINT  NOT NULL DEFAULT 0,
    cost_micros        BIGINT  NOT NULL DEFAULT 0,
    calls              INTEGER NOT NULL DEFAULT 0,
    duration_ms        BIGINT  NOT NULL DEFAULT 0,
    model_tokens       JSONB   NOT NULL DEFAULT '{}',
    -- Loop order of the phase's first step, for GetJobMetrics.
    first_seen         BIGSERIAL,
    PRIMARY KEY (job_id, phase)
);

-- +goose Down
DROP TABLE phase_metrics;
DROP TABLE audit_log;
DROP TABLE reviews;
DROP TABLE jobs;
