// Package cache holds an in-memory LRU cache.
package cache

import "container/list"

// LRU is a fixed-capacity cache that evicts the least recently used entry. It is not safe
// for concurrent use.
type LRU struct {
	capacity int
	order    *list.List // front: most recently used
	items    map[string]*list.Element
}

type entry struct {
	key   string
	value any
}

// New makes an LRU holding at most capacity entries (at least 1).
func New(capacity int) *LRU {
	if capacity < 1 {
		capacity = 1
	}
	return &LRU{capacity: capacity, order: list.New(), items: map[string]*list.Element{}}
}

// Get returns the value for key and whether it was there.
func (c *LRU) Get(key string) (any, bool) {
	el, ok := c.items[key]
	if !ok {
		return nil, false
	}
	return el.Value.(*entry).value, true
}

// Put sets key's value, evicting the least recently used entry when the cache is full.
func (c *LRU) Put(key string, value any) {
	if el, ok := c.items[key]; ok {
		el.Value.(*entry).value = value
		c.order.MoveToFront(el)
		return
	}
	if c.order.Len() >= c.capacity {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*entry).key)
	}
	c.items[key] = c.order.PushFront(&entry{key: key, value: value})
}

// Len is the number of entries.
func (c *LRU) Len() int { return c.order.Len() }
