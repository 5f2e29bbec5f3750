-- +goose Up
-- The task as the person wrote it (title and description) and the paths the agent's
-- context phase found relevant: every generation and fix sees the task, and outlines of
-- the paths are given to the model as reference files.
ALTER TABLE builds
    ADD COLUMN task_title       TEXT   NOT NULL DEFAULT '',
    ADD COLUMN task_description TEXT   NOT NULL DEFAULT '',
    ADD COLUMN context_paths    TEXT[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE builds DROP COLUMN context_paths, DROP COLUMN task_description, DROP COLUMN task_title;
