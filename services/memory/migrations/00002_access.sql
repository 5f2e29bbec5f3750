-- +goose Up
-- Access counts live in a narrow table of their own: every search bumps them, and an update
-- of the wide memories row would also write new HNSW and GIN index entries (most such
-- updates cannot be HOT), slowing searches until the next vacuum.
CREATE TABLE memory_access (
    memory_id          UUID        PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    access_count       BIGINT      NOT NULL DEFAULT 0,
    last_accessed_time TIMESTAMPTZ
);
INSERT INTO memory_access (memory_id, access_count, last_accessed_time)
    SELECT id, access_count, last_accessed_time FROM memories WHERE access_count > 0;
ALTER TABLE memories DROP COLUMN access_count, DROP COLUMN last_accessed_time;

-- +goose Down
ALTER TABLE memories ADD COLUMN access_count BIGINT NOT NULL DEFAULT 0, ADD COLUMN last_accessed_time TIMESTAMPTZ;
UPDATE memories m SET access_count = a.access_count, last_accessed_time = a.last_accessed_time
    FROM memory_access a WHERE a.memory_id = m.id;
DROP TABLE memory_access;
