package store

import (
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// What a search filters and scores its candidates by, held in this process beside the
// owner's vectors and full-text vectors (scan.go) and kept current the same way: every
// update of a memory takes the owner's next version (migration 00009), so a search that
// has checked the owner's version sees every change of these columns committed before it
// began. The in-process rankings then apply the request's filters and read the scores'
// columns here instead of asking PostgreSQL for them by primary key: on the latency
// benchmark's 100k memories that query was a third of a search (1.3 of 3.4 ms on the
// vector ranking's path), and two of a search's five round trips. SearchRows still reads
// the chosen memories from PostgreSQL, which has the last word on what exists and has
// expired.

// heldColumns are the columns of a heldRow, in readChanges's order after the full-text
// vector.
const heldColumns = `memory_type, importance, use_count, last_used_time, create_time, update_time, expire_time,
	repo, trust_level, tags, category`

// heldRow is one memory's columns that the filters (Filter.conds) and the scoring
// (scoreColumns) read, as stored.
type heldRow struct {
	typ, repo, trust, category string
	tags                       []string
	importance                 float64
	useCount                   int64
	lastUsed, expire           *time.Time
	created, updated           time.Time
}

// scanArgs are heldRow's fields in heldColumns order, to scan into.
func (h *heldRow) scanArgs() []any {
	return []any{&h.typ, &h.importance, &h.useCount, &h.lastUsed, &h.created, &h.updated, &h.expire,
		&h.repo, &h.trust, &h.tags, &h.category}
}

// row is the candidate Row of memory id that scanScored would read from PostgreSQL: a
// Memory with what it is scored by. A new one each time: the caller owns it.
func (h *heldRow) row(id string) *Row {
	return &Row{Memory: &memoryv1.Memory{Id: id, Type: parseType(h.typ), Importance: h.importance, UseCount: h.useCount,
		LastUsedTime: ts(h.lastUsed), CreateTime: timestamppb.New(h.created), UpdateTime: timestamppb.New(h.updated)}, HashOK: true}
}

// lets says whether f (with the owner's condition, which the held rows are of) lets the
// memory h through at now: Filter.conds in Go.
func (f Filter) lets(h *heldRow, now time.Time) bool {
	switch {
	case h.expire != nil && !h.expire.After(now):
		return false
	case !f.AnyRepo && h.repo != f.Repo:
		return false
	case len(f.Types) > 0 && !slices.ContainsFunc(f.Types, func(t typev1.MemoryType) bool { return typeNames[t] == h.typ }):
		return false
	case len(f.Trust) > 0 && !trustIn(f.Trust, h.trust):
		return false
	case len(f.StrategyTrust) > 0 && h.typ == "strategy" && !trustIn(f.StrategyTrust, h.trust):
		return false
	case len(f.Categories) > 0 && !slices.Contains(f.Categories, h.category):
		return false
	}
	for _, t := range f.Tags { // tags @> the filter's
		if !slices.Contains(h.tags, t) {
			return false
		}
	}
	return true
}

func trustIn(levels []memoryv1.MemoryTrustLevel, trust string) bool {
	return slices.ContainsFunc(levels, func(l memoryv1.MemoryTrustLevel) bool { return trustNames[l] == trust })
}

// heldRows is an owner's held rows by id, safe for concurrent use: searches read it while
// a search that found the owner's version newer applies the changes.
type heldRows struct {
	mu   sync.RWMutex
	rows map[string]*heldRow
}

func newHeldRows() *heldRows { return &heldRows{rows: map[string]*heldRow{}} }

func (h *heldRows) get(id string) *heldRow {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.rows[id]
}

func (h *heldRows) put(id string, r *heldRow) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rows[id] = r
}

func (h *heldRows) delete(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.rows, id)
}
