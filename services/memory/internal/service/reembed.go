package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/thefold/thefold/pkg/auth"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"

	"github.com/thefold/thefold/services/memory/internal/store"
)

// Embedding versions. Each table's stored vectors are of one active pair (model with its
// version, and size; store.EmbeddingState), and searches embed their query with it. The
// target is what ai answers for the configured model. When the two differ — the operator
// configured another model, or the ai service's built-in embedder has a new version — the
// re-embedding job (RunReembed) writes every row's vector of the target beside it, rows
// stored meanwhile get both, and when all rows have one the store switches the table to the
// target in one transaction. Until then searches use the old vectors; afterwards the new,
// and the old are gone (no grace period: going back is configuring the old model, e.g.
// "local@1", which re-embeds again). The target's HNSW index is built right after the
// switch, concurrently with writes (store.BuildIndexes); until it is valid, searches of the
// target scan its vectors exactly.

// embeddings is what the service knows of the tables' embedding pairs.
type embeddings struct {
	mu sync.Mutex
	// state is each table's state as last read.
	state map[string]store.EmbeddingState
	// checked is when a search last re-read a table's state.
	checked map[string]time.Time
	// target is what ai answers for the configured model (zero until known).
	target store.Pair
	// warned is the target that THEFOLD_MEMORY_REEMBED=off was last warned about, by table.
	warned map[string]store.Pair
	// kick wakes RunReembed when the target changes.
	kick chan struct{}
}

// reembedLock names the advisory lock held by the one replica re-embedding.
const reembedLock = "thefold.memory.reembed"

// observe notes p as what ai answers for the configured model, and wakes the
// re-embedding when that changed.
func (s *Server) observe(ctx context.Context, p store.Pair) {
	s.emb.mu.Lock()
	old := s.emb.target
	s.emb.target = p
	s.emb.mu.Unlock()
	if old == p {
		return
	}
	if old.Known() {
		s.log.InfoContext(ctx, "the embedding model changed", "configured", s.cfg.EmbedModel, "was", old.String(), "now", p.String())
	}
	select {
	case s.emb.kick <- struct{}{}:
	default:
	}
}

func (s *Server) targetPair() store.Pair {
	s.emb.mu.Lock()
	defer s.emb.mu.Unlock()
	return s.emb.target
}

// tableState is table's embedding state, read from the database the first time.
func (s *Server) tableState(ctx context.Context, table string) (store.EmbeddingState, error) {
	s.emb.mu.Lock()
	st, ok := s.emb.state[table]
	s.emb.mu.Unlock()
	if ok {
		return st, nil
	}
	return s.loadState(ctx, table)
}

// loadState reads table's embedding state from the database.
func (s *Server) loadState(ctx context.Context, table string) (store.EmbeddingState, error) {
	st, err := s.store.State(ctx, table)
	if err != nil {
		return st, err
	}
	if st.Active.Known() { // an empty table is asked again: its first row names the pair
		s.emb.mu.Lock()
		s.emb.state[table] = st
		s.emb.mu.Unlock()
	}
	return st, nil
}

// migrating reports whether table's rows are on another pair than the configured model's.
func migrating(st store.EmbeddingState, target store.Pair) bool {
	return st.Active.Known() && target.Known() && st.Active != target
}

// embedActive embeds text with table's active pair, falling back to the configured model
// (whose vectors a search then finds none of, until the switch) when ai cannot.
func (s *Server) embedActive(ctx context.Context, active store.Pair, text string) (store.Vector, error) {
	vecs, err := s.embedAs(ctx, active.Model, active.Dims, text)
	if err == nil && vecs[0].Pair() == active {
		return vecs[0], nil
	}
	s.log.WarnContext(ctx, "the ai service no longer embeds with the model the stored vectors have; vector search finds nothing until they are re-embedded",
		"active", active.String(), "err", err)
	vecs, err = s.embed(ctx, text)
	if err != nil {
		return store.Vector{}, err
	}
	return vecs[0], nil
}

// queryVector is the embedding of a search of table: of the pair its rows have.
func (s *Server) queryVector(ctx context.Context, table, text string) (store.Vector, error) {
	st, err := s.tableState(ctx, table)
	if err != nil {
		return store.Vector{}, err
	}
	if migrating(st, s.targetPair()) {
		return s.embedActive(ctx, st.Active, text)
	}
	vecs, err := s.embed(ctx, text)
	if err != nil {
		return store.Vector{}, err
	}
	if st.Active.Known() && vecs[0].Pair() != st.Active {
		// The first call to find that the configured model changed.
		return s.embedActive(ctx, st.Active, text)
	}
	return vecs[0], nil
}

// storeVectors are the embeddings of a row of table being stored: of the pair its rows
// have (searches find it now) and, while they are re-embedded for the configured model,
// of that model too (searches find it after the switch).
func (s *Server) storeVectors(ctx context.Context, table, text string) (store.Vector, *store.Vector, error) {
	st, err := s.tableState(ctx, table)
	if err != nil {
		return store.Vector{}, nil, err
	}
	vecs, err := s.embed(ctx, text)
	if err != nil {
		return store.Vector{}, nil, err
	}
	v := vecs[0]
	if !st.Active.Known() || v.Pair() == st.Active {
		return v, nil, nil
	}
	active, err := s.embedAs(ctx, st.Active.Model, st.Active.Dims, text)
	if err != nil || active[0].Pair() != st.Active {
		s.log.WarnContext(ctx, "the ai service no longer embeds with the model the stored vectors have; the row is found by vector after the switch",
			"active", st.Active.String(), "err", err)
		return v, nil, nil
	}
	if !s.cfg.reembed() {
		return active[0], nil, nil
	}
	return active[0], &v, nil
}

// switched reports whether table's active pair is no longer used (another replica
// switched it), re-reading the state at most once a second per table: a search that
// found no vector candidate asks.
func (s *Server) switched(ctx context.Context, table string, used store.Pair) bool {
	s.emb.mu.Lock()
	if time.Since(s.emb.checked[table]) < time.Second {
		s.emb.mu.Unlock()
		return false
	}
	s.emb.checked[table] = time.Now()
	s.emb.mu.Unlock()
	st, err := s.loadState(ctx, table)
	return err == nil && st.Active.Known() && st.Active != used
}

// RunReembed keeps every table's vectors on the configured model until ctx ends: at
// start, every interval, and at once when a call finds that the model changed.
func (s *Server) RunReembed(ctx context.Context, every time.Duration) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.emb.kick:
		}
		if err := s.Reembed(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "re-embedding: will try again", "in", every.String(), "err", err)
		}
		t.Reset(every)
	}
}

// The re-embedding calls ai.Embed as the memory service itself (auth.AsService): the work
// is the operator's (who changed the model), for no owner; the ai service records it under
// the service's name.

// Reembed runs the re-embedding once: it asks ai which model it embeds with (when not
// known yet), re-reads every table's state and, unless another replica holds the
// re-embedding lock, re-embeds the rows not on that model and switches each table to it.
// Cancelled, it stops between batches; run again, it continues where it stopped.
func (s *Server) Reembed(ctx context.Context) error {
	if !s.targetPair().Known() {
		if _, err := s.embed(auth.AsService(ctx, s.signer), "embedding model probe"); err != nil {
			return fmt.Errorf("asking the ai service which model it embeds with: %w", err)
		}
	}
	target := s.targetPair()
	for _, table := range store.Tables {
		if _, err := s.loadState(ctx, table); err != nil {
			return err
		}
	}
	unlock, ok, err := s.store.TryLock(ctx, reembedLock)
	if err != nil || !ok {
		return err
	}
	defer unlock()
	for _, table := range store.Tables {
		if err := s.reembedTable(ctx, table, target); err != nil {
			return fmt.Errorf("%s: %w", table, err)
		}
	}
	return nil
}

func (s *Server) reembedTable(ctx context.Context, table string, target store.Pair) error {
	// An index a concurrent build left invalid (it failed, or the server stopped during it),
	// or never built (this process stopped between a switch and its build), is built now.
	if err := s.buildIndexes(ctx, table); err != nil {
		return err
	}
	// No row of another pair (an empty table, or the steady state): the target is active.
	adopted, err := s.store.Adopt(ctx, table, target)
	if err != nil {
		return err
	}
	st, err := s.loadState(ctx, table)
	if err != nil {
		return err
	}
	if adopted {
		s.log.InfoContext(ctx, "embedding model", "table", table, "model", target.String())
		return nil
	}
	if st.Active == target {
		// Rows stored with the previous model after the switch, by a replica that had not
		// seen it yet.
		return s.fill(ctx, table, target, true)
	}
	if !s.cfg.reembed() {
		s.emb.mu.Lock()
		warn := s.emb.warned[table] != target
		if s.emb.warned == nil {
			s.emb.warned = map[string]store.Pair{}
		}
		s.emb.warned[table] = target
		s.emb.mu.Unlock()
		if warn {
			s.log.WarnContext(ctx, "the configured embedding model is not the stored vectors' and THEFOLD_MEMORY_REEMBED is off: searches and new rows keep the stored vectors' model",
				"table", table, "stored", st.Active.String(), "configured", target.String())
		}
		return nil
	}
	if err := s.store.SetTarget(ctx, table, target); err != nil {
		return err
	}
	done, total, err := s.store.Progress(ctx, table, target, "", "", false)
	if err != nil {
		return err
	}
	s.log.InfoContext(ctx, "re-embedding for a new embedding model; searches use the old one until every row has a new vector",
		"table", table, "from", st.Active.String(), "to", target.String(), "done", done, "total", total)
	for range 3 { // rows stored meanwhile without a new vector (by a replica that had not seen the target) are done on the next round
		if err := s.fill(ctx, table, target, false); err != nil {
			return err
		}
		start := time.Now()
		ok, err := s.store.Switch(ctx, table, target)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if _, err := s.loadState(ctx, table); err != nil {
			return err
		}
		s.log.InfoContext(ctx, "searches switched to the new embedding model; they scan its vectors until its HNSW index is built", "table", table,
			"from", st.Active.String(), "to", target.String(), "switch", time.Since(start).Round(time.Millisecond).String())
		// Writes go on during the build (CONCURRENTLY); a build that fails is done again on
		// the next pass.
		if err := s.buildIndexes(ctx, table); err != nil {
			return err
		}
		dropped, err := s.store.DropOtherIndexes(ctx, table, target)
		if err != nil {
			return err
		}
		if len(dropped) > 0 {
			s.log.InfoContext(ctx, "dropped the HNSW indexes of the previous embedding models", "table", table, "indexes", dropped)
		}
		if err := s.fill(ctx, table, target, true); err != nil {
			return err
		}
		start = time.Now()
		if err := s.store.Vacuum(ctx, table); err != nil {
			return err
		}
		s.log.InfoContext(ctx, "vacuumed after the switch", "table", table, "took", time.Since(start).Round(time.Millisecond).String())
		return nil
	}
	return nil
}

// buildIndexes builds the missing or invalid HNSW indexes of the pairs table has rows of
// (store.BuildIndexes).
func (s *Server) buildIndexes(ctx context.Context, table string) error {
	start := time.Now()
	built, err := s.store.BuildIndexes(ctx, table, s.cfg.indexMemory())
	if len(built) > 0 {
		s.log.InfoContext(ctx, "built HNSW indexes, concurrently with writes", "table", table, "indexes", built,
			"took", time.Since(start).Round(time.Millisecond).String())
	}
	return err
}

// fill embeds the rows of table that have no vector of target with the configured model,
// in batches: into the side table, or (inPlace, when target is active) into the rows. The
// work list is the database's, so a fill stopped anywhere continues where it stopped.
func (s *Server) fill(ctx context.Context, table string, target store.Pair, inPlace bool) error {
	var (
		after string
		n     int
	)
	start, logged := time.Now(), time.Now()
	for {
		rows, err := s.store.Pending(ctx, table, target, after, s.cfg.reembedBatch())
		if err != nil || len(rows) == 0 {
			if n > 0 && err == nil {
				s.log.InfoContext(ctx, "re-embedded", "table", table, "model", target.String(), "rows", n, "in_place", inPlace,
					"took", time.Since(start).Round(time.Millisecond).String())
			}
			return err
		}
		ids, texts := make([]string, len(rows)), make([]string, len(rows))
		for i, r := range rows {
			ids[i], texts[i] = r.ID, r.Text
		}
		vecs, err := s.embedAs(auth.AsService(ctx, s.signer), s.cfg.EmbedModel, 0, texts...)
		if err != nil {
			return err
		}
		if p := vecs[0].Pair(); p != target {
			s.observe(ctx, p)
			return fmt.Errorf("the ai service now embeds with %s, not %s: starting over", p, target)
		}
		if inPlace {
			err = s.store.SetVectors(ctx, table, ids, vecs)
		} else {
			err = s.store.SaveNext(ctx, table, ids, vecs)
		}
		if err != nil {
			return err
		}
		after, n = ids[len(ids)-1], n+len(rows)
		if time.Since(logged) >= 10*time.Second {
			logged = time.Now()
			s.log.InfoContext(ctx, "re-embedding", "table", table, "model", target.String(), "rows_so_far", n)
		}
	}
}

// embeddingStatus is GetStats' view of table's embeddings for the caller's scope, of
// total rows.
func (s *Server) embeddingStatus(ctx context.Context, table, owner, repo string, repoSet bool, total int64) (*memoryv1.EmbeddingStatus, error) {
	st, err := s.loadState(ctx, table)
	if err != nil {
		return nil, err
	}
	target := s.targetPair()
	if !target.Known() {
		target = st.Target // as the re-embedding replica recorded it
	}
	out := &memoryv1.EmbeddingStatus{ActiveModel: st.Active.Model, ActiveDimensions: int32(st.Active.Dims),
		TargetModel: target.Model, TargetDimensions: int32(target.Dims), Reembedded: total, Total: total, ReembedEnabled: s.cfg.reembed()}
	if migrating(st, target) {
		if out.Reembedded, out.Total, err = s.store.Progress(ctx, table, target, owner, repo, repoSet); err != nil {
			return nil, err
		}
	}
	return out, nil
}
