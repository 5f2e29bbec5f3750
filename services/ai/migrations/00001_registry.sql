-- The model registry (providers and their models), the usage ledger and the answers recorded
-- under a caller's request_id.

-- +goose Up
CREATE TABLE providers (
    id          UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    name        TEXT        NOT NULL CHECK (name <> ''),
    -- The ProviderKind without its prefix, lower case: the wire protocol it speaks.
    kind        TEXT        NOT NULL CHECK (kind IN ('anthropic', 'openai', 'gemini', 'openai_compatible')),
    base_url    TEXT        NOT NULL DEFAULT '',
    -- Where the key lives ("env:NAME"), never the key.
    api_key_ref TEXT        NOT NULL DEFAULT '',
    enabled     BOOLEAN     NOT NULL DEFAULT true,
    create_time TIMESTAMPTZ NOT NULL DEFAULT now(),
    update_time TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- "Anthropic" and "anthropic" are one provider to a person choosing THEFOLD_AI_PROVIDER.
-- The index is also ListProviders' order (byte order, so pages are stable across locales).
CREATE UNIQUE INDEX providers_name_idx ON providers ((lower(name) COLLATE "C"));

CREATE TABLE models (
    id                          UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- A provider with models cannot be deleted: the admin deletes (or keeps) them first.
    provider_id                 UUID        NOT NULL REFERENCES providers (id) ON DELETE RESTRICT,
    -- The provider's own model name; case matters to providers, so it does here.
    name                        TEXT        NOT NULL CHECK (name <> ''),
    display_name                TEXT        NOT NULL DEFAULT '',
    tier                        SMALLINT    NOT NULL CHECK (tier BETWEEN 1 AND 5),
    -- Micro-dollars per million tokens; a cache price of 0 prices those tokens as input.
    input_micros_per_mtok       BIGINT      NOT NULL DEFAULT 0 CHECK (input_micros_per_mtok >= 0),
    output_micros_per_mtok      BIGINT      NOT NULL DEFAULT 0 CHECK (output_micros_per_mtok >= 0),
    cache_read_micros_per_mtok  BIGINT      NOT NULL DEFAULT 0 CHECK (cache_read_micros_per_mtok >= 0),
    cache_write_micros_per_mtok BIGINT      NOT NULL DEFAULT 0 CHECK (cache_write_micros_per_mtok >= 0),
    context_window              INTEGER     NOT NULL DEFAULT 0 CHECK (context_window >= 0),
    max_output_tokens           INTEGER     NOT NULL DEFAULT 0 CHECK (max_output_tokens >= 0),
    embedding_dimensions        INTEGER     NOT NULL DEFAULT 0 CHECK (embedding_dimensions >= 0),
    tags                        TEXT[]      NOT NULL DEFAULT '{}',
    supports_tools              BOOLEAN     NOT NULL DEFAULT false,
    supports_vision             BOOLEAN     NOT NULL DEFAULT false,
    enabled                     BOOLEAN     NOT NULL DEFAULT true,
    create_time                 TIMESTAMPTZ NOT NULL DEFAULT now(),
    update_time                 TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT models_provider_name_key UNIQUE (provider_id, name)
);
CREATE INDEX models_tags_idx ON models USING GIN (tags);

-- One row per AIService RPC (all its provider calls, retries and repairs). No foreign key to
-- models: the ledger outlives the models it names, so model and provider are kept by name.
CREATE TABLE usage_records (
    id                 UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    create_time        TIMESTAMPTZ NOT NULL DEFAULT now(),
    user_id            TEXT        NOT NULL DEFAULT '',
    caller             TEXT        NOT NULL DEFAULT '',
    rpc                TEXT        NOT NULL DEFAULT '',
    -- CallPhase and CallOutcome numbers: the contract fixes them, and GetUsage groups by them.
    phase              SMALLINT    NOT NULL DEFAULT 0 CHECK (phase >= 0),
    job_id             TEXT        NOT NULL DEFAULT '',
    task_id            TEXT        NOT NULL DEFAULT '',
    build_id           TEXT        NOT NULL DEFAULT '',
    project_id         TEXT        NOT NULL DEFAULT '',
    repo               TEXT        NOT NULL DEFAULT '',
    request_id         TEXT        NOT NULL DEFAULT '',
    model_id           UUID,
    model              TEXT        NOT NULL DEFAULT '',
    provider           TEXT        NOT NULL DEFAULT '',
    input_tokens       BIGINT      NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens      BIGINT      NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cache_read_tokens  BIGINT      NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    cache_write_tokens BIGINT      NOT NULL DEFAULT 0 CHECK (cache_write_tokens >= 0),
    cost_micros        BIGINT      NOT NULL DEFAULT 0 CHECK (cost_micros >= 0),
    latency_us         BIGINT      NOT NULL DEFAULT 0 CHECK (latency_us >= 0),
    calls              INTEGER     NOT NULL DEFAULT 0 CHECK (calls >= 0),
    outcome            SMALLINT    NOT NULL DEFAULT 0 CHECK (outcome >= 0),
    error              TEXT        NOT NULL DEFAULT ''
);
-- ListUsageRecords pages newest first by (create_time, id); GetUsage scans a time range.
-- The attribution filters each get an index ending in that key.
CREATE INDEX usage_records_time_idx ON usage_records (create_time DESC, id DESC);
CREATE INDEX usage_records_job_idx ON usage_records (job_id, create_time DESC, id DESC) WHERE job_id <> '';
CREATE INDEX usage_records_task_idx ON usage_records (task_id, create_time DESC, id DESC) WHERE task_id <> '';
CREATE INDEX usage_records_build_idx ON usage_records (build_id, create_time DESC, id DESC) WHERE build_id <> '';
CREATE INDEX usage_records_project_idx ON usage_records (project_id, create_time DESC, id DESC) WHERE project_id <> '';

-- The idempotency of AIService RPCs: a call with a request_id claims (caller, request_id)
-- as running, and stores its answer (the response's proto bytes) when done. A retry finds
-- the answer, or waits while the first call runs. A failed call deletes its claim, so the
-- retry runs again; a claim left running by a crashed process goes stale and is taken over.
CREATE TABLE answers (
    caller          TEXT        NOT NULL,
    request_id      TEXT        NOT NULL,
    rpc             TEXT        NOT NULL,
    -- A hash of the request without its request_id: the same id for another request is
    -- refused, never answered with the wrong response.
    fingerprint     TEXT        NOT NULL,
    state           TEXT        NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'done')),
    response        BYTEA,
    usage_record_id UUID,
    create_time     TIMESTAMPTZ NOT NULL,
    update_time     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (caller, request_id),
    CHECK ((state = 'done') = (response IS NOT NULL))
);
-- Pruning deletes by age.
CREATE INDEX answers_update_time_idx ON answers (update_time);

-- +goose Down
DROP TABLE answers;
DROP TABLE usage_records;
DROP TABLE models;
DROP TABLE providers;
