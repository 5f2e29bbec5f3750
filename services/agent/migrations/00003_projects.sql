-- +goose Up
-- Projects: a large request (or a repository's task graph) run as phases of tasks in one
-- shared sandbox, reviewed once. The contract's Project is kept whole as protojson (project,
-- without its etag, which is version); the columns are what queries filter, lock and fence
-- on. state is the project runner's own checkpoint (JSON), written with the project.
CREATE TABLE projects (
    id           UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id     TEXT        NOT NULL,
    -- PlanProject's idempotency key ('' for none) and a hash of the request it came with.
    request_id   TEXT        NOT NULL DEFAULT '',
    request_hash BYTEA,
    repo         TEXT        NOT NULL,
    status       TEXT        NOT NULL
        CHECK (status IN ('planned', 'running', 'paused', 'pending_review', 'completed', 'failed',
                          'rejected', 'cancelled', 'human_needed')),
    -- Bumped by every change; the contract's etag.
    version      BIGINT      NOT NULL DEFAULT 1,
    project      JSONB       NOT NULL,
    state        JSONB       NOT NULL DEFAULT '{}',
    -- The worker running the project and when it last said so (see jobs).
    lease_id     UUID,
    lease_time   TIMESTAMPTZ,
    create_time  TIMESTAMPTZ NOT NULL DEFAULT now(),
    update_time  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX projects_request ON projects (owner_id, request_id) WHERE request_id <> '';
CREATE INDEX projects_owner_create ON projects (owner_id, create_time DESC, id DESC);
CREATE INDEX projects_runnable ON projects (lease_time) WHERE status = 'running';

-- The files a project's tasks wrote, as they stand (a later task's version replaces an
-- earlier one's): what the review and the pull request are made of, and what a lost
-- sandbox is rebuilt from.
CREATE TABLE project_files (
    project_id      UUID    NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    path            TEXT    NOT NULL,
    content         BYTEA   NOT NULL DEFAULT '',
    deleted         BOOLEAN NOT NULL DEFAULT false,
    project_task_id TEXT    NOT NULL,
    PRIMARY KEY (project_id, path)
);

-- A project's review is of the project, not of a job.
ALTER TABLE reviews ALTER COLUMN job_id DROP NOT NULL;
ALTER TABLE reviews ADD COLUMN project_id UUID REFERENCES projects (id) ON DELETE CASCADE;
ALTER TABLE reviews ADD CONSTRAINT reviews_subject CHECK (job_id IS NOT NULL OR project_id IS NOT NULL);
CREATE INDEX reviews_project ON reviews (project_id) WHERE project_id IS NOT NULL;

-- +goose Down
DELETE FROM reviews WHERE job_id IS NULL;
ALTER TABLE reviews DROP CONSTRAINT reviews_subject;
ALTER TABLE reviews DROP COLUMN project_id;
ALTER TABLE reviews ALTER COLUMN job_id SET NOT NULL;
DROP TABLE project_files;
DROP TABLE projects;
