-- +goose Up
-- What the memory service's in-process vector ranking follows (internal/vscan,
-- store/scan.go). Each replica keeps its owners' vectors in memory and must learn of every
-- insert, delete and new embedding, by any replica, in the order they committed.
--
-- Every change of an owner's memory vectors takes the owner's next version (the row
-- below, locked by the change's transaction until it ends), so an owner's changes commit in
-- version order: a replica that has applied versions up to v reads what came after with
-- owner_version > v, and misses nothing that commits later. A stored or re-embedded row
-- carries its version; a deleted row leaves a tombstone with it. Tombstones are removed
-- after a day (consolidation); pruned is the newest version whose tombstone was removed, and
-- a replica holding an older version reads all of the owner's vectors again.
CREATE TABLE memory_owner_versions (
    owner_id TEXT   PRIMARY KEY,
    version  BIGINT NOT NULL,
    pruned   BIGINT NOT NULL DEFAULT 0
);
INSERT INTO memory_owner_versions (owner_id, version) SELECT DISTINCT owner_id, 0 FROM memories;

ALTER TABLE memories ADD COLUMN owner_version BIGINT NOT NULL DEFAULT 0;
CREATE INDEX memories_owner_version_idx ON memories (owner_id, owner_version);

CREATE TABLE memory_tombstones (
    owner_id      TEXT        NOT NULL,
    owner_version BIGINT      NOT NULL,
    id            UUID        NOT NULL,
    delete_time   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_id, owner_version)
);

-- +goose StatementBegin
CREATE FUNCTION memories_next_version() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    owner TEXT;
    v     BIGINT;
BEGIN
    IF TG_OP = 'DELETE' THEN
        owner := OLD.owner_id;
    ELSE
        owner := NEW.owner_id;
    END IF;
    INSERT INTO memory_owner_versions AS o (owner_id, version) VALUES (owner, 1)
        ON CONFLICT (owner_id) DO UPDATE SET version = o.version + 1
        RETURNING o.version INTO v;
    IF TG_OP = 'DELETE' THEN
        INSERT INTO memory_tombstones (owner_id, owner_version, id) VALUES (owner, v, OLD.id);
        RETURN OLD;
    END IF;
    NEW.owner_version := v;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER memories_version_insert BEFORE INSERT ON memories
    FOR EACH ROW EXECUTE FUNCTION memories_next_version();
CREATE TRIGGER memories_version_update BEFORE UPDATE OF embedding, embedding_model, embedding_dims ON memories
    FOR EACH ROW EXECUTE FUNCTION memories_next_version();
CREATE TRIGGER memories_version_delete AFTER DELETE ON memories
    FOR EACH ROW EXECUTE FUNCTION memories_next_version();

-- +goose Down
DROP TRIGGER memories_version_delete ON memories;
DROP TRIGGER memories_version_update ON memories;
DROP TRIGGER memories_version_insert ON memories;
DROP FUNCTION memories_next_version();
DROP TABLE memory_tombstones;
DROP INDEX memories_owner_version_idx;
ALTER TABLE memories DROP COLUMN owner_version;
DROP TABLE memory_owner_versions;
