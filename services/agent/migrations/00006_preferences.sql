-- +goose Up
-- A person's preferences (PreferencesService): a row once they changed one; a person
-- without a row has the defaults, which are the columns' defaults. Enum values are kept by
-- their stored names (protoenum), default_models as a JSON object of purpose → registry
-- model id. A job keeps the preferences it started under in its own document
-- (Job.preferences), so a change here applies to the jobs started after it.
CREATE TABLE user_preferences (
    user_id             TEXT        PRIMARY KEY,
    sub_agents_enabled  BOOLEAN     NOT NULL DEFAULT false,
    sub_agent_merge     TEXT        NOT NULL DEFAULT 'concatenate' CHECK (sub_agent_merge IN ('concatenate', 'ai_merge')),
    budget_mode         TEXT        NOT NULL DEFAULT 'balanced' CHECK (budget_mode IN ('balanced', 'quality_first', 'aggressive_save')),
    default_models      JSONB       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(default_models) = 'object'),
    -- The caps of a job whose StartTask gives none (0: the server's default).
    job_max_tokens      BIGINT      NOT NULL DEFAULT 0 CHECK (job_max_tokens >= 0),
    job_max_cost_micros BIGINT      NOT NULL DEFAULT 0 CHECK (job_max_cost_micros >= 0),
    job_max_wall_time   INTERVAL    NOT NULL DEFAULT '0' CHECK (job_max_wall_time >= '0'),
    -- Which of a job's moments are posted to the person's integrations (the notice
    -- deliveries read them when they are queued).
    notify_review_ready   BOOLEAN   NOT NULL DEFAULT true,
    notify_job_completed  BOOLEAN   NOT NULL DEFAULT true,
    notify_job_failed     BOOLEAN   NOT NULL DEFAULT true,
    notify_clarification  BOOLEAN   NOT NULL DEFAULT true,
    update_time         TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE user_preferences;
