-- +goose Up
-- The repository monitor (RepoHealthService). A connection's periodic checks are off
-- unless health_enabled; next_health_time is when the next one is queued.
ALTER TABLE repo_connections
    ADD COLUMN health_enabled        BOOLEAN     NOT NULL DEFAULT false,
    ADD COLUMN health_interval_secs  INTEGER     NOT NULL DEFAULT 86400,
    ADD COLUMN health_todo_threshold INTEGER     NOT NULL DEFAULT 200,
    ADD COLUMN health_auto_start     BOOLEAN     NOT NULL DEFAULT false,
    ADD COLUMN next_health_time      TIMESTAMPTZ NOT NULL DEFAULT now();
CREATE INDEX repo_connections_health_due ON repo_connections (next_health_time) WHERE health_enabled;

-- One check of a connection's repository. A queued one is claimed by moving lease_until
-- past a lease (FOR UPDATE SKIP LOCKED), so one agent replica runs it; a running one whose
-- lease ran out (its replica died) is claimed again. The report's detail (checks, outdated
-- modules, markers, findings) is the RepoHealthReport in protojson; the figures of the
-- trend are columns. todo_marks are the fingerprints of its markers, for the stale count of
-- later checks.
CREATE TABLE repo_health_reports (
    id               UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    connection_id    UUID        NOT NULL REFERENCES repo_connections (id) ON DELETE CASCADE,
    request_id       TEXT        NOT NULL DEFAULT '',
    state            TEXT        NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
    manual           BOOLEAN     NOT NULL DEFAULT false,
    commit_sha       TEXT        NOT NULL DEFAULT '',
    detail           JSONB       NOT NULL DEFAULT '{}',
    failed_checks    INTEGER     NOT NULL DEFAULT 0,
    outdated_count   INTEGER     NOT NULL DEFAULT 0,
    todo_count       INTEGER     NOT NULL DEFAULT 0,
    stale_todo_count INTEGER     NOT NULL DEFAULT 0,
    finding_count    INTEGER     NOT NULL DEFAULT 0,
    todo_marks       TEXT[]      NOT NULL DEFAULT '{}',
    error            TEXT        NOT NULL DEFAULT '',
    attempts         INTEGER     NOT NULL DEFAULT 0,
    lease_until      TIMESTAMPTZ,
    create_time      TIMESTAMPTZ NOT NULL DEFAULT now(),
    start_time       TIMESTAMPTZ,
    finish_time      TIMESTAMPTZ
);
CREATE INDEX repo_health_reports_list ON repo_health_reports (connection_id, create_time DESC, id DESC);
CREATE INDEX repo_health_reports_due ON repo_health_reports (create_time) WHERE state IN ('queued', 'running');
-- At most one check of a connection waits or runs at a time.
CREATE UNIQUE INDEX repo_health_reports_active ON repo_health_reports (connection_id) WHERE state IN ('queued', 'running');
CREATE UNIQUE INDEX repo_health_reports_request ON repo_health_reports (connection_id, request_id) WHERE request_id <> '';

-- A finding of a connection's checks, by key. It is open while checks keep seeing it
-- (one healing task for all of them) and closed by the first check that ran the part it
-- belongs to and did not see it; seen again later, it opens as a new occurrence with a
-- task of its own.
CREATE TABLE repo_health_findings (
    connection_id   UUID        NOT NULL REFERENCES repo_connections (id) ON DELETE CASCADE,
    key             TEXT        NOT NULL,
    kind            TEXT        NOT NULL,
    occurrence      INTEGER     NOT NULL DEFAULT 1,
    open            BOOLEAN     NOT NULL DEFAULT true,
    title           TEXT        NOT NULL,
    evidence        TEXT        NOT NULL DEFAULT '',
    task_id         TEXT        NOT NULL DEFAULT '',
    task_error      TEXT        NOT NULL DEFAULT '',
    first_seen_time TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen_time  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (connection_id, key)
);

-- +goose Down
DROP TABLE repo_health_findings;
DROP TABLE repo_health_reports;
ALTER TABLE repo_connections
    DROP COLUMN health_enabled,
    DROP COLUMN health_interval_secs,
    DROP COLUMN health_todo_threshold,
    DROP COLUMN health_auto_start,
    DROP COLUMN next_health_time;
