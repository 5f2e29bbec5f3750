package db

import (
	"errors"
	"slices"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQLSTATE codes a store reacts to. They are spelled here only (TestSQLStatesOnlyInPkgDB):
// a store asks IsUniqueViolation, never compares codes itself.
const (
	codeUniqueViolation = "23505"
	codeDuplicateTable  = "42P07"
	codeDeadlock        = "40P01"
)

// IsUniqueViolation reports whether err is (or wraps) a unique violation; with constraints,
// only a violation of one of the named constraints or unique indexes, so a store can tell
// "this name is taken" from another key's duplicate.
func IsUniqueViolation(err error, constraints ...string) bool {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || pg.Code != codeUniqueViolation {
		return false
	}
	return len(constraints) == 0 || slices.Contains(constraints, pg.ConstraintName)
}

// IsDuplicateTable reports whether err is (or wraps) "relation already exists" (42P07): a
// CREATE … IF NOT EXISTS that lost a race with the same statement in another session
// fails with it or with a unique violation on the catalog.
func IsDuplicateTable(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == codeDuplicateTable
}

// IsDeadlock reports whether err is (or wraps) "deadlock detected" (40P01): PostgreSQL
// ended this statement to break a cycle of waits, and the others went on.
func IsDeadlock(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == codeDeadlock
}
