-- +goose Up
-- Builds and their steps. Nested messages of the contract (plan, graph, files, usage, budget,
-- report, validation, fix rounds) are protojson with proto field names, read and written only
-- whole with their row; the scalar fields a query filters or a person reads are columns.
CREATE TABLE builds (
    id                 UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id           TEXT        NOT NULL,
    -- StartBuild's idempotency key and a hash of the request it was first used with.
    request_id         TEXT        NOT NULL,
    request_hash       BYTEA       NOT NULL,
    task_id            TEXT        NOT NULL DEFAULT '',
    job_id             TEXT        NOT NULL DEFAULT '',
    sandbox_id         TEXT        NOT NULL,
    repo               TEXT        NOT NULL DEFAULT '',
    status             TEXT        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    -- The strategy asked for ('' lets init choose) and the one init chose.
    requested_strategy TEXT        NOT NULL DEFAULT '',
    strategy           TEXT        NOT NULL DEFAULT '',
    phase              TEXT        NOT NULL DEFAULT '',
    plan               JSONB       NOT NULL,
    model              TEXT        NOT NULL DEFAULT '',
    additional_context TEXT        NOT NULL DEFAULT '',
    -- The caller's memory hints, given to every generation and fix.
    memory_hints       TEXT[]      NOT NULL DEFAULT '{}',
    current_step       INTEGER     NOT NULL DEFAULT 0,
    total_steps        INTEGER     NOT NULL DEFAULT 0,
    files_written      INTEGER     NOT NULL DEFAULT 0,
    files_validated    INTEGER     NOT NULL DEFAULT 0,
    iterations         INTEGER     NOT NULL DEFAULT 0,
    max_iterations     INTEGER     NOT NULL DEFAULT 3,
    -- Set by init: the workspace held no files (scaffold phase, SCAFFOLD_FIRST).
    new_project        BOOLEAN     NOT NULL DEFAULT false,
    graph              JSONB,
    files              JSONB       NOT NULL DEFAULT '[]',
    usage              JSONB       NOT NULL DEFAULT '{}',
    -- Input plus output tokens and cost of the build so far (the usage's sums, as columns
    -- for queries).
    tokens             BIGINT      NOT NULL DEFAULT 0,
    cost_micros        BIGINT      NOT NULL DEFAULT 0,
    budget             JSONB       NOT NULL DEFAULT '{}',
    report             JSONB,
    error              TEXT        NOT NULL DEFAULT '',
    -- Bumped by RetryStep: part of the idempotency keys of the AI calls of re-run steps, so a
    -- retry asks the model again while a resume after a crash does not.
    generation         INTEGER     NOT NULL DEFAULT 0,
    -- The worker running the build and when it last said so: a build whose lease has
    -- expired is resumed by another worker (after a crash) and the old one is fenced out.
    lease_id           UUID,
    lease_time         TIMESTAMPTZ,
    create_time        TIMESTAMPTZ NOT NULL DEFAULT now(),
    start_time         TIMESTAMPTZ,
    update_time        TIMESTAMPTZ NOT NULL DEFAULT now(),
    end_time           TIMESTAMPTZ,
    UNIQUE (owner_id, request_id)
);
CREATE INDEX builds_owner_create ON builds (owner_id, create_time DESC, id DESC);
CREATE INDEX builds_job ON builds (job_id) WHERE job_id <> '';
CREATE INDEX builds_active ON builds (lease_time) WHERE status IN ('pending', 'running');

CREATE TABLE build_steps (
    build_id      UUID        NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    step_number   INTEGER     NOT NULL CHECK (step_number > 0),
    phase         TEXT        NOT NULL,
    kind          TEXT        NOT NULL,
    plan_step_id  TEXT        NOT NULL DEFAULT '',
    action        TEXT        NOT NULL DEFAULT '',
    path          TEXT        NOT NULL DEFAULT '',
    command       TEXT[]      NOT NULL DEFAULT '{}',
    workdir       TEXT        NOT NULL DEFAULT '',
    -- The plan step's spec, given to the model.
    description   TEXT        NOT NULL DEFAULT '',
    model         TEXT        NOT NULL DEFAULT '',
    context_files TEXT[]      NOT NULL DEFAULT '{}',
    usage         JSONB       NOT NULL DEFAULT '{}',
    tokens        BIGINT      NOT NULL DEFAULT 0,
    cost_micros   BIGINT      NOT NULL DEFAULT 0,
    status        TEXT        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'skipped')),
    content       TEXT        NOT NULL DEFAULT '',
    output        TEXT        NOT NULL DEFAULT '',
    error         TEXT        NOT NULL DEFAULT '',
    validation    JSONB,
    fix_rounds    JSONB       NOT NULL DEFAULT '[]',
    -- Guidance given by RetryStep for the step's next run.
    guidance      TEXT        NOT NULL DEFAULT '',
    -- The model's content came back and is in content: a resumed step does not ask again.
    generated     BOOLEAN     NOT NULL DEFAULT false,
    start_time    TIMESTAMPTZ,
    end_time      TIMESTAMPTZ,
    duration_ms   BIGINT      NOT NULL DEFAULT 0,
    PRIMARY KEY (build_id, step_number)
);

-- +goose Down
DROP TABLE build_steps;
DROP TABLE builds;
