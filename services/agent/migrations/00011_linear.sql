-- +goose Up
-- A person's Linear workspace (LinearService). The API key and the webhook secret are
-- sealed (AES-GCM, the agent's secret key); neither leaves the agent (the secret once, in
-- ConnectLinear's first answer). A sync is due at next_sync_time: claimed by moving it past
-- a lease (FOR UPDATE SKIP LOCKED), so one replica syncs a connection at a time. synced_to
-- is Linear's updatedAt up to which every change was read.
CREATE TABLE linear_connections (
    id                 UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id           TEXT        NOT NULL,
    request_id         TEXT        NOT NULL DEFAULT '',
    repo               TEXT        NOT NULL,
    key_sealed         BYTEA       NOT NULL,
    key_hint           TEXT        NOT NULL,
    linear_user        TEXT        NOT NULL DEFAULT '',
    secret_sealed      BYTEA       NOT NULL,
    team_ids           TEXT[]      NOT NULL,
    team_keys          TEXT[]      NOT NULL DEFAULT '{}',
    project_ids        TEXT[]      NOT NULL DEFAULT '{}',
    state_types        TEXT[]      NOT NULL,
    sync_interval_secs INTEGER     NOT NULL,
    next_sync_time     TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- The statuses of the tasks are written back more often than Linear is read: a push
    -- alone is due at next_push_time, claimed as a sync is.
    next_push_time     TIMESTAMPTZ NOT NULL DEFAULT now(),
    full_sync          BOOLEAN     NOT NULL DEFAULT true,
    synced_to          TIMESTAMPTZ,
    last_sync_time     TIMESTAMPTZ,
    last_sync_status   TEXT        NOT NULL DEFAULT '',
    create_time        TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX linear_connections_request ON linear_connections (owner_id, request_id) WHERE request_id <> '';
CREATE INDEX linear_connections_owner ON linear_connections (owner_id, create_time DESC, id DESC);
CREATE INDEX linear_connections_due ON linear_connections (next_sync_time);
CREATE INDEX linear_connections_push_due ON linear_connections (next_push_time);
CREATE INDEX linear_connections_teams ON linear_connections USING gin (team_ids);

-- The issues a connection synced and the tasks they became. linear_updated_at and
-- task_updated_at are both sides' last change as of the last sync: a side whose change is
-- newer than that changed since. pushed_status is the task status last written to Linear.
CREATE TABLE linear_issues (
    connection_id     UUID        NOT NULL REFERENCES linear_connections (id) ON DELETE CASCADE,
    issue_id          TEXT        NOT NULL,
    identifier        TEXT        NOT NULL,
    url               TEXT        NOT NULL DEFAULT '',
    team_id           TEXT        NOT NULL,
    state_name        TEXT        NOT NULL DEFAULT '',
    state_type        TEXT        NOT NULL DEFAULT '',
    task_id           TEXT        NOT NULL,
    title             TEXT        NOT NULL DEFAULT '',
    description       TEXT        NOT NULL DEFAULT '',
    linear_updated_at TIMESTAMPTZ NOT NULL,
    task_updated_at   TIMESTAMPTZ NOT NULL,
    pushed_status     TEXT        NOT NULL DEFAULT '',
    conflict          TEXT        NOT NULL DEFAULT '',
    conflict_time     TIMESTAMPTZ,
    sync_time         TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (connection_id, issue_id)
);
CREATE INDEX linear_issues_list ON linear_issues (connection_id, sync_time DESC, issue_id DESC);
CREATE INDEX linear_issues_task ON linear_issues (connection_id, task_id);

-- Webhook deliveries, once each (Linear-Delivery), and the issues they name waiting for the
-- background sync to read them.
CREATE TABLE linear_deliveries (
    connection_id UUID        NOT NULL REFERENCES linear_connections (id) ON DELETE CASCADE,
    delivery_id   TEXT        NOT NULL,
    issue_id      TEXT        NOT NULL,
    receive_time  TIMESTAMPTZ NOT NULL DEFAULT now(),
    done          BOOLEAN     NOT NULL DEFAULT false,
    PRIMARY KEY (connection_id, delivery_id)
);
CREATE INDEX linear_deliveries_pending ON linear_deliveries (connection_id) WHERE NOT done;

-- +goose Down
DROP TABLE linear_deliveries;
DROP TABLE linear_issues;
DROP TABLE linear_connections;
