-- +goose Up
-- Conversations: a person talks to TheFold, the model answers and acts through tools. A
-- conversation's messages are kept whole as protobuf (ConversationMessage, without the
-- columns' fields); the columns are what queries order, filter and fence on.
CREATE TABLE conversations (
    id              UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id        TEXT        NOT NULL,
    -- CreateConversation's idempotency key ('' for none).
    request_id      TEXT        NOT NULL DEFAULT '',
    title           TEXT        NOT NULL DEFAULT '',
    archived        BOOLEAN     NOT NULL DEFAULT false,
    repo            TEXT        NOT NULL DEFAULT '',
    -- The summary of the messages up to summary_seq, which the model is sent instead of
    -- them once the conversation outgrew its context.
    summary         TEXT        NOT NULL DEFAULT '',
    summary_seq     BIGINT      NOT NULL DEFAULT 0,
    -- The seq of the last message.
    last_seq        BIGINT      NOT NULL DEFAULT 0,
    active_reply_id UUID,
    -- thefold.type.v1.Usage of every reply, summed (protobuf).
    usage           BYTEA,
    create_time     TIMESTAMPTZ NOT NULL DEFAULT now(),
    update_time     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX conversations_request ON conversations (owner_id, request_id) WHERE request_id <> '';
CREATE INDEX conversations_owner_update ON conversations (owner_id, update_time DESC, id DESC);

CREATE TABLE conversation_messages (
    id              UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    conversation_id UUID        NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq             BIGINT      NOT NULL,
    role            TEXT        NOT NULL CHECK (role IN ('user', 'assistant', 'tool_call', 'tool_result', 'system')),
    reply_id        UUID,
    -- SendMessage's idempotency key of a person's message ('' for none).
    request_id      TEXT        NOT NULL DEFAULT '',
    message         BYTEA       NOT NULL,
    create_time     TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (conversation_id, seq)
);
CREATE UNIQUE INDEX conversation_messages_request ON conversation_messages (conversation_id, request_id) WHERE request_id <> '';

-- A reply is a durable run (jobrun.Leases over this table): a RUNNING reply should have a
-- runner, and a dead runner's reply is resumed by another.
CREATE TABLE conversation_replies (
    id              UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    conversation_id UUID        NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    owner_id        TEXT        NOT NULL,
    message_id      UUID        NOT NULL,
    status          TEXT        NOT NULL CHECK (status IN ('running', 'completed', 'cancelled', 'failed')),
    status_reason   TEXT        NOT NULL DEFAULT '',
    -- The registry model asked for ('' lets the policy choose).
    model           TEXT        NOT NULL DEFAULT '',
    rounds          INTEGER     NOT NULL DEFAULT 0,
    usage           BYTEA,
    lease_id        UUID,
    lease_time      TIMESTAMPTZ,
    create_time     TIMESTAMPTZ NOT NULL DEFAULT now(),
    update_time     TIMESTAMPTZ NOT NULL DEFAULT now(),
    end_time        TIMESTAMPTZ
);
CREATE INDEX conversation_replies_runnable ON conversation_replies (lease_time) WHERE status = 'running';
CREATE INDEX conversation_replies_conversation ON conversation_replies (conversation_id);

-- The jobs and projects a conversation's tools started: their events come back into it.
CREATE TABLE conversation_links (
    kind            TEXT        NOT NULL CHECK (kind IN ('job', 'project')),
    target_id       UUID        NOT NULL,
    conversation_id UUID        NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    create_time     TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, target_id)
);
CREATE INDEX conversation_links_conversation ON conversation_links (conversation_id);

-- How far the notifier read the agent's events (one row): a restarted agent goes on from
-- there. A notice is keyed by its event (conversation_messages.request_id), so two replicas
-- reading the same events add it once.
CREATE TABLE conversation_notify (
    one      BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    after_id BIGINT  NOT NULL
);

-- A conversation's tool calls are audited beside the jobs' steps. The entry outlives the
-- conversation: no reference to it.
ALTER TABLE audit_log ALTER COLUMN job_id DROP NOT NULL;
ALTER TABLE audit_log ADD COLUMN conversation_id UUID;
CREATE INDEX audit_conversation ON audit_log (conversation_id) WHERE conversation_id IS NOT NULL;

-- +goose Down
DELETE FROM audit_log WHERE job_id IS NULL;
ALTER TABLE audit_log DROP COLUMN conversation_id;
ALTER TABLE audit_log ALTER COLUMN job_id SET NOT NULL;
DROP TABLE conversation_notify;
DROP TABLE conversation_links;
DROP TABLE conversation_replies;
DROP TABLE conversation_messages;
DROP TABLE conversations;
