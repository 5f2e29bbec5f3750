-- Which builder process runs a build, and how often one claimed it: with several builder
-- replicas sharing the queue, the build says where it ran (and a take-over after a crash
-- shows as a second claim). Written by Claim only.

-- +goose Up
ALTER TABLE builds
    ADD COLUMN instance TEXT NOT NULL DEFAULT '',
    ADD COLUMN claims   INT  NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE builds DROP COLUMN claims, DROP COLUMN instance;
