-- +goose Up
-- What people told a build while it ran (AddGuidance), oldest first, as the contract's
-- BuildGuidance messages in protojson: every generation and fix after one arrived is told
-- it. guidance_request_ids are the request_ids of the AddGuidance calls that added them, so
-- a retry of one adds nothing again. Written only by AddGuidance, never by the engine's
-- writes of the build.
ALTER TABLE builds
    ADD COLUMN guidance             JSONB  NOT NULL DEFAULT '[]',
    ADD COLUMN guidance_request_ids TEXT[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE builds DROP COLUMN guidance_request_ids, DROP COLUMN guidance;
