package db

import (
	"reflect"
	"testing"
	"time"
)

func TestConds(t *testing.T) {
	var none Conds
	if none.Where() != "" || none.And() != "true" || len(none.Args) != 0 {
		t.Errorf("no conditions: %q %v", none.Where(), none.Args)
	}
	at := time.Unix(10, 0)
	var c Conds
	c.Add("owner_id = $%d", "u1")
	c.Add("NOT success")
	c.Add("(create_time, id) < ($%d, $%d::uuid)", at, "id-1")
	limit := c.Arg(51)
	var twice Conds
	twice.Add("id > $%d", 7)
	twice.Add("(scope = $%[1]d OR prev_scope = $%[1]d)", "s")
	if want := " WHERE id > $1 AND (scope = $2 OR prev_scope = $2)"; twice.Where() != want || !reflect.DeepEqual(twice.Args, []any{7, "s"}) {
		t.Errorf("a value named twice: %q %v", twice.Where(), twice.Args)
	}
	if want := " WHERE owner_id = $1 AND NOT success AND (create_time, id) < ($2, $3::uuid)"; c.Where() != want {
		t.Errorf("Where = %q, want %q", c.Where(), want)
	}
	if want := "owner_id = $1 AND NOT success AND (create_time, id) < ($2, $3::uuid)"; c.And() != want {
		t.Errorf("And = %q, want %q", c.And(), want)
	}
	if limit != "$4" || !reflect.DeepEqual(c.Args, []any{"u1", at, "id-1", 51}) {
		t.Errorf("limit %s, args %v", limit, c.Args)
	}
}
