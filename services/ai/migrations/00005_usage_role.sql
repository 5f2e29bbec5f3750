-- The sub-agent a call was for (a SubAgentRole number; 0 for every call that is not one of
-- RunSubAgents' roles): the ledger files each role's call under it and GetUsage groups by it.
--
-- A constant default adds the column without rewriting the table. The check is added NOT
-- VALID so that adding it does not scan the ledger under the migration's lock: every
-- existing row holds the default 0, and new rows are checked all the same.

-- +goose Up
ALTER TABLE usage_records ADD COLUMN role SMALLINT NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD CONSTRAINT usage_records_role_check CHECK (role >= 0) NOT VALID;

-- +goose Down
ALTER TABLE usage_records DROP COLUMN role;
