-- +goose Up
-- A job event's status payload is named status_change, as in every other service's events
-- (it was status_changed). Stored payloads are protojson with proto field names; rename the
-- key so jobs watched from before the rename keep their status changes.
UPDATE events
SET payload = convert_to(replace(convert_from(payload, 'UTF8'), '"status_changed":', '"status_change":'), 'UTF8')
WHERE stream = 'job' AND position('"status_changed":' IN convert_from(payload, 'UTF8')) > 0;

-- +goose Down
UPDATE events
SET payload = convert_to(replace(convert_from(payload, 'UTF8'), '"status_change":', '"status_changed":'), 'UTF8')
WHERE stream = 'job' AND position('"status_change":' IN convert_from(payload, 'UTF8')) > 0;
