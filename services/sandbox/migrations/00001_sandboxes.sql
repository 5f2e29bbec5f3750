-- +goose Up
-- A sandbox: a workspace directory on the sandbox service's host and, for the docker backend,
-- its container. Rows outlive their sandbox (status destroyed) so that a job's history and
-- the command log stay readable.
CREATE TABLE sandboxes (
    id               UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id         TEXT        NOT NULL,
    repo             TEXT        NOT NULL DEFAULT '',
    ref              TEXT        NOT NULL DEFAULT '',
    base_commit      TEXT        NOT NULL DEFAULT '',
    backend          TEXT        NOT NULL CHECK (backend IN ('docker', 'bwrap', 'local')),
    status           TEXT        NOT NULL CHECK (status IN ('creating', 'ready', 'failed', 'destroyed')),
    status_reason    TEXT        NOT NULL DEFAULT '',
    language         TEXT        NOT NULL DEFAULT '',
    image            TEXT        NOT NULL DEFAULT '',
    -- thefold.sandbox.v1.ResourceLimits as protojson: the effective limits.
    limits           JSONB       NOT NULL DEFAULT '{}',
    job_id           TEXT        NOT NULL DEFAULT '',
    -- Idle lifetime; expire_time moves to last use + ttl.
    ttl_seconds      BIGINT      NOT NULL CHECK (ttl_seconds > 0),
    pinned           BOOLEAN     NOT NULL DEFAULT false,
    -- Host path of the workspace, and the backend's handle (a container id).
    workspace        TEXT        NOT NULL DEFAULT '',
    handle           TEXT        NOT NULL DEFAULT '',
    create_time      TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_used_time   TIMESTAMPTZ NOT NULL DEFAULT now(),
    expire_time      TIMESTAMPTZ NOT NULL,
    destroy_time     TIMESTAMPTZ
);

-- Listing a caller's sandboxes, newest first, is an index range.
CREATE INDEX sandboxes_owner ON sandboxes (owner_id, create_time DESC, id DESC);
-- The reaper finds live, unpinned sandboxes past their expiry.
CREATE INDEX sandboxes_expiry ON sandboxes (expire_time) WHERE status IN ('creating', 'ready') AND NOT pinned;
-- The per-owner limit counts live sandboxes.
CREATE INDEX sandboxes_live ON sandboxes (owner_id) WHERE status IN ('creating', 'ready');

-- Named snapshots of a workspace: path → {sha256, size, executable}.
CREATE TABLE snapshots (
    id           UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    sandbox_id   UUID        NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    name         TEXT        NOT NULL,
    files        JSONB       NOT NULL,
    file_count   INTEGER     NOT NULL CHECK (file_count >= 0),
    total_bytes  BIGINT      NOT NULL CHECK (total_bytes >= 0),
    create_time  TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (sandbox_id, name)
);

-- The command log: every RunCommand and validation step that ran.
CREATE TABLE commands (
    id           UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    sandbox_id   UUID        NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    argv         TEXT[]      NOT NULL,
    workdir      TEXT        NOT NULL DEFAULT '',
    exit_code    INTEGER     NOT NULL,
    timed_out    BOOLEAN     NOT NULL DEFAULT false,
    truncated    BOOLEAN     NOT NULL DEFAULT false,
    duration_us  BIGINT      NOT NULL CHECK (duration_us >= 0),
    -- The last bytes of the output, for a person reading the log.
    output_tail  TEXT        NOT NULL DEFAULT '',
    create_time  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX commands_sandbox ON commands (sandbox_id, create_time, id);

-- request_id of CreateSandbox: a retry returns the sandbox the first call created.
CREATE TABLE create_requests (
    owner_id     TEXT        NOT NULL,
    request_id   TEXT        NOT NULL,
    fingerprint  BYTEA       NOT NULL,
    sandbox_id   UUID        REFERENCES sandboxes (id) ON DELETE CASCADE,
    create_time  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_id, request_id)
);

-- +goose Down
DROP TABLE create_requests;
DROP TABLE commands;
DROP TABLE snapshots;
DROP TABLE sandboxes;
