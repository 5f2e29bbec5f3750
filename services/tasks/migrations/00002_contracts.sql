-- The shared v1 vocabulary: a pull request is a reference {repo, number, url}, not a bare
-- URL; side-effecting creates carry a caller-chosen request id.

-- +goose Up
ALTER TABLE tasks
    ADD COLUMN pull_request_repo   TEXT    NOT NULL DEFAULT '',
    ADD COLUMN pull_request_number INTEGER NOT NULL DEFAULT 0 CHECK (pull_request_number >= 0);

-- A create with a request_id is recorded here in the transaction that creates the tasks: a
-- retry finds the row (or waits on the unique key for the first call to commit) and returns
-- the same tasks. fingerprint is a hash of the request less its request_id, so a request id
-- reused for a different request is refused rather than silently answered.
CREATE TABLE create_requests (
    owner_id    TEXT        NOT NULL,
    request_id  TEXT        NOT NULL,
    method      TEXT        NOT NULL,
    fingerprint BYTEA       NOT NULL,
    task_ids    UUID[]      NOT NULL,
    create_time TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_id, request_id)
);
CREATE INDEX create_requests_create_time_idx ON create_requests (create_time);

-- +goose Down
DROP TABLE create_requests;
ALTER TABLE tasks DROP COLUMN pull_request_number, DROP COLUMN pull_request_repo;
