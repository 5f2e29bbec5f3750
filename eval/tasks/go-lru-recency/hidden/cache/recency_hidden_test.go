package cache_test

import (
	"testing"

	"example.com/lrucache/cache"
)

func TestHiddenGetRefreshesRecency(t *testing.T) {
	c := cache.New(2)
	c.Put("a", 1)
	c.Put("b", 2)
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Fatalf("Get(a) = %v, %v", v, ok)
	}
	c.Put("c", 3)
	if _, ok := c.Get("b"); ok {
		t.Error("b survived: it was the least recently used after Get(a)")
	}
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Errorf("a was evicted although it was read after b was put: Get(a) = %v, %v", v, ok)
	}
	if v, ok := c.Get("c"); !ok || v != 3 {
		t.Errorf("Get(c) = %v, %v", v, ok)
	}
}

func TestHiddenMissDoesNotDisturbOrder(t *testing.T) {
	c := cache.New(3)
	c.Put("x", 1)
	c.Put("y", 2)
	c.Put("z", 3)
	c.Get("missing")
	c.Get("x")
	c.Put("w", 4)
	if _, ok := c.Get("y"); ok {
		t.Error("y should have been evicted")
	}
	if c.Len() != 3 {
		t.Errorf("Len = %d, want 3", c.Len())
	}
}
