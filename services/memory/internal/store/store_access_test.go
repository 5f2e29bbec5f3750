package store

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/db/dbtest"

	"github.com/thefold/thefold/services/memory/migrations"
)

// Accesses recorded in the background are counted, every one, and Get and List on the
// same store see them at once; a failed recording is reported.
func TestRecordAccessLater(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDatabase(t, "memory", migrations.FS, DBOptions()...)
	s := New(pool)
	for i := range 2 {
		insertTestMemory(t, s, i)
	}
	list, err := s.List(context.Background(), "alice", Filter{AnyRepo: true}, time.Time{}, "", 10)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %v %v", list, err)
	}
	ids := []string{list[0].GetId(), list[1].GetId()}
	var failures atomic.Int32
	failed := func(error) { failures.Add(1) }
	const n = 3 * maxAccessesInFlight // beyond the slots: some are written at once
	for range n {
		s.RecordAccessLater(context.Background(), "alice", ids, failed)
	}
	got, err := s.Get(context.Background(), "alice", ids[0])
	if err != nil || got.GetAccessCount() != n || got.GetLastAccessedTime() == nil || failures.Load() != 0 {
		t.Fatalf("after %d accesses (%d failed): %v %v", n, failures.Load(), got, err)
	}
	if list, err = s.List(context.Background(), "alice", Filter{AnyRepo: true}, time.Time{}, "", 10); err != nil || list[1].GetAccessCount() != n {
		t.Fatalf("list after %d accesses: %v %v", n, list, err)
	}
	// Another owner's ids count nothing; a malformed id fails the write, reported.
	s.RecordAccessLater(context.Background(), "bob", ids, failed)
	s.RecordAccessLater(context.Background(), "alice", []string{"not-a-uuid"}, failed)
	if got, err = s.Get(context.Background(), "alice", ids[0]); err != nil || got.GetAccessCount() != n || failures.Load() != 1 {
		t.Fatalf("after bob's and a malformed recording: %d accesses, %d failures, %v", got.GetAccessCount(), failures.Load(), err)
	}
}
