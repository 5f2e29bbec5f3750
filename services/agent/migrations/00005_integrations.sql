-- +goose Up
-- A person's Slack or Discord: notices are posted to its incoming webhook, and its slash
-- commands or interactions become the person's messages. The webhook URL and the inbound
-- secret are sealed (AES-GCM, the agent's secret key) and never leave the agent.
CREATE TABLE integrations (
    id                   UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id             TEXT        NOT NULL,
    request_id           TEXT        NOT NULL DEFAULT '',
    kind                 TEXT        NOT NULL CHECK (kind IN ('slack', 'discord')),
    name                 TEXT        NOT NULL,
    webhook_sealed       BYTEA       NOT NULL,
    webhook_hint         TEXT        NOT NULL,
    inbound_sealed       BYTEA,
    external_user_id     TEXT        NOT NULL DEFAULT '',
    conversation_id      UUID        REFERENCES conversations (id) ON DELETE SET NULL,
    -- The notice kinds posted (their stored names); empty: all.
    notices              TEXT[]      NOT NULL DEFAULT '{}',
    enabled              BOOLEAN     NOT NULL DEFAULT true,
    disabled_reason      TEXT        NOT NULL DEFAULT '',
    consecutive_failures INTEGER     NOT NULL DEFAULT 0,
    last_delivery_time   TIMESTAMPTZ,
    create_time          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX integrations_request ON integrations (owner_id, request_id) WHERE request_id <> '';
CREATE UNIQUE INDEX integrations_external_user ON integrations (kind, external_user_id) WHERE external_user_id <> '';
CREATE INDEX integrations_owner ON integrations (owner_id, create_time DESC, id DESC);

-- The notices waiting to be posted, one row per integration and notice, written with the
-- notice; a failed post waits next_attempt_time (backing off) and is given up after its
-- attempts run out.
CREATE TABLE integration_deliveries (
    id                BIGSERIAL   PRIMARY KEY,
    integration_id    UUID        NOT NULL REFERENCES integrations (id) ON DELETE CASCADE,
    message_id        UUID        NOT NULL,
    conversation_id   UUID        NOT NULL,
    text              TEXT        NOT NULL,
    attempts          INTEGER     NOT NULL DEFAULT 0,
    next_attempt_time TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_error        TEXT        NOT NULL DEFAULT '',
    UNIQUE (integration_id, message_id)
);
CREATE INDEX integration_deliveries_due ON integration_deliveries (next_attempt_time);

-- Inbound requests already taken (their signature), so a redelivery stores nothing twice.
CREATE TABLE integration_inbound (
    signature   TEXT        PRIMARY KEY,
    answer      BYTEA       NOT NULL,
    create_time TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE integration_inbound;
DROP TABLE integration_deliveries;
DROP TABLE integrations;
