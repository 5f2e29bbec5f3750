-- A task may belong to an agent project (agent ProjectService), which plans its tasks from
-- the project's request text: source 'project'. The project lives in the agent's schema, so
-- project_id is a reference by value (a UUID in canonical text, '' for none), like job_id,
-- not a foreign key.

-- +goose Up
ALTER TABLE tasks ADD COLUMN project_id TEXT NOT NULL DEFAULT '';

ALTER TABLE tasks DROP CONSTRAINT tasks_source_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_source_check
    CHECK (source IN ('manual', 'api', 'github', 'linear', 'chat', 'healing', 'project'));

-- ListTasks by project, paged like the other filters (00001); most tasks have no project.
CREATE INDEX tasks_owner_project_page_idx ON tasks (owner_id, project_id, create_time DESC, id DESC)
    WHERE project_id <> '';

-- +goose Down
DROP INDEX tasks_owner_project_page_idx;
-- The old constraint has no 'project': such tasks become 'api', what the agent created its
-- planned tasks as before (the project they belonged to goes with the column below).
UPDATE tasks SET source = 'api' WHERE source = 'project';
ALTER TABLE tasks DROP CONSTRAINT tasks_source_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_source_check
    CHECK (source IN ('manual', 'api', 'github', 'linear', 'chat', 'healing'));
ALTER TABLE tasks DROP COLUMN project_id;
