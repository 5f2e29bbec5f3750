-- +goose Up
-- RunCommand's request_id: a retry of a call whose answer was lost returns the first run's
-- logged result instead of running the argv again. The key is per sandbox, and only a
-- command that finished (was logged) has one.
ALTER TABLE commands
    ADD COLUMN request_id   TEXT  NOT NULL DEFAULT '',
    ADD COLUMN request_hash BYTEA NOT NULL DEFAULT '';
CREATE UNIQUE INDEX commands_request ON commands (sandbox_id, request_id) WHERE request_id <> '';

-- +goose Down
DROP INDEX commands_request;
ALTER TABLE commands DROP COLUMN request_hash, DROP COLUMN request_id;
