-- +goose Up
-- RetryStep runs a failed step again; a retry of that call whose answer was lost would run
-- it once more if the step had failed again meanwhile. The build remembers its latest
-- RetryStep's request_id (and what it asked), so a retry with it returns the build instead.
ALTER TABLE builds
    ADD COLUMN retry_request_id   TEXT  NOT NULL DEFAULT '',
    ADD COLUMN retry_request_hash BYTEA NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE builds DROP COLUMN retry_request_hash, DROP COLUMN retry_request_id;
