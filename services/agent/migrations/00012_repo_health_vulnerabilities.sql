-- +goose Up
-- A health check's count of the known vulnerabilities its code calls (govulncheck), for the
-- trend beside the outdated dependencies; the vulnerabilities themselves are in detail.
ALTER TABLE repo_health_reports ADD COLUMN vulnerability_count INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE repo_health_reports DROP COLUMN vulnerability_count;
