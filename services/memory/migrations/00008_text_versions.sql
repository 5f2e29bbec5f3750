-- +goose Up
-- The memory service's in-process full-text ranking (internal/tsindex, store/textscan.go)
-- holds each owner's full-text vectors beside the vectors and follows their changes the
-- same way (migration 00007), so a change of a row's search column must take the owner's
-- next version too. The service changes it only with the content, whose new embedding
-- already took one; this keeps the rule for any other update of the column.
DROP TRIGGER memories_version_update ON memories;
CREATE TRIGGER memories_version_update BEFORE UPDATE OF embedding, embedding_model, embedding_dims, search ON memories
    FOR EACH ROW EXECUTE FUNCTION memories_next_version();

-- +goose Down
DROP TRIGGER memories_version_update ON memories;
CREATE TRIGGER memories_version_update BEFORE UPDATE OF embedding, embedding_model, embedding_dims ON memories
    FOR EACH ROW EXECUTE FUNCTION memories_next_version();
