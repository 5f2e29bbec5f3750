-- +goose Up
-- Who vouched for a memory: the person who promoted it to USER trust (PromoteMemory) and
-- when. An AGENT strategy is recalled as a planning hint only once a person promoted it, so
-- the promotion is kept with the memory it vouches for; a service lowering the trust (or
-- changing the content) clears it.
ALTER TABLE memories
    ADD COLUMN promoted_by  TEXT NOT NULL DEFAULT '',
    ADD COLUMN promote_time TIMESTAMPTZ;

-- +goose Down
ALTER TABLE memories DROP COLUMN promote_time, DROP COLUMN promoted_by;
