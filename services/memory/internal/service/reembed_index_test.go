package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
)

// hnswIndex reports whether table has an HNSW index of model, and whether it is valid.
func hnswIndex(t *testing.T, e *env, table, model string) (exists, valid bool) {
	t.Helper()
	err := e.pool.QueryRow(context.Background(), `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = $1::regclass AND c.relname LIKE $1 || '\_hnsw\_%' AND pg_get_indexdef(c.oid) LIKE '%''' || $2 || '''%'`,
		table, model).Scan(&valid)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true, valid
}

// The new model's HNSW index is built after the switch, concurrently: a write issued while
// it builds returns without waiting for it, and searches of the new model find the
// memories meanwhile (by exact scan). The build is held by a transaction with an older
// snapshot (as a long report query would), which a concurrent build waits for before it
// makes the index valid; when the index was built inside the switch's transaction, writes
// waited for the whole build and the index was never seen invalid.
func TestReembedWritesGoOnWhileTheNewIndexBuilds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := start(t, reembedConfig(""))
	ids := make([]string, 6)
	for i, tp := range topics[:6] {
		ids[i] = e.store(t, e.alice, &memoryv1.StoreMemoryRequest{Content: tp.content, Repo: "acme/api"}).GetId()
	}
	e.ai.current.Store(2)
	findTop(t, e, topics[0].query, ids[0]) // sees local@2

	holder, err := pgx.ConnectConfig(ctx, e.pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close(context.Background()) })
	snap, err := holder.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snap.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.srv.Reembed(ctx) }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("the re-embedding ended (%v) without the new model's index ever being seen invalid after the switch: built inside it?", err)
		default:
		}
		var active string
		if err := e.pool.QueryRow(ctx, `SELECT model FROM embedding_state WHERE table_name = 'memories'`).Scan(&active); err != nil {
			t.Fatal(err)
		}
		if exists, valid := hnswIndex(t, e, "memories", "local@2"); active == "local@2" && exists && !valid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no switch with the new index building 30 s after the re-embedding started")
		}
	}

	// The switch has committed and the new index is building: writes go on.
	wctx, cancel := context.WithTimeout(e.alice, 10*time.Second)
	defer cancel()
	began := time.Now()
	mid, err := e.client.StoreMemory(wctx, &memoryv1.StoreMemoryRequest{Content: "Stored while the new index builds: the outbox relay skips events of aborted transactions.", Repo: "acme/api"})
	if err != nil {
		t.Fatalf("StoreMemory while the new index builds: %v", err)
	}
	if _, err := e.client.UpdateMemory(wctx, &memoryv1.UpdateMemoryRequest{Id: ids[2],
		Memory:     &memoryv1.Memory{Content: "The sandbox image bundles busybox and a copy of the Go toolchain."},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"content"}}}); err != nil {
		t.Fatalf("UpdateMemory while the new index builds: %v", err)
	}
	took := time.Since(began)
	if exists, valid := hnswIndex(t, e, "memories", "local@2"); !exists || valid {
		t.Fatalf("the new index was no longer building when the writes returned (exists %v, valid %v): the test proves nothing", exists, valid)
	}
	if m := mid.GetMemory().GetEmbeddingModel(); m != "local@2" {
		t.Fatalf("a memory stored after the switch has %s", m)
	}
	// Searches of the new model scan its vectors meanwhile.
	if m := findTop(t, e, topics[0].query, ids[0]); m != "local@2" {
		t.Fatalf("search during the build used %s", m)
	}
	findTop(t, e, "outbox relay aborted transactions", mid.GetMemory().GetId())
	findTop(t, e, "busybox Go toolchain", ids[2])
	t.Logf("a store and an update while the new index built: %s", took.Round(time.Millisecond))

	if err := snap.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the re-embedding did not end 60 s after the build was let go")
	}
	if exists, valid := hnswIndex(t, e, "memories", "local@2"); !exists || !valid {
		t.Fatalf("new index after the re-embedding: exists %v, valid %v", exists, valid)
	}
	if exists, _ := hnswIndex(t, e, "memories", "local@1"); exists {
		t.Fatal("the old model's index is still there")
	}
	findTop(t, e, "outbox relay aborted transactions", mid.GetMemory().GetId())
}

// An HNSW index left invalid by a concurrent build that failed, or never built (the
// process stopped between a switch and the build), is built by the next pass of the job,
// also in the process that had seen it built.
func TestReembedRebuildsABrokenIndex(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		breaks func(t *testing.T, e *env, index string)
	}{
		{"invalid after a failed concurrent build", func(t *testing.T, e *env, index string) {
			ctx := context.Background()
			var id, vec string
			if err := e.pool.QueryRow(ctx, `SELECT id::text, embedding::text FROM memories LIMIT 1`).Scan(&id, &vec); err != nil {
				t.Fatal(err)
			}
			def := `CREATE INDEX CONCURRENTLY ` + index + ` ON memories USING hnsw ((embedding::halfvec(384)) halfvec_cosine_ops)
				WHERE embedding_model = 'local@1' AND embedding_dims = 384`
			for _, q := range []string{`DROP INDEX ` + index, `UPDATE memories SET embedding = '[1,2]' WHERE id = '` + id + `'`, def,
				`UPDATE memories SET embedding = '` + vec + `' WHERE id = '` + id + `'`} {
				if _, err := e.pool.Exec(ctx, q); (err != nil) != (q == def) {
					t.Fatalf("%s: %v", q, err)
				}
			}
		}},
		{"never built", func(t *testing.T, e *env, index string) {
			if _, err := e.pool.Exec(context.Background(), `DROP INDEX `+index); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := start(t, reembedConfig(""))
			ids := make([]string, 4)
			for i, tp := range topics[:4] {
				ids[i] = e.store(t, e.alice, &memoryv1.StoreMemoryRequest{Content: tp.content, Repo: "acme/api"}).GetId()
			}
			if err := e.srv.Reembed(ctx); err != nil {
				t.Fatal(err)
			}
			c.breaks(t, e, "memories_hnsw_c66dc74b_384_h") // local@1/384's
			if _, valid := hnswIndex(t, e, "memories", "local@1"); valid {
				t.Fatal("the index is still valid")
			}
			if err := e.srv.Reembed(ctx); err != nil {
				t.Fatal(err)
			}
			if exists, valid := hnswIndex(t, e, "memories", "local@1"); !exists || !valid {
				t.Fatalf("index after the next pass: exists %v, valid %v", exists, valid)
			}
			findTop(t, e, topics[3].query, ids[3])
		})
	}
}
