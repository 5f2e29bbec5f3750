-- +goose Up
-- Who may do what with the local forge's repositories, and how people reach GitHub.

-- Namespaces: the owner segment of a repository name ("alice" in "alice/app"). A USER
-- namespace is one person's; an ORG namespace has members. "local" (and the operator's
-- shared owners) are not rows: anyone creates there and owns what they create.
CREATE TABLE namespaces (
    name        TEXT        PRIMARY KEY,
    kind        TEXT        NOT NULL CHECK (kind IN ('user', 'org')),
    -- The person of a USER namespace; the creator of an ORG namespace.
    user_id     TEXT        NOT NULL,
    create_time TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- One USER namespace per person.
CREATE UNIQUE INDEX namespaces_user_idx ON namespaces (user_id) WHERE kind = 'user';

CREATE TABLE namespace_members (
    namespace   TEXT        NOT NULL REFERENCES namespaces (name) ON DELETE CASCADE,
    user_id     TEXT        NOT NULL,
    role        TEXT        NOT NULL CHECK (role IN ('member', 'admin')),
    create_time TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, user_id)
);

-- A person's role on one repository, beyond what ownership and visibility give.
CREATE TABLE collaborators (
    owner       TEXT        NOT NULL,
    name        TEXT        NOT NULL,
    user_id     TEXT        NOT NULL,
    role        TEXT        NOT NULL CHECK (role IN ('read', 'write', 'admin')),
    create_time TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, name, user_id),
    FOREIGN KEY (owner, name) REFERENCES repos (owner, name) ON DELETE CASCADE
);

-- repo_role is a person's role on a repository, 0 none, 1 read, 2 write, 3 admin: the
-- greatest of what creating it, holding or administering its namespace, being a member of
-- its organisation (read), being a collaborator, and its being public (read) give.
-- TheFold's admins are handled by the service, not here.
-- +goose StatementBegin
CREATE FUNCTION repo_role(r_owner TEXT, r_name TEXT, r_private BOOLEAN, r_created_by TEXT, uid TEXT)
RETURNS INT LANGUAGE sql STABLE AS $$
    SELECT GREATEST(
        CASE WHEN r_created_by = uid THEN 3 ELSE 0 END,
        CASE WHEN r_private THEN 0 ELSE 1 END,
        COALESCE((SELECT 3 FROM namespaces n WHERE n.name = r_owner AND n.kind = 'user' AND n.user_id = uid), 0),
        COALESCE((SELECT CASE m.role WHEN 'admin' THEN 3 ELSE 1 END FROM namespace_members m
                  WHERE m.namespace = r_owner AND m.user_id = uid), 0),
        COALESCE((SELECT CASE c.role WHEN 'admin' THEN 3 WHEN 'write' THEN 2 ELSE 1 END FROM collaborators c
                  WHERE c.owner = r_owner AND c.name = r_name AND c.user_id = uid), 0))
$$;
-- +goose StatementEnd

-- People's own GitHub tokens, encrypted (AES-256-GCM with the operator's key); only the
-- last four characters are kept in clear, to describe the token.
CREATE TABLE github_credentials (
    user_id     TEXT        PRIMARY KEY,
    token_enc   BYTEA       NOT NULL,
    hint        TEXT        NOT NULL,
    create_time TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- What a person without their own credential may reach through the server's GitHub token:
-- "owner/name" or "owner/*".
CREATE TABLE github_grants (
    user_id     TEXT        NOT NULL,
    repo        TEXT        NOT NULL,
    role        TEXT        NOT NULL CHECK (role IN ('read', 'write', 'admin')),
    create_time TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, repo)
);

-- +goose Down
DROP TABLE github_grants;
DROP TABLE github_credentials;
DROP FUNCTION repo_role;
DROP TABLE collaborators;
DROP TABLE namespace_members;
DROP TABLE namespaces;
