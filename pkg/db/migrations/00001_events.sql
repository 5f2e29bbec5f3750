-- Platform migration: the transactional outbox every service schema carries.
-- Rows are written only through events.Append, which serializes appenders so
-- ids become visible in id order (see pkg/events).

-- +goose Up
CREATE TABLE events (
    id           BIGSERIAL PRIMARY KEY,
    stream       TEXT        NOT NULL,
    aggregate_id TEXT        NOT NULL,
    owner_id     TEXT        NOT NULL DEFAULT '',
    scope        TEXT        NOT NULL DEFAULT '',
    type         TEXT        NOT NULL,
    payload      BYTEA       NOT NULL DEFAULT '',
    create_time  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Watch reads "id > cursor ORDER BY id" narrowed by any of these columns;
-- each index ends in id so the filtered read stays an ordered index range.
CREATE INDEX events_stream_id_idx ON events (stream, id);
CREATE INDEX events_aggregate_id_idx ON events (aggregate_id, id);
CREATE INDEX events_owner_id_idx ON events (owner_id, id);
CREATE INDEX events_scope_id_idx ON events (scope, id);

-- +goose Down
DROP TABLE events;
