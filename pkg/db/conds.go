package db

import (
	"fmt"
	"strings"
)

// Conds builds the WHERE clause of a filtered query and its arguments, numbering the
// placeholders as conditions are added, so a query has only the conditions its filter
// sets (and PostgreSQL a plan for that shape):
//
//	var c db.Conds
//	c.Add("owner_id = $%d", owner)
//	if repo != "" {
//		c.Add("repo = $%d", repo)
//	}
//	q := "SELECT … FROM builds" + c.Where() + " ORDER BY id DESC LIMIT " + c.Arg(limit)
//	rows, err := pool.Query(ctx, q, c.Args...)
type Conds struct {
	conds []string
	// Args are the values of the placeholders, in order.
	Args []any
}

// Add appends the condition cond, in which each %d is replaced by the placeholder number
// of the next of vs ("(create_time, id) < ($%d, $%d::uuid)" takes two values, "NOT
// success" none). cond is a format string: a literal % is written %%, and %[1]d names the
// first value's placeholder again ("(scope = $%[1]d OR prev_scope = $%[1]d)" takes one).
func (c *Conds) Add(cond string, vs ...any) {
	nums := make([]any, len(vs))
	for i, v := range vs {
		c.Args = append(c.Args, v)
		nums[i] = len(c.Args)
	}
	c.conds = append(c.conds, fmt.Sprintf(cond, nums...))
}

// Arg appends v and returns its placeholder ("$3"), for LIMIT and the like.
func (c *Conds) Arg(v any) string {
	c.Args = append(c.Args, v)
	return fmt.Sprintf("$%d", len(c.Args))
}

// Where returns " WHERE a AND b …", or "" when there are no conditions.
func (c *Conds) Where() string {
	if len(c.conds) == 0 {
		return ""
	}
	return " WHERE " + c.And()
}

// And returns "a AND b …" ("true" when there are no conditions), for a query that places
// the conditions itself (in a subquery, or twice in a UNION).
func (c *Conds) And() string {
	if len(c.conds) == 0 {
		return "true"
	}
	return strings.Join(c.conds, " AND ")
}
