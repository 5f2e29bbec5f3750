-- PlanTaskOrder takes a request_id too: a retry returns the first answer, which is more than
-- the task ids a create records (positions, complexities, the model's reasons). It shares
-- create_requests so that one request id names one request per owner, whatever the RPC.

-- +goose Up
-- The answer as a tasks.v1.PlanTaskOrderResponse in protobuf's binary form: field numbers,
-- not names, so a recorded answer survives renames in the API. NULL for creates.
ALTER TABLE create_requests ADD COLUMN response BYTEA;

-- +goose Down
ALTER TABLE create_requests DROP COLUMN response;
