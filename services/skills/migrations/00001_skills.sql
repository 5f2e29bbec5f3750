-- +goose Up
-- Skills: prompt fragments and deterministic checks with the routing that decides when they
-- apply. Routing and rules are the contract's messages in protojson (read and written only
-- whole, with the skill).
CREATE TABLE skills (
    id              UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    name            TEXT        NOT NULL,
    description     TEXT        NOT NULL DEFAULT '',
    category        TEXT        NOT NULL CHECK (category IN ('general', 'framework', 'language', 'security', 'style', 'quality')),
    phase           TEXT        NOT NULL CHECK (phase IN ('pre_run', 'inject', 'post_run')),
    prompt_fragment TEXT        NOT NULL DEFAULT '',
    routing         JSONB       NOT NULL DEFAULT '{}',
    rules           JSONB       NOT NULL DEFAULT '[]',
    priority        INTEGER     NOT NULL CHECK (priority BETWEEN 1 AND 100),
    -- Tokens of prompt_fragment (tiktoken cl100k_base), computed by the service.
    tokens          INTEGER     NOT NULL CHECK (tokens >= 0),
    enabled         BOOLEAN     NOT NULL DEFAULT true,
    scope           TEXT        NOT NULL CHECK (scope IN ('global', 'repo')),
    repo            TEXT        NOT NULL DEFAULT '' CHECK ((scope = 'repo') = (repo <> '')),
    success_count   BIGINT      NOT NULL DEFAULT 0,
    failure_count   BIGINT      NOT NULL DEFAULT 0,
    version         INTEGER     NOT NULL DEFAULT 1,
    owner_id        TEXT        NOT NULL,
    -- One of TheFold's built-in skills (seeded by the service; an admin may edit, disable or
    -- delete it like any other).
    builtin         BOOLEAN     NOT NULL DEFAULT false,
    create_time     TIMESTAMPTZ NOT NULL DEFAULT now(),
    update_time     TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- A name is unique within its scope (case-insensitively).
CREATE UNIQUE INDEX skills_name_idx ON skills (scope, repo, lower(name));
CREATE INDEX skills_order_idx ON skills (priority DESC, name, id);

-- The built-in skills seeded so far, by name: each is seeded once, so one an admin deleted
-- does not come back at the next start.
CREATE TABLE seeded (
    name      TEXT        PRIMARY KEY,
    seed_time TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One result per job and skill: LogResult's retries change nothing. The results of a
-- deleted skill are kept.
CREATE TABLE skill_results (
    job_id        TEXT        NOT NULL,
    skill_id      UUID        NOT NULL,
    task_id       TEXT        NOT NULL DEFAULT '',
    success       BOOLEAN     NOT NULL,
    quality_score INTEGER     NOT NULL DEFAULT 0,
    owner_id      TEXT        NOT NULL,
    create_time   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, skill_id)
);

-- +goose Down
DROP TABLE skill_results;
DROP TABLE seeded;
DROP TABLE skills;
