package events_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/thefold/thefold/pkg/events"
)

// TestWatchSeesEventsMovedOutOfScope: a watcher of a repository sees a task move out of it
// (the event's previous scope), whether it reads the move from history (SQL) or live (the
// hub's in-memory filter), and then nothing more of that task.
func TestWatchSeesEventsMovedOutOfScope(t *testing.T) {
	t.Parallel()
	moved := func(aggregate, from, to string) events.Event {
		e := ev("task", aggregate, "alice", to, "task.updated")
		e.PrevScope = from
		return e
	}
	es := []events.Event{
		ev("task", "t1", "alice", "repoA", "task.created"), // 0
		moved("t1", "repoA", "repoB"),                      // 1
		ev("task", "t1", "alice", "repoB", "task.updated"), // 2: gone from repoA
		ev("task", "t2", "alice", "repoA", "task.created"), // 3
		moved("t3", "repoC", "repoC"),                      // 4: the same scope is no move
		moved("t1", "repoA", "repoC"),                      // 5
		ev("task", "t9", "alice", "repoB", "task.created"), // 6
	}
	// Each list ends with the last event its filter matches, so a stray match shows.
	filters := []struct {
		name string
		f    events.Filter
		want []int
	}{
		{"old scope", events.Filter{Scope: "repoA"}, []int{0, 1, 3, 5}},
		{"new scope", events.Filter{Scope: "repoB"}, []int{1, 2, 6}},
		{"old scope and aggregate", events.Filter{Scope: "repoA", AggregateID: "t1"}, []int{0, 1, 5}},
		{"same scope", events.Filter{Scope: "repoC"}, []int{4, 5}},
	}
	for _, mode := range []string{"history", "live"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			pool := newPool(t)
			hub := hubFor(t, pool)
			var ids []int64
			if mode == "history" {
				ids = appendCommitted(t, pool, es...)
			}
			ws := make([]*watch, len(filters))
			for i, c := range filters {
				ws[i] = startWatch(t, pool, 0, c.f)
			}
			if mode == "live" {
				// Append once every watcher follows the hub, so the hub's filter decides.
				deadline := time.Now().Add(10 * time.Second)
				for hub.LiveWatchers() < len(filters) {
					if time.Now().After(deadline) {
						t.Fatalf("%d of %d watchers live", hub.LiveWatchers(), len(filters))
					}
					time.Sleep(5 * time.Millisecond)
				}
				ids = appendCommitted(t, pool, es...)
			}
			for i, c := range filters {
				var want []int64
				for _, k := range c.want {
					want = append(want, ids[k])
				}
				got := ws[i].count(t, len(want))
				if diff := cmp.Diff(want, eventIDs(got)); diff != "" {
					t.Errorf("%s (-want +got):\n%s", c.name, diff)
				}
				for _, e := range got {
					switch e.ID {
					case ids[1]:
						if e.PrevScope != "repoA" {
							t.Errorf("%s: moved event has PrevScope %q, want repoA", c.name, e.PrevScope)
						}
					case ids[4]:
						if e.PrevScope != "" {
							t.Errorf("%s: unmoved event has PrevScope %q, want empty", c.name, e.PrevScope)
						}
					}
				}
			}
		})
	}
}

// TestFilterMatch is the in-memory filter the hub's fan-out uses.
func TestFilterMatch(t *testing.T) {
	t.Parallel()
	e := events.Event{Stream: "task", AggregateID: "t1", OwnerID: "alice", Scope: "repoB", PrevScope: "repoA"}
	cases := []struct {
		f    events.Filter
		want bool
	}{
		{events.Filter{}, true},
		{events.Filter{Stream: "task", AggregateID: "t1", OwnerID: "alice", Scope: "repoB"}, true},
		{events.Filter{Scope: "repoA"}, true},
		{events.Filter{Scope: "repoA", OwnerID: "bob"}, false},
		{events.Filter{Scope: "repoC"}, false},
		{events.Filter{Stream: "build"}, false},
		{events.Filter{AggregateID: "t2"}, false},
	}
	for _, c := range cases {
		if got := c.f.Match(e); got != c.want {
			t.Errorf("%+v.Match = %v, want %v", c.f, got, c.want)
		}
	}
	unmoved := events.Event{Scope: "repoB"}
	if (events.Filter{Scope: ""}).Match(unmoved) != true || (events.Filter{Scope: "x"}).Match(unmoved) {
		t.Error("an event without PrevScope matches only its own scope")
	}
}
