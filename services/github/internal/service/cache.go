package service

import (
	"container/list"
	"context"
	"sync"
)

// cache keeps the n most recently used values by key and computes a missing one once, however
// many callers ask for it at the same time (the others wait for the first). A failed
// computation is not kept.
type cache[V any] struct {
	mu    sync.Mutex
	n     int
	order *list.List // of *cacheEntry[V], most recent first
	byKey map[string]*list.Element
}

type cacheEntry[V any] struct {
	key   string
	done  chan struct{}
	value V
	err   error
}

func newCache[V any](n int) *cache[V] {
	return &cache[V]{n: n, order: list.New(), byKey: map[string]*list.Element{}}
}

// get returns the value of key, computing it with fill when absent.
func (c *cache[V]) get(ctx context.Context, key string, fill func() (V, error)) (V, error) {
	c.mu.Lock()
	if el, ok := c.byKey[key]; ok {
		c.order.MoveToFront(el)
		e := el.Value.(*cacheEntry[V])
		c.mu.Unlock()
		select {
		case <-e.done:
			if e.err == nil {
				return e.value, nil
			}
			// The computation this caller waited for failed: compute again.
			return c.get(ctx, key, fill)
		case <-ctx.Done():
			var zero V
			return zero, ctx.Err()
		}
	}
	e := &cacheEntry[V]{key: key, done: make(chan struct{})}
	c.byKey[key] = c.order.PushFront(e)
	for c.order.Len() > c.n {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*cacheEntry[V]).key)
	}
	c.mu.Unlock()

	e.value, e.err = fill()
	if e.err != nil {
		c.mu.Lock()
		if el, ok := c.byKey[key]; ok && el.Value == e {
			c.order.Remove(el)
			delete(c.byKey, key)
		}
		c.mu.Unlock()
	}
	close(e.done)
	return e.value, e.err
}
