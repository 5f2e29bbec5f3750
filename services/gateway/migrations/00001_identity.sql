-- +goose Up
-- People who can log in. id is a UUID, except the launcher's first admin, 'admin' (the
-- subject of the admin token `thefold up` issues). tokens_not_before: the user's tokens
-- issued before it are refused (set when the user is disabled or their role changes).
CREATE TABLE users (
    id                TEXT        PRIMARY KEY,
    email             TEXT        NOT NULL,
    email_norm        TEXT        NOT NULL UNIQUE,
    display_name      TEXT        NOT NULL,
    role              TEXT        NOT NULL CHECK (role IN ('admin', 'member')),
    disabled          BOOLEAN     NOT NULL DEFAULT false,
    tokens_not_before TIMESTAMPTZ,
    create_time       TIMESTAMPTZ NOT NULL DEFAULT now(),
    update_time       TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_login_time   TIMESTAMPTZ
);

-- One-time login codes: an HMAC of the code, never the code. Only a user's newest code
-- counts; used_time makes it single-use.
CREATE TABLE login_codes (
    id          BIGSERIAL   PRIMARY KEY,
    user_id     TEXT        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    code_hash   BYTEA       NOT NULL,
    create_time TIMESTAMPTZ NOT NULL DEFAULT now(),
    expire_time TIMESTAMPTZ NOT NULL,
    used_time   TIMESTAMPTZ
);
CREATE INDEX login_codes_user ON login_codes (user_id, id DESC);

-- The login audit: every code request and every verification, by address (known or not:
-- what happens to an unknown address is recorded the same way).
CREATE TABLE login_attempts (
    id         BIGSERIAL   PRIMARY KEY,
    email_norm TEXT        NOT NULL,
    user_id    TEXT,
    peer       TEXT        NOT NULL DEFAULT '',
    outcome    TEXT        NOT NULL
        CHECK (outcome IN ('code_sent', 'code_not_sent', 'success', 'bad_code', 'locked_out')),
    time       TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX login_attempts_email ON login_attempts (email_norm, time DESC);
CREATE INDEX login_attempts_time ON login_attempts (time);

-- Lockout state by address (known or not, so a lockout reveals nothing): failures since
-- the last success or lockout, how many lockouts in a row (the backoff's exponent).
CREATE TABLE login_lockouts (
    email_norm   TEXT        PRIMARY KEY,
    failures     INT         NOT NULL DEFAULT 0,
    lockouts     INT         NOT NULL DEFAULT 0,
    locked_until TIMESTAMPTZ,
    update_time  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Login sessions and their refresh tokens (SHA-256 of the secret). A refresh token is
-- spent when used; its successor is derived from it (HMAC), so a retry within the grace
-- period gets the same one without any secret being stored.
CREATE TABLE sessions (
    id          UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id     TEXT        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    create_time TIMESTAMPTZ NOT NULL DEFAULT now(),
    expire_time TIMESTAMPTZ NOT NULL,
    end_time    TIMESTAMPTZ,
    end_reason  TEXT        NOT NULL DEFAULT ''
);
CREATE INDEX sessions_user ON sessions (user_id) WHERE end_time IS NULL;

CREATE TABLE refresh_tokens (
    hash        BYTEA       PRIMARY KEY,
    session_id  UUID        NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    create_time TIMESTAMPTZ NOT NULL DEFAULT now(),
    expire_time TIMESTAMPTZ NOT NULL,
    spent_time  TIMESTAMPTZ
);
CREATE INDEX refresh_tokens_session ON refresh_tokens (session_id);

-- API keys: SHA-256 of the secret. secret_enc holds the secret encrypted (AES-GCM) for the
-- 15 minutes in which a retried CreateAPIKey may show it again, then is cleared.
CREATE TABLE api_keys (
    id             UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id        TEXT        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name           TEXT        NOT NULL,
    prefix         TEXT        NOT NULL,
    hash           BYTEA       NOT NULL UNIQUE,
    scopes         TEXT[]      NOT NULL,
    request_id     TEXT        NOT NULL DEFAULT '',
    secret_enc     BYTEA,
    create_time    TIMESTAMPTZ NOT NULL DEFAULT now(),
    expire_time    TIMESTAMPTZ,
    last_used_time TIMESTAMPTZ,
    revoke_time    TIMESTAMPTZ
);
CREATE INDEX api_keys_user ON api_keys (user_id, create_time DESC, id DESC);
CREATE UNIQUE INDEX api_keys_request ON api_keys (user_id, request_id) WHERE request_id <> '';

-- Revocations in force; each was also appended to the outbox (event_id), which is how
-- every service's verifier learns of it (IdentityService.WatchRevocations).
CREATE TABLE revocations (
    id          BIGSERIAL   PRIMARY KEY,
    type        TEXT        NOT NULL CHECK (type IN ('token', 'session', 'user', 'api_key')),
    subject     TEXT        NOT NULL,
    not_before  TIMESTAMPTZ,
    expire_time TIMESTAMPTZ NOT NULL,
    create_time TIMESTAMPTZ NOT NULL DEFAULT now(),
    event_id    BIGINT      NOT NULL
);
CREATE INDEX revocations_expire ON revocations (expire_time);

-- +goose Down
DROP TABLE revocations;
DROP TABLE api_keys;
DROP TABLE refresh_tokens;
DROP TABLE sessions;
DROP TABLE login_lockouts;
DROP TABLE login_attempts;
DROP TABLE login_codes;
DROP TABLE users;
