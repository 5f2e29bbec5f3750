-- +goose Up
-- Long-term memories. The embedding column has no fixed size: vectors of different models
-- and dimensions coexist, and each (model, dimensions) pair gets its own partial HNSW index
-- on an expression cast to its size (made by the service when it first stores a vector of
-- that pair). Vectors of different models are never compared.
CREATE TABLE memories (
    id                 UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id           TEXT        NOT NULL,
    repo               TEXT        NOT NULL DEFAULT '',
    memory_type        TEXT        NOT NULL CHECK (memory_type IN ('general', 'skill', 'task', 'session',
                                       'error_pattern', 'decision', 'code_pattern', 'strategy')),
    category           TEXT        NOT NULL DEFAULT '',
    content            TEXT        NOT NULL,
    summary            TEXT        NOT NULL DEFAULT '',
    -- Lower-case hex SHA-256 of content: a row whose content no longer matches is never
    -- returned.
    content_hash       TEXT        NOT NULL,
    tags               TEXT[]      NOT NULL DEFAULT '{}',
    trust_level        TEXT        NOT NULL CHECK (trust_level IN ('user', 'agent', 'system')),
    importance         DOUBLE PRECISION NOT NULL DEFAULT 0.5 CHECK (importance >= 0 AND importance <= 1),
    embedding          vector      NOT NULL,
    embedding_model    TEXT        NOT NULL,
    embedding_dims     INTEGER     NOT NULL,
    -- Full-text vector of summary, content and the content's identifiers split into words
    -- (computed by the service, which splits camelCase and snake_case).
    search             tsvector    NOT NULL,
    access_count       BIGINT      NOT NULL DEFAULT 0,
    last_accessed_time TIMESTAMPTZ,
    use_count          BIGINT      NOT NULL DEFAULT 0,
    last_used_time     TIMESTAMPTZ,
    source_task_id     TEXT        NOT NULL DEFAULT '',
    source_job_id      TEXT        NOT NULL DEFAULT '',
    metadata           JSONB,
    merged_from        UUID[]      NOT NULL DEFAULT '{}',
    request_id         TEXT,
    create_time        TIMESTAMPTZ NOT NULL DEFAULT now(),
    update_time        TIMESTAMPTZ NOT NULL DEFAULT now(),
    expire_time        TIMESTAMPTZ
);
-- The same content of one type in one repository is stored once per owner.
CREATE UNIQUE INDEX memories_dedup_idx ON memories (owner_id, repo, memory_type, content_hash);
CREATE UNIQUE INDEX memories_request_idx ON memories (owner_id, request_id) WHERE request_id IS NOT NULL;
CREATE INDEX memories_owner_idx ON memories (owner_id, create_time DESC, id DESC);
CREATE INDEX memories_search_idx ON memories USING gin (search);
CREATE INDEX memories_expire_idx ON memories (expire_time) WHERE expire_time IS NOT NULL;

-- Rows found with content that no longer matches their hash, for GetStats and for people to
-- look at (the rows stay; they are never returned).
CREATE TABLE integrity_failures (
    memory_id   UUID        PRIMARY KEY,
    owner_id    TEXT        NOT NULL,
    detect_time TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Problem → solution pairs learned from finished tasks.
CREATE TABLE code_patterns (
    id              UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id        TEXT        NOT NULL,
    repo            TEXT        NOT NULL DEFAULT '',
    problem         TEXT        NOT NULL,
    solution        TEXT        NOT NULL,
    language        TEXT        NOT NULL DEFAULT '',
    file_paths      TEXT[]      NOT NULL DEFAULT '{}',
    tags            TEXT[]      NOT NULL DEFAULT '{}',
    code_before     TEXT        NOT NULL DEFAULT '',
    code_after      TEXT        NOT NULL DEFAULT '',
    source_task_id  TEXT        NOT NULL DEFAULT '',
    confidence      DOUBLE PRECISION NOT NULL DEFAULT 0.5,
    reuse_count     BIGINT      NOT NULL DEFAULT 0,
    success_count   BIGINT      NOT NULL DEFAULT 0,
    content_hash    TEXT        NOT NULL,
    embedding       vector      NOT NULL,
    embedding_model TEXT        NOT NULL,
    embedding_dims  INTEGER     NOT NULL,
    search          tsvector    NOT NULL,
    request_id      TEXT,
    create_time     TIMESTAMPTZ NOT NULL DEFAULT now(),
    update_time     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX code_patterns_dedup_idx ON code_patterns (owner_id, content_hash);
CREATE UNIQUE INDEX code_patterns_request_idx ON code_patterns (owner_id, request_id) WHERE request_id IS NOT NULL;
CREATE INDEX code_patterns_search_idx ON code_patterns USING gin (search);

-- +goose Down
DROP TABLE code_patterns;
DROP TABLE integrity_failures;
DROP TABLE memories;
