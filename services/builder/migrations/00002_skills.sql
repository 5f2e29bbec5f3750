-- +goose Up
-- The skills resolved for a build's generations (INJECT phase), as the ai service's
-- SkillFragment messages in protojson: resolved once at init, so a resumed build injects
-- the same ones.
ALTER TABLE builds ADD COLUMN skills JSONB NOT NULL DEFAULT '[]';

-- +goose Down
ALTER TABLE builds DROP COLUMN skills;
