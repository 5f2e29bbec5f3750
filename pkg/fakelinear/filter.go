package fakelinear

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/graph-gophers/graphql-go"
)

// issueFilter is Linear's IssueFilter input (the subset in the schema); its fields
// combine with AND and an absent field does not filter.
type issueFilter struct {
	Project   *projectFilter
	State     *stateFilter
	Team      *teamFilter
	UpdatedAt *dateComparator
}

type teamFilter struct {
	ID  *comparator[graphql.ID]
	Key *comparator[string]
}

// projectFilter is NullableProjectFilter: null matches on whether the issue has a project.
type projectFilter struct {
	ID   *comparator[graphql.ID]
	Null *bool
}

type stateFilter struct {
	ID   *comparator[graphql.ID]
	Name *comparator[string]
	Type *comparator[string]
}

// matches reports whether issue i passes the filter; a nil filter passes everything.
func (f *issueFilter) matches(s *Server, i *issue) bool {
	if f == nil {
		return true
	}
	return f.Team.matches(s.findTeam(i.teamID)) &&
		f.State.matches(s.findState(i.stateID)) &&
		f.Project.matches(s.findProject(i.projectID)) &&
		f.UpdatedAt.matches(i.updatedAt)
}

func (f *teamFilter) matches(t *team) bool {
	return f == nil || f.ID.matches(t.id) && f.Key.matches(t.key)
}

func (f *stateFilter) matches(st *state) bool {
	return f == nil || f.ID.matches(st.id) && f.Name.matches(st.name) && f.Type.matches(st.typ)
}

// matches takes p nil for an issue in no project, which only null: true matches (and
// which an id comparator never matches).
func (f *projectFilter) matches(p *project) bool {
	if f == nil {
		return true
	}
	if f.Null != nil && *f.Null != (p == nil) {
		return false
	}
	if f.ID == nil {
		return true
	}
	return p != nil && f.ID.matches(p.id)
}

// comparator is IDComparator or StringComparator: every given constraint must hold.
type comparator[T ~string] struct {
	Eq  *T
	In  *[]T
	Neq *T
	Nin *[]T
}

func (c *comparator[T]) matches(v string) bool {
	if c == nil {
		return true
	}
	x := T(v)
	return (c.Eq == nil || *c.Eq == x) && (c.Neq == nil || *c.Neq != x) &&
		(c.In == nil || slices.Contains(*c.In, x)) && (c.Nin == nil || !slices.Contains(*c.Nin, x))
}

// dateComparator is DateComparator: every given bound must hold.
type dateComparator struct {
	Eq, Gt, Gte, Lt, Lte *dateTime
}

func (c *dateComparator) matches(t time.Time) bool {
	if c == nil {
		return true
	}
	holds := func(bound *dateTime, ok func(time.Time) bool) bool { return bound == nil || ok(bound.Time) }
	return holds(c.Eq, t.Equal) && holds(c.Gt, t.After) && holds(c.Lt, t.Before) &&
		holds(c.Gte, func(b time.Time) bool { return !t.Before(b) }) &&
		holds(c.Lte, func(b time.Time) bool { return !t.After(b) })
}

// dateTime is the DateTime and DateTimeOrDuration scalars: written as Linear writes them
// (UTC, milliseconds), read from RFC 3339. Linear also reads ISO 8601 durations
// ("-P2W"); the fake refuses them rather than guess.
type dateTime struct{ time.Time }

// ImplementsGraphQLType binds dateTime to both date scalars of the schema.
func (dateTime) ImplementsGraphQLType(name string) bool {
	return name == "DateTime" || name == "DateTimeOrDuration"
}

// UnmarshalGraphQL reads a date argument.
func (d *dateTime) UnmarshalGraphQL(input any) error {
	s, ok := input.(string)
	if !ok {
		return fmt.Errorf("a date must be a string, not %T", input)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return errors.New("fakelinear reads RFC 3339 dates only (no durations): " + s)
	}
	d.Time = t
	return nil
}

// MarshalJSON writes a date as Linear does: 2006-01-02T15:04:05.000Z.
func (d dateTime) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}
