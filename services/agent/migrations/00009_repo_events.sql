-- +goose Up
-- A person's repository whose GitHub webhook posts to the gateway's /hooks/github. The
-- webhook secret is sealed (AES-GCM, the agent's secret key) and never leaves the agent
-- after ConnectRepository's first answer.
CREATE TABLE repo_connections (
    id                 UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id           TEXT        NOT NULL,
    request_id         TEXT        NOT NULL DEFAULT '',
    repo               TEXT        NOT NULL,
    secret_sealed      BYTEA       NOT NULL,
    issue_labels       TEXT[]      NOT NULL DEFAULT '{}',
    last_delivery_time TIMESTAMPTZ,
    create_time        TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- A polled connection reads the repository's event feed (RepoConnection.poll): the
    -- feed's last ETag and newest event id, when to read next, and the last read.
    poll               BOOLEAN     NOT NULL DEFAULT false,
    poll_etag          TEXT        NOT NULL DEFAULT '',
    poll_last_event    BIGINT      NOT NULL DEFAULT 0,
    next_poll_time     TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_poll_time     TIMESTAMPTZ,
    poll_status        TEXT        NOT NULL DEFAULT '',
    UNIQUE (owner_id, repo)
);
CREATE INDEX repo_connections_due ON repo_connections (next_poll_time) WHERE poll;
CREATE UNIQUE INDEX repo_connections_request ON repo_connections (owner_id, request_id) WHERE request_id <> '';
CREATE INDEX repo_connections_repo ON repo_connections (repo);
CREATE INDEX repo_connections_owner ON repo_connections (owner_id, create_time DESC, id DESC);

-- The verified deliveries of a connection, once each (GitHub's X-GitHub-Delivery id). A
-- pending one is handled in the background: claimed by moving next_attempt_time past a
-- lease, so one agent replica takes it at a time, and tried again with backoff after a
-- failure. Its payload is dropped once it is handled.
CREATE TABLE repo_deliveries (
    connection_id     UUID        NOT NULL REFERENCES repo_connections (id) ON DELETE CASCADE,
    delivery_id       TEXT        NOT NULL,
    event             TEXT        NOT NULL,
    action            TEXT        NOT NULL DEFAULT '',
    state             TEXT        NOT NULL CHECK (state IN ('pending', 'done', 'ignored', 'failed')),
    outcome           TEXT        NOT NULL DEFAULT '',
    payload           BYTEA,
    attempts          INTEGER     NOT NULL DEFAULT 0,
    next_attempt_time TIMESTAMPTZ NOT NULL DEFAULT now(),
    receive_time      TIMESTAMPTZ NOT NULL DEFAULT now(),
    finish_time       TIMESTAMPTZ,
    PRIMARY KEY (connection_id, delivery_id)
);
CREATE INDEX repo_deliveries_due ON repo_deliveries (next_attempt_time) WHERE state = 'pending';
CREATE INDEX repo_deliveries_list ON repo_deliveries (connection_id, receive_time DESC, delivery_id DESC);

-- The line comments of people with write access on TheFold's pull requests, kept until a
-- revision of the pull request takes them (job_id).
CREATE TABLE pr_feedback (
    connection_id UUID        NOT NULL REFERENCES repo_connections (id) ON DELETE CASCADE,
    pr_number     INTEGER     NOT NULL,
    comment_id    BIGINT      NOT NULL,
    review_id     BIGINT      NOT NULL DEFAULT 0,
    author        TEXT        NOT NULL,
    path          TEXT        NOT NULL DEFAULT '',
    line          INTEGER     NOT NULL DEFAULT 0,
    body          TEXT        NOT NULL,
    job_id        UUID,
    create_time   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (connection_id, comment_id)
);
CREATE INDEX pr_feedback_open ON pr_feedback (connection_id, pr_number) WHERE job_id IS NULL;

-- +goose Down
DROP TABLE pr_feedback;
DROP TABLE repo_deliveries;
DROP TABLE repo_connections;
