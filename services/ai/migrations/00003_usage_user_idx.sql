-- The per-user daily spend limit sums one user's ledger entries since the start of the UTC
-- day before every model call. cost_micros is included so the sum is an index-only scan.

-- +goose Up
CREATE INDEX usage_records_user_idx ON usage_records (user_id, create_time) INCLUDE (cost_micros);

-- +goose Down
DROP INDEX usage_records_user_idx;
