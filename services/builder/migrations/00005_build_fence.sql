-- +goose Up
-- A running build's change is one batch in one round trip, whose statements PostgreSQL runs
-- in one implicit transaction: the lease fence must fail on the server, so that a fenced-out
-- write leaves nothing (a check made by the client after the UPDATE came back would come too
-- late). build_fence locks the build's row and raises TF001 unless lease holds it.
-- +goose StatementBegin
CREATE FUNCTION build_fence(build UUID, lease UUID) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM builds WHERE id = build AND lease_id = lease AND status IN ('pending', 'running') FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'build % is not held by lease %', build, lease USING ERRCODE = 'TF001';
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION build_fence(UUID, UUID);
