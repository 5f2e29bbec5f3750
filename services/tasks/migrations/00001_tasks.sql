-- The task engine: tasks and their blocked-by graph. Events go to the platform's
-- events outbox in the same schema (pkg/db migrations).

-- +goose Up
CREATE TABLE tasks (
    id               UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id         TEXT        NOT NULL,
    repo             TEXT        NOT NULL,
    title            TEXT        NOT NULL,
    description      TEXT        NOT NULL DEFAULT '',
    status           TEXT        NOT NULL DEFAULT 'backlog'
        CHECK (status IN ('backlog', 'planned', 'in_progress', 'in_review', 'done', 'blocked', 'cancelled')),
    source           TEXT        NOT NULL DEFAULT 'api'
        CHECK (source IN ('manual', 'api', 'github', 'linear', 'chat', 'healing')),
    -- The TaskPriority enum number (1 low … 4 urgent), so ORDER BY priority DESC is urgent first.
    priority         SMALLINT    NOT NULL DEFAULT 2 CHECK (priority BETWEEN 1 AND 4),
    labels           TEXT[]      NOT NULL DEFAULT '{}',
    -- A subtask outlives its parent as a top-level task.
    parent_id        UUID        REFERENCES tasks (id) ON DELETE SET NULL,
    external_id      TEXT        NOT NULL DEFAULT '',
    external_url     TEXT        NOT NULL DEFAULT '',
    job_id           TEXT        NOT NULL DEFAULT '',
    pull_request_url TEXT        NOT NULL DEFAULT '',
    complexity       INTEGER     NOT NULL DEFAULT 0 CHECK (complexity BETWEEN 0 AND 10),
    estimated_tokens BIGINT      NOT NULL DEFAULT 0 CHECK (estimated_tokens >= 0),
    planned_order    INTEGER     NOT NULL DEFAULT 0 CHECK (planned_order >= 0),
    status_reason    TEXT        NOT NULL DEFAULT '',
    create_time      TIMESTAMPTZ NOT NULL DEFAULT now(),
    update_time      TIMESTAMPTZ NOT NULL DEFAULT now(),
    complete_time    TIMESTAMPTZ
);

-- Every read is scoped by owner. ListTasks pages newest first by (create_time, id); each
-- filter gets an index that ends in that key, so a filtered page is an ordered index range.
CREATE INDEX tasks_owner_page_idx ON tasks (owner_id, create_time DESC, id DESC);
CREATE INDEX tasks_owner_repo_page_idx ON tasks (owner_id, repo, create_time DESC, id DESC);
CREATE INDEX tasks_owner_status_page_idx ON tasks (owner_id, status, create_time DESC, id DESC);
CREATE INDEX tasks_owner_source_page_idx ON tasks (owner_id, source, create_time DESC, id DESC);
CREATE INDEX tasks_parent_idx ON tasks (parent_id, create_time DESC, id DESC) WHERE parent_id IS NOT NULL;
CREATE INDEX tasks_labels_idx ON tasks USING GIN (labels);
-- An issue is imported once per owner: re-importing updates the task it became.
CREATE UNIQUE INDEX tasks_external_id_idx ON tasks (owner_id, source, external_id) WHERE external_id <> '';

-- task_id is blocked by blocked_by_id. Both belong to the same owner (the store checks it).
CREATE TABLE task_dependencies (
    task_id       UUID        NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    blocked_by_id UUID        NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    create_time   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, blocked_by_id),
    CHECK (task_id <> blocked_by_id)
);

-- The reverse direction: what a task blocks (cycle walks, cascades, readiness).
CREATE INDEX task_dependencies_blocked_by_idx ON task_dependencies (blocked_by_id, task_id);

-- +goose Down
DROP TABLE task_dependencies;
DROP TABLE tasks;
