-- PauseBuild stops a build where it is and ResumeBuild continues it: status 'paused'. A
-- paused build is not one of the leases' active statuses (pending, running), nor of
-- build_fence's: its worker's next renewal or write is refused (ErrLeaseLost), so the run
-- stops without failing the build, and no worker or reaper takes it until ResumeBuild sets
-- it pending again.
--
-- Every existing row passed the narrower check it replaces, so the widened one is added NOT
-- VALID: no scan of builds under the migration's lock; new and updated rows are checked all
-- the same.
--
-- The time a build spends paused is not the build's: the wall-time budget counts from
-- start_time less paused_ms, the paused spans that ended (pause_time is when the current one
-- began). Only PauseBuild and ResumeBuild write them, never the engine.

-- +goose Up
ALTER TABLE builds DROP CONSTRAINT builds_status_check;
ALTER TABLE builds ADD CONSTRAINT builds_status_check
    CHECK (status IN ('pending', 'running', 'paused', 'completed', 'failed', 'cancelled')) NOT VALID;
ALTER TABLE builds
    ADD COLUMN pause_time TIMESTAMPTZ,
    ADD COLUMN paused_ms  BIGINT NOT NULL DEFAULT 0;

-- +goose Down
-- The old constraint has no 'paused': a paused build is cancelled (nothing runs it, and
-- nothing could resume it), as CancelBuild would.
UPDATE builds SET status = 'cancelled', error = 'cancelled: paused when the builder schema was migrated down',
    end_time = now(), update_time = now(), lease_id = NULL, lease_time = NULL
    WHERE status = 'paused';
ALTER TABLE builds DROP COLUMN paused_ms, DROP COLUMN pause_time;
ALTER TABLE builds DROP CONSTRAINT builds_status_check;
ALTER TABLE builds ADD CONSTRAINT builds_status_check
    CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled'));
