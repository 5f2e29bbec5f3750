-- +goose Up
-- The kubernetes backend: a sandbox whose commands run in a pod of its own.
ALTER TABLE sandboxes DROP CONSTRAINT sandboxes_backend_check;
ALTER TABLE sandboxes ADD CONSTRAINT sandboxes_backend_check
    CHECK (backend IN ('docker', 'bwrap', 'local', 'kubernetes'));

-- +goose Down
-- Fails while a kubernetes sandbox's row is there (rows outlive their sandboxes).
ALTER TABLE sandboxes DROP CONSTRAINT sandboxes_backend_check;
ALTER TABLE sandboxes ADD CONSTRAINT sandboxes_backend_check
    CHECK (backend IN ('docker', 'bwrap', 'local'));
