-- The conversation whose chat reply made a call ('' for every other call): the agent's
-- replies are filed under it, and GetUsage filters and groups by it. A constant default adds
-- the column without rewriting the table.

-- +goose Up
ALTER TABLE usage_records ADD COLUMN conversation_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE usage_records DROP COLUMN conversation_id;
