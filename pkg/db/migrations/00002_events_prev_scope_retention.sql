-- Platform migration: events seen by watchers of the scope they left, and the
-- retention horizon (see pkg/events).

-- +goose Up
-- The scope an aggregate had before this event, when the event moved it
-- (a task moved to another repository); '' otherwise. A watcher filtered on
-- scope X reads "scope = X OR prev_scope = X".
ALTER TABLE events ADD COLUMN prev_scope TEXT NOT NULL DEFAULT '';

-- Few events move anything, so the index holds only those; the filter
-- repeats the predicate (prev_scope <> '') so the planner can use it.
CREATE INDEX events_prev_scope_id_idx ON events (prev_scope, id) WHERE prev_scope <> '';

-- One row: every id <= pruned_through may have been removed by retention.
-- Kept apart from events so it stays exact when retention empties the table:
-- a cursor below it has missed events and gets ErrCursorExpired.
CREATE TABLE events_horizon (
    singleton      BOOLEAN PRIMARY KEY DEFAULT true CHECK (singleton),
    pruned_through BIGINT  NOT NULL DEFAULT 0
);
INSERT INTO events_horizon DEFAULT VALUES;

-- +goose Down
DROP TABLE events_horizon;
DROP INDEX events_prev_scope_id_idx;
ALTER TABLE events DROP COLUMN prev_scope;
