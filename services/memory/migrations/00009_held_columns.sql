-- +goose Up
-- The memory service's in-process rankings also filter and score their candidates in the
-- process (store/held.go), by the columns held beside each owner's vectors: the type,
-- importance, uses, times, repository, trust level, tags and category. A change of any of
-- them must take the owner's next version, as a change of the vectors does (migration
-- 00007), so a search that checked the owner's version sees it; the trigger now fires on
-- every update of a row, which also keeps the rule for a column added later.
DROP TRIGGER memories_version_update ON memories;
CREATE TRIGGER memories_version_update BEFORE UPDATE ON memories
    FOR EACH ROW EXECUTE FUNCTION memories_next_version();
-- The trigger's function names its tables without a schema: it runs with the search_path
-- of this migration (the service's schema), not the one of whoever updates a memory (an
-- operator's psql session, whose path may not name the schema, would otherwise fail).
ALTER FUNCTION memories_next_version() SET search_path FROM CURRENT;

-- +goose Down
ALTER FUNCTION memories_next_version() RESET search_path;
DROP TRIGGER memories_version_update ON memories;
CREATE TRIGGER memories_version_update BEFORE UPDATE OF embedding, embedding_model, embedding_dims, search ON memories
    FOR EACH ROW EXECUTE FUNCTION memories_next_version();
