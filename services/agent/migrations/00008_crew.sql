-- +goose Up
-- The branch a job's lock is on: its base branch, except for a crew worker, which works on a
-- branch of its own (several workers of one project run at once on one base branch; the crew
-- keeps their merges in order).
ALTER TABLE jobs ADD COLUMN lock_branch TEXT;
UPDATE jobs SET lock_branch = base_branch;
ALTER TABLE jobs ALTER COLUMN lock_branch SET NOT NULL;
DROP INDEX jobs_lock;
CREATE INDEX jobs_lock ON jobs (repo, lock_branch) WHERE started
    AND status NOT IN ('completed', 'failed', 'cancelled', 'skipped', 'rejected');

-- Messages people sent a crew project's workers or the project itself
-- (ProjectService.PostProjectMessage). A worker's message names its job: the job's later model
-- calls are given every message of the job, oldest first.
CREATE TABLE project_messages (
    id              UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    project_id      UUID        NOT NULL,
    owner_id        TEXT        NOT NULL,
    author_id       TEXT        NOT NULL,
    -- 0 and '' for a message to the project itself.
    worker          INT         NOT NULL DEFAULT 0,
    project_task_id TEXT        NOT NULL DEFAULT '',
    job_id          UUID,
    job_phase       TEXT        NOT NULL DEFAULT '',
    text            TEXT        NOT NULL,
    request_id      TEXT        NOT NULL DEFAULT '',
    create_time     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX project_messages_request ON project_messages (owner_id, request_id) WHERE request_id <> '';
CREATE INDEX project_messages_job ON project_messages (job_id, create_time) WHERE job_id IS NOT NULL;
CREATE INDEX project_messages_project ON project_messages (project_id, create_time);

-- +goose Down
DROP TABLE project_messages;
DROP INDEX jobs_lock;
CREATE INDEX jobs_lock ON jobs (repo, base_branch) WHERE started
    AND status NOT IN ('completed', 'failed', 'cancelled', 'skipped', 'rejected');
ALTER TABLE jobs DROP COLUMN lock_branch;
