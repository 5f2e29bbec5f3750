-- +goose Up
-- The ai service names the built-in embedder's versions ("local@1"); what it answered as
-- "local" before was version 1. Stored vectors take the exact name, so a later version
-- ("local@2") is a different model whose vectors are never compared with these.
SET LOCAL maintenance_work_mem = '512MB';
UPDATE memories SET embedding_model = 'local@1' WHERE embedding_model = 'local';
UPDATE code_patterns SET embedding_model = 'local@1' WHERE embedding_model = 'local';

-- The HNSW index of each ('local', size) pair (store.EnsureIndex) now covers no row: dropped,
-- and the pair's index made again under the new name, so searches never go without one.
-- The name is store.indexName's: <table>_hnsw_<FNV-1a 32 of the model, hex>_<size>, and
-- c66dc74b is the hash of 'local@1'.
-- +goose StatementBegin
DO $$
DECLARE
    r record;
    pairs text[];
    pair text;
BEGIN
    FOR r IN SELECT indexname FROM pg_indexes
             WHERE schemaname = current_schema() AND tablename IN ('memories', 'code_patterns')
               AND indexdef LIKE '%embedding_model = ''local''::text%'
    LOOP
        EXECUTE format('DROP INDEX %I', r.indexname);
    END LOOP;
    -- Collected first: a table cannot be indexed while a loop's query still reads it.
    SELECT coalesce(array_agg(p), '{}') INTO pairs FROM (
        SELECT DISTINCT 'memories ' || embedding_dims AS p FROM memories WHERE embedding_model = 'local@1'
        UNION SELECT DISTINCT 'code_patterns ' || embedding_dims FROM code_patterns WHERE embedding_model = 'local@1') x;
    FOREACH pair IN ARRAY pairs
    LOOP
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %I USING hnsw ((embedding::vector(%s)) vector_cosine_ops) '
                       'WHERE embedding_model = ''local@1'' AND embedding_dims = %s',
                       split_part(pair, ' ', 1) || '_hnsw_c66dc74b_' || split_part(pair, ' ', 2),
                       split_part(pair, ' ', 1), split_part(pair, ' ', 2), split_part(pair, ' ', 2));
    END LOOP;
END $$;
-- +goose StatementEnd

-- +goose Down
UPDATE memories SET embedding_model = 'local' WHERE embedding_model = 'local@1';
UPDATE code_patterns SET embedding_model = 'local' WHERE embedding_model = 'local@1';
-- (The service makes the indexes of the pairs it stores again.)
