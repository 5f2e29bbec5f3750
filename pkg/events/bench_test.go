package events_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/events"
)

// BenchmarkRPCLatency measures what an RPC of a service with open Watch streams pays: an
// Append+commit (a write RPC) followed by a small pool query (a read RPC), with no watcher
// and with 1,000 idle watchers (streams filtered on aggregates that never change). Each
// commit wakes the hub; if waking cost a read per watcher, those reads would queue for the
// pool ahead of the query. It prints the median and 99th percentile of both, in µs.
func BenchmarkRPCLatency(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) {
			pool, _ := dbtest.NewDatabase(b, schema, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			hub := events.NewHub(pool)
			hubDone := make(chan error, 1)
			go func() { hubDone <- hub.Run(ctx) }()
			defer func() { cancel(); <-hubDone }()

			latest, err := events.Latest(ctx, pool)
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan error, n)
			for i := range n {
				go func() {
					done <- hub.Watch(ctx, latest, events.Filter{AggregateID: fmt.Sprintf("idle-%d", i)},
						func(events.Event) error { return nil })
				}()
			}
			defer func() {
				cancel()
				for range n {
					<-done
				}
			}()
			for deadline := time.Now().Add(30 * time.Second); hub.Watchers() < n; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d watchers started", hub.Watchers(), n)
				}
			}

			var appendLat, queryLat []time.Duration
			e := events.Event{Stream: "task", AggregateID: "busy", Type: "task.updated", Payload: []byte("{}")}
			for b.Loop() {
				t0 := time.Now()
				tx, err := pool.Begin(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := events.Append(ctx, tx, e); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(ctx); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				var one int
				if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
					b.Fatal(err)
				}
				appendLat = append(appendLat, t1.Sub(t0))
				queryLat = append(queryLat, time.Since(t1))
			}
			b.ReportMetric(percentile(appendLat, 50), "append-p50-µs")
			b.ReportMetric(percentile(appendLat, 99), "append-p99-µs")
			b.ReportMetric(percentile(queryLat, 50), "query-p50-µs")
			b.ReportMetric(percentile(queryLat, 99), "query-p99-µs")
		})
	}
}

// percentile returns the p-th percentile of ds in microseconds.
func percentile(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[(len(s)-1)*p/100]) / float64(time.Microsecond)
}
