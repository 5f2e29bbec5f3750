-- +goose Up
-- The scopes of the credential that sent a reply's message (an API key's; empty for a full
-- login or an integration): the reply's tools may do no more than they allow.
ALTER TABLE conversation_replies ADD COLUMN scopes TEXT[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE conversation_replies DROP COLUMN scopes;
