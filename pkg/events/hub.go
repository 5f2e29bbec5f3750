package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of the Hub's options.
const (
	// defaultPollInterval is the fallback when a notification is lost (say, while the hub
	// reconnects); normally NOTIFY wakes the hub.
	defaultPollInterval = 2 * time.Second
	// defaultWatcherBuffer bounds the events a live watcher may have waiting; one that
	// falls further behind reads from its own cursor instead (see WithWatcherBuffer).
	defaultWatcherBuffer = 1024
	// Reconnection backoff of the listening session: doubled after each failure to
	// connect, back to the minimum once a session listened.
	minReconnectBackoff = 100 * time.Millisecond
	maxReconnectBackoff = 5 * time.Second
)

// Hub shares one LISTEN session and one reader among every watcher of a pool's schema.
//
// Without it each Watch stream would hold a database session of its own, and each
// notification would cost every stream its own reads, so 1,000 open streams would make
// 1,000 queries per event and starve every other RPC of the pool. With a Hub, a wake-up
// costs one read of the new events (after the highest id the hub has read), which the hub
// hands to each live watcher whose filter matches. A watcher that is behind reads history
// itself until it reaches the hub's position, then joins; one that falls more than its
// buffer behind is dropped from the fan-out and reads from its own cursor again, so a
// slow client never blocks the others nor grows memory without bound.
//
// We do not use github.com/jackc/pgxlisten for the listening session: its Listen sleeps
// a fixed minute after any failure with time.Sleep, which neither backs off, nor resets,
// nor returns when ctx ends, so a restarted database would leave watchers on the slow
// poll for a minute and a stopping service would wait as long; and its module is not
// served by the module proxy this project builds with. The loop below is the same
// LISTEN/WaitForNotification core with those two things fixed.
type Hub struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	poll   atomic.Int64 // time.Duration; atomic so tests may change it while Run runs
	buffer int

	watchers atomic.Int64 // Watch calls in progress

	mu      sync.Mutex
	ready   bool          // pos is known: Run is reading
	readyCh chan struct{} // closed when ready becomes true
	pos     int64         // every id <= pos is settled and was handed to subs
	subs    map[*sub]struct{}
}

// HubOption configures a Hub.
type HubOption func(*Hub)

// WithLogger sets where the hub reports failures of its listening session and reads.
// Without it they are discarded.
func WithLogger(l *slog.Logger) HubOption { return func(h *Hub) { h.log = l } }

// WithWatcherBuffer bounds how many matching events may wait for a live watcher whose
// callback is slow (n > 0). Past it the watcher leaves the fan-out and re-reads from its
// cursor, which costs it queries but costs the others nothing.
func WithWatcherBuffer(n int) HubOption {
	return func(h *Hub) {
		if n > 0 {
			h.buffer = n
		}
	}
}

// WithPollInterval sets how often the hub reads without having been notified (d > 0): the
// bound on delay when a notification is lost.
func WithPollInterval(d time.Duration) HubOption {
	return func(h *Hub) {
		if d > 0 {
			h.poll.Store(int64(d))
		}
	}
}

// NewHub returns a Hub over pool (opened with db.Open, so current_schema() is the
// service's). Call Run to start listening; until it runs, watchers fall back to polling.
func NewHub(pool *pgxpool.Pool, opts ...HubOption) *Hub {
	h := &Hub{
		pool:    pool,
		log:     slog.New(slog.DiscardHandler),
		buffer:  defaultWatcherBuffer,
		readyCh: make(chan struct{}),
		subs:    map[*sub]struct{}{},
	}
	h.poll.Store(int64(defaultPollInterval))
	for _, o := range opts {
		o(h)
	}
	return h
}

func (h *Hub) pollInterval() time.Duration { return time.Duration(h.poll.Load()) }

// Watchers returns the number of Watch calls in progress.
func (h *Hub) Watchers() int { return int(h.watchers.Load()) }

// Run listens for the schema's notifications and reads new events for the watchers until
// ctx ends, then returns ctx's error. Failures of the listening session or of a read are
// logged and retried: the session is re-established with backoff, and every
// (re)connection triggers a read, so whatever committed while nobody listened is
// delivered then.
func (h *Hub) Run(ctx context.Context) error {
	kick := make(chan struct{}, 1)
	kick <- struct{}{} // learn the position now, not at the first poll
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		h.listenLoop(ctx, kick)
	}()
	defer func() {
		<-listening
		h.stop()
	}()
	timer := time.NewTimer(h.pollInterval())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-kick:
		case <-timer.C:
		}
		if err := h.advance(ctx); err != nil && ctx.Err() == nil {
			h.log.ErrorContext(ctx, "events hub: read new events", "err", err)
		}
		timer.Reset(h.pollInterval())
	}
}

// listenLoop keeps a LISTEN session open until ctx ends.
func (h *Hub) listenLoop(ctx context.Context, kick chan<- struct{}) {
	backoff := minReconnectBackoff
	for {
		listened, err := h.listen(ctx, kick)
		if ctx.Err() != nil {
			return
		}
		if listened {
			// The session worked until now: this failure says nothing about the next
			// attempt, so retry soon rather than after the backoff of old failures.
			backoff = minReconnectBackoff
		}
		h.log.WarnContext(ctx, "events hub: listening session failed; reconnecting",
			"err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxReconnectBackoff)
	}
}

// listen runs one LISTEN session; listened reports whether it got as far as listening.
func (h *Hub) listen(ctx context.Context, kick chan<- struct{}) (listened bool, err error) {
	pc, err := h.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("events: hub: acquire connection: %w", err)
	}
	// A session that has LISTENed must never go back to the pool: it would hand its
	// notifications to the next user. Hijack takes it out; we close it ourselves.
	conn := pc.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	var channel *string
	if err := conn.QueryRow(ctx, "SELECT 'thefold_events_' || current_schema()").Scan(&channel); err != nil {
		return false, fmt.Errorf("events: hub: %w", err)
	}
	if channel == nil {
		return false, errors.New("events: hub: no current schema; open the pool with db.Open")
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{*channel}.Sanitize()); err != nil {
		return false, fmt.Errorf("events: hub: listen on %s: %w", *channel, err)
	}
	signal(kick)
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true, fmt.Errorf("events: hub: wait for notification: %w", err)
		}
		signal(kick)
	}
}

// signal leaves one wake-up in c: a burst of notifications costs one read, not one each.
func signal(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// advance reads every event after the hub's position and hands it to the live watchers.
func (h *Hub) advance(ctx context.Context) error {
	h.mu.Lock()
	ready, pos := h.ready, h.pos
	h.mu.Unlock()
	if !ready {
		latest, err := Latest(ctx, h.pool)
		if err != nil {
			return err
		}
		h.mu.Lock()
		h.pos, h.ready = latest, true
		close(h.readyCh)
		h.mu.Unlock()
		return nil
	}
	// No upper bound is needed: one statement sees a prefix of the ids (they become
	// visible in id order, see Append), so every id up to the last one read is settled.
	for {
		batch, horizon, err := readAfter(ctx, h.pool, Filter{}, pos, 0)
		if err != nil {
			return err
		}
		pos = h.dispatch(batch, horizon)
		if len(batch) < batchSize {
			return nil
		}
	}
}

// dispatch hands batch (the next events after h.pos, in id order) to every live watcher
// and moves h.pos past it, both under h.mu so a watcher joining sees a position that
// every event up to it was handed out for. It returns the new position.
func (h *Hub) dispatch(batch []Event, horizon int64) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if horizon > h.pos {
		// Retention removed events the hub had not read (it lagged by the whole
		// retention age): every watcher re-reads from its own cursor, where the
		// expiry is detected exactly.
		h.pos = horizon
		h.evictAll()
		return h.pos
	}
	if len(batch) == 0 {
		return h.pos
	}
	last := batch[len(batch)-1].ID
	for s := range h.subs {
		if !s.offer(batch, last, h.buffer) {
			delete(h.subs, s)
		}
	}
	h.pos = last
	return h.pos
}

// join adds s to the fan-out if the hub is reading and cursor has reached its position;
// otherwise it returns what the watcher needs to catch up: the hub's position if ready,
// and a channel closed once it is.
func (h *Hub) join(s *sub, cursor int64) (joined, ready bool, pos int64, readyCh <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ready || cursor < h.pos {
		return false, h.ready, h.pos, h.readyCh
	}
	s.reset(cursor)
	h.subs[s] = struct{}{}
	return true, true, h.pos, h.readyCh
}

func (h *Hub) leave(s *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, s)
}

// stop is called when Run ends: watchers fall back to reading and polling themselves.
func (h *Hub) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ready {
		h.ready = false
		h.readyCh = make(chan struct{})
	}
	h.evictAll()
}

func (h *Hub) evictAll() {
	for s := range h.subs {
		s.evict()
		delete(h.subs, s)
	}
}

// sub is a live watcher's mailbox: the events handed to it and not yet taken.
type sub struct {
	filter Filter
	wake   chan struct{} // one pending wake-up

	mu      sync.Mutex
	pending []Event
	upTo    int64 // every matching id <= upTo is in pending or was taken
	evicted bool  // dropped from the fan-out: read from the cursor again
}

func newSub(f Filter) *sub { return &sub{filter: f, wake: make(chan struct{}, 1)} }

func (s *sub) reset(cursor int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending, s.upTo, s.evicted = nil, cursor, false
}

// offer appends the events of batch that s wants; it reports false, dropping them all,
// when that would exceed limit. A watcher that matched nothing is not woken: its cursor
// moves with upTo, which it reads when it next wakes.
func (s *sub) offer(batch []Event, upTo int64, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.pending)
	for _, e := range batch {
		if s.filter.Match(e) {
			s.pending = append(s.pending, e)
		}
	}
	s.upTo = upTo
	if len(s.pending) > limit {
		s.pending, s.evicted = nil, true
		signal(s.wake)
		return false
	}
	if len(s.pending) > n {
		signal(s.wake)
	}
	return true
}

func (s *sub) evict() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending, s.evicted = nil, true
	signal(s.wake)
}

// take empties the mailbox. When evicted, upTo is meaningless (events were dropped).
func (s *sub) take() (pending []Event, upTo int64, evicted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pending, s.pending = s.pending, nil
	return pending, s.upTo, s.evicted
}
