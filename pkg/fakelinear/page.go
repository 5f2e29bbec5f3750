package fakelinear

import (
	"encoding/base64"
	"errors"
	"sort"
	"strconv"
	"strings"
)

// defaultFirst is the page size when a query gives no first, as in Linear.
const defaultFirst = 50

// connection is a page of a Relay-style connection: nodes and pageInfo.
type connection[T any] struct {
	nodes []T
	info  *pageInfoResolver
}

func (c *connection[T]) Nodes() []T                  { return c.nodes }
func (c *connection[T]) PageInfo() *pageInfoResolver { return c.info }

type pageInfoResolver struct {
	hasNext, hasPrevious bool
	start, end           *string
}

func (p *pageInfoResolver) HasNextPage() bool     { return p.hasNext }
func (p *pageInfoResolver) HasPreviousPage() bool { return p.hasPrevious }
func (p *pageInfoResolver) StartCursor() *string  { return p.start }
func (p *pageInfoResolver) EndCursor() *string    { return p.end }

// paginate returns the page of items (in creation order) that args ask for: at most first
// (default 50) after the cursor after. node gives an item's seq, which its cursor encodes,
// and its resolver. A cursor stays valid when the item it names drops out of the list.
func paginate[E, R any](items []E, args pageArgs, node func(E) (int, R)) (*connection[R], error) {
	start := 0
	if args.After != nil {
		after, err := decodeCursor(*args.After)
		if err != nil {
			return nil, err
		}
		start = sort.Search(len(items), func(i int) bool { seq, _ := node(items[i]); return seq > after })
	}
	limit := defaultFirst
	if args.First != nil {
		if *args.First < 0 {
			return nil, errors.New("first must be a non-negative integer")
		}
		limit = int(*args.First)
	}
	end := min(start+limit, len(items))
	conn := &connection[R]{info: &pageInfoResolver{hasNext: end < len(items), hasPrevious: start > 0}}
	for i, item := range items[start:end] {
		seq, r := node(item)
		conn.nodes = append(conn.nodes, r)
		cursor := encodeCursor(seq)
		if i == 0 {
			conn.info.start = &cursor
		}
		conn.info.end = &cursor
	}
	return conn, nil
}

// where returns the items keep accepts, in order.
func where[T any](items []T, keep func(T) bool) []T {
	var out []T
	for _, item := range items {
		if keep(item) {
			out = append(out, item)
		}
	}
	return out
}

// Cursors are opaque to clients, as Linear's are.
const cursorPrefix = "fakelinear:"

func encodeCursor(seq int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.Itoa(seq)))
}

func decodeCursor(cursor string) (int, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err == nil && strings.HasPrefix(string(raw), cursorPrefix) {
		if seq, err := strconv.Atoi(strings.TrimPrefix(string(raw), cursorPrefix)); err == nil {
			return seq, nil
		}
	}
	return 0, errors.New("invalid cursor")
}
