-- +goose Up
-- MarkMemoriesUsed adds a use to each memory it marks, so a retry of a call whose answer was
-- lost would count the use twice. A call with a request_id leaves its mark here: a retry
-- with the same request_id finds it and returns the first call's answer without counting
-- again. Marks are only needed while a caller may retry, and go after a day.
CREATE TABLE use_marks (
    owner_id    TEXT        NOT NULL,
    request_id  TEXT        NOT NULL,
    marked_ids  UUID[]      NOT NULL DEFAULT '{}',
    create_time TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_id, request_id)
);
CREATE INDEX use_marks_create_time_idx ON use_marks (create_time);

-- +goose Down
DROP TABLE use_marks;
