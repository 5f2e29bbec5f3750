package store

import (
	"testing"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

// TestEveryEnumValueStores: the stored names are CHECK-constrained in the migrations, so
// a value added to the contract must be added there too; this fails until it is. Each
// value is written, read back and decoded from its event.
func TestEveryEnumValueStores(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	var want []*tasksv1.Task
	for v := range tasksv1.TaskSource_name {
		src := tasksv1.TaskSource(v)
		if src == tasksv1.TaskSource_TASK_SOURCE_UNSPECIFIED {
			continue
		}
		want = append(want, mustCreate(t, s, task(alice, "local/demo", SourceName(src), func(tk *tasksv1.Task) { tk.Source = src })))
	}
	for v := range tasksv1.TaskStatus_name {
		st := tasksv1.TaskStatus(v)
		if st == tasksv1.TaskStatus_TASK_STATUS_UNSPECIFIED {
			continue
		}
		want = append(want, mustCreate(t, s, task(alice, "local/demo", StatusName(st), func(tk *tasksv1.Task) { tk.Status = st })))
	}
	if n, m := len(want), len(tasksv1.TaskSource_name)+len(tasksv1.TaskStatus_name)-2; n != m {
		t.Fatalf("created %d tasks, want %d", n, m)
	}
	events := allEvents(t, pool)
	for i, w := range want {
		got, err := s.Get(ctx, alice, w.Id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Source != w.Source || got.Status != w.Status {
			t.Errorf("%s: read back source %v status %v, want %v %v", w.Title, got.Source, got.Status, w.Source, w.Status)
		}
		if ev := events[i].Task; ev.Source != w.Source || ev.Status != w.Status {
			t.Errorf("%s: event has source %v status %v, want %v %v", w.Title, ev.Source, ev.Status, w.Source, w.Status)
		}
	}
}
