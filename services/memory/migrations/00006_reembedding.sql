-- +goose Up
-- Re-embedding for a newly configured embedding model (service/reembed.go).
--
-- Searches embed a query with each table's active model (embedding_state), the one every
-- row's embedding column holds, so the search path stays what it was: one column, one
-- partial HNSW index per (model, size). When the configured model differs, a background
-- job writes the new model's vector of every row into the table's side table (a row with a
-- vector of the target there is done: a restarted job continues where it stopped), and
-- rows stored meanwhile get both vectors. When every row has one, one transaction moves
-- them into the embedding column, builds the new pair's HNSW index and makes the target
-- active; searchers see the old vectors or the new, never a mix.
CREATE TABLE embedding_state (
    table_name   TEXT        PRIMARY KEY CHECK (table_name IN ('memories', 'code_patterns')),
    -- The active pair: what searches embed queries with.
    model        TEXT        NOT NULL,
    dims         INTEGER     NOT NULL,
    -- The pair being moved to ('' and 0 when none was seen yet), for GetStats.
    target_model TEXT        NOT NULL DEFAULT '',
    target_dims  INTEGER     NOT NULL DEFAULT 0,
    update_time  TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- Each table's most common pair is what its searches used so far.
INSERT INTO embedding_state (table_name, model, dims)
    SELECT 'memories', embedding_model, embedding_dims FROM memories
    GROUP BY embedding_model, embedding_dims ORDER BY count(*) DESC, 2, 3 LIMIT 1;
INSERT INTO embedding_state (table_name, model, dims)
    SELECT 'code_patterns', embedding_model, embedding_dims FROM code_patterns
    GROUP BY embedding_model, embedding_dims ORDER BY count(*) DESC, 2, 3 LIMIT 1;

CREATE TABLE memory_next_embeddings (
    id        UUID    PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    model     TEXT    NOT NULL,
    dims      INTEGER NOT NULL,
    embedding vector  NOT NULL
);
CREATE TABLE code_pattern_next_embeddings (
    id        UUID    PRIMARY KEY REFERENCES code_patterns (id) ON DELETE CASCADE,
    model     TEXT    NOT NULL,
    dims      INTEGER NOT NULL,
    embedding vector  NOT NULL
);
-- Finds the rows of another pair than the active one without reading the table: in the
-- steady state the job's look is a few empty index ranges.
CREATE INDEX memories_embedding_pair_idx ON memories (embedding_model, embedding_dims);
CREATE INDEX code_patterns_embedding_pair_idx ON code_patterns (embedding_model, embedding_dims);

-- +goose Down
DROP INDEX code_patterns_embedding_pair_idx;
DROP INDEX memories_embedding_pair_idx;
DROP TABLE code_pattern_next_embeddings;
DROP TABLE memory_next_embeddings;
DROP TABLE embedding_state;
