-- +goose Up
-- A result counts once per (job, skill): the primary key of skill_results. That holds only
-- if one job has one spelling, so job ids are canonical UUIDs from now on (LogResult checks
-- the job with the agent service and stores its id lower-case): "ABC…" and "abc…" can no
-- longer count one job twice. NOT VALID keeps the free-form ids logged before this
-- change, whose counts are already in the skills' totals.
ALTER TABLE skill_results ADD CONSTRAINT skill_results_job_id_canonical
    CHECK (job_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$') NOT VALID;

-- +goose Down
ALTER TABLE skill_results DROP CONSTRAINT skill_results_job_id_canonical;
