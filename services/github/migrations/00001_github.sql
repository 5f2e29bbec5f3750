-- +goose Up
-- The local forge's repositories: the git objects live in a bare repository under the data
-- directory (<dir>/<owner>/<name>.git); this row is its registry entry and metadata.
CREATE TABLE repos (
    owner            TEXT        NOT NULL,
    name             TEXT        NOT NULL,
    description      TEXT        NOT NULL DEFAULT '',
    private          BOOLEAN     NOT NULL DEFAULT false,
    default_branch   TEXT        NOT NULL DEFAULT 'main',
    created_by       TEXT        NOT NULL,
    -- Issues and pull requests share one number sequence per repository, as on GitHub.
    last_number      INTEGER     NOT NULL DEFAULT 0,
    create_time      TIMESTAMPTZ NOT NULL DEFAULT now(),
    update_time      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, name)
);

-- The local forge's pull requests. head_sha and base_sha are refreshed from git when read;
-- the stats are those of the last computation (kept for merged and closed ones, whose head
-- branch may be gone).
CREATE TABLE pull_requests (
    repo             TEXT        NOT NULL,
    number           INTEGER     NOT NULL CHECK (number > 0),
    title            TEXT        NOT NULL,
    body             TEXT        NOT NULL DEFAULT '',
    head             TEXT        NOT NULL,
    base             TEXT        NOT NULL,
    head_sha         TEXT        NOT NULL DEFAULT '',
    base_sha         TEXT        NOT NULL DEFAULT '',
    state            TEXT        NOT NULL CHECK (state IN ('open', 'closed', 'merged')),
    draft            BOOLEAN     NOT NULL DEFAULT false,
    author           TEXT        NOT NULL,
    labels           TEXT[]      NOT NULL DEFAULT '{}',
    files_changed    INTEGER     NOT NULL DEFAULT 0,
    additions        INTEGER     NOT NULL DEFAULT 0,
    deletions        INTEGER     NOT NULL DEFAULT 0,
    merge_commit_sha TEXT        NOT NULL DEFAULT '',
    create_time      TIMESTAMPTZ NOT NULL DEFAULT now(),
    update_time      TIMESTAMPTZ NOT NULL DEFAULT now(),
    merge_time       TIMESTAMPTZ,
    close_time       TIMESTAMPTZ,
    PRIMARY KEY (repo, number)
);
-- At most one open pull request from a head to a base.
CREATE UNIQUE INDEX pull_requests_open_idx ON pull_requests (repo, head, base) WHERE state = 'open';

-- The local forge's issues.
CREATE TABLE issues (
    repo             TEXT        NOT NULL,
    number           INTEGER     NOT NULL CHECK (number > 0),
    title            TEXT        NOT NULL,
    body             TEXT        NOT NULL DEFAULT '',
    labels           TEXT[]      NOT NULL DEFAULT '{}',
    state            TEXT        NOT NULL CHECK (state IN ('open', 'closed')),
    blocked_by       INTEGER[]   NOT NULL DEFAULT '{}',
    author           TEXT        NOT NULL,
    assignees        TEXT[]      NOT NULL DEFAULT '{}',
    create_time      TIMESTAMPTZ NOT NULL DEFAULT now(),
    update_time      TIMESTAMPTZ NOT NULL DEFAULT now(),
    close_time       TIMESTAMPTZ,
    PRIMARY KEY (repo, number)
);
CREATE INDEX issues_labels_idx ON issues USING gin (labels);

-- Comments on the local forge's issues and pull requests.
CREATE TABLE comments (
    id               BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    repo             TEXT        NOT NULL,
    number           INTEGER     NOT NULL,
    body             TEXT        NOT NULL,
    author           TEXT        NOT NULL,
    create_time      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX comments_issue_idx ON comments (repo, number, id);

-- Answers of side-effecting RPCs made with a request_id, for every provider: a retry by the
-- same caller with the same key gets the first answer (a marshalled response) back.
CREATE TABLE requests (
    caller           TEXT        NOT NULL,
    method           TEXT        NOT NULL,
    request_id       TEXT        NOT NULL,
    -- SHA-256 of the request without its request_id: reusing a key for another request is
    -- refused.
    fingerprint      BYTEA       NOT NULL,
    response         BYTEA       NOT NULL,
    create_time      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (caller, method, request_id)
);

-- +goose Down
DROP TABLE requests;
DROP TABLE comments;
DROP TABLE issues;
DROP TABLE pull_requests;
DROP TABLE repos;
