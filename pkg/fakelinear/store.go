package fakelinear

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// The store. Each list is in creation order, Linear's default (createdAt) order. What is
// paged has a seq, its place in that order, which its cursor encodes.

type user struct {
	id, name, email string
}

type team struct {
	seq           int
	id, key, name string
	issueCount    int
}

type state struct {
	seq                   int
	id, teamID, name, typ string
}

type project struct {
	id, name string
}

type issue struct {
	seq                             int
	id, identifier, teamID, stateID string
	projectID, title, description   string
	priority                        int
	createdAt, updatedAt            time.Time
}

type relation struct {
	seq                         int
	id, issueID, relatedID, typ string
}

type comment struct {
	id, issueID, body string
	user              *user
	createdAt         time.Time
}

// nextSeq returns the next creation-order number.
func (s *Server) nextSeq() int {
	s.seq++
	return s.seq
}

// tick returns the time of a change: now at Linear's millisecond precision, and strictly
// after the previous change so updatedAt filters are exact even within a millisecond.
func (s *Server) tick() time.Time {
	t := time.Now().UTC().Truncate(time.Millisecond)
	if !t.After(s.lastTime) {
		t = s.lastTime.Add(time.Millisecond)
	}
	s.lastTime = t
	return t
}

// findTeam, findState, findProject and findIssue look an entity up by ID (an issue also
// by identifier); nil when there is none.
func (s *Server) findTeam(id string) *team {
	for _, t := range s.teams {
		if t.id == id {
			return t
		}
	}
	return nil
}

func (s *Server) findState(id string) *state {
	for _, st := range s.states {
		if st.id == id {
			return st
		}
	}
	return nil
}

func (s *Server) findProject(id string) *project {
	for _, p := range s.projects {
		if p.id == id {
			return p
		}
	}
	return nil
}

func (s *Server) findIssue(idOrIdentifier string) *issue {
	for _, i := range s.issues {
		if i.id == idOrIdentifier || i.identifier == idOrIdentifier {
			return i
		}
	}
	return nil
}

// mustFind panics with a test's mistake when v is nil.
func mustFind[T any](v *T, kind, id string) *T {
	if v == nil {
		panic(fmt.Sprintf("fakelinear: no %s %q", kind, id))
	}
	return v
}

// issueURL is the web address Linear gives an issue.
func issueURL(identifier string) string {
	return "https://linear.app/" + urlKey + "/issue/" + identifier
}

// snapshot is an issue as the read-back and webhook helpers return it.
func (s *Server) snapshot(i *issue) Issue {
	st := s.findState(i.stateID)
	return Issue{
		ID: i.id, Identifier: i.identifier, Title: i.title, Description: i.description,
		URL: issueURL(i.identifier), Priority: i.priority,
		State:  State{ID: st.id, Name: st.name, Type: st.typ},
		TeamID: i.teamID, TeamKey: s.findTeam(i.teamID).key, ProjectID: i.projectID,
		CreatedAt: i.createdAt, UpdatedAt: i.updatedAt,
	}
}

// teamState returns a state of the team, refusing (as Linear does) one of another team.
func (s *Server) teamState(teamID, stateID string) (*state, error) {
	st := s.findState(stateID)
	if st == nil || st.teamID != teamID {
		return nil, fmt.Errorf("workflow state %q is not a state of the issue's team", stateID)
	}
	return st, nil
}

// setState moves an issue to a state of its team and bumps its updatedAt.
func (s *Server) setState(i *issue, stateID string) error {
	st, err := s.teamState(i.teamID, stateID)
	if err != nil {
		return err
	}
	i.stateID = st.id
	i.updatedAt = s.tick()
	return nil
}

// newID returns a fresh entity ID; Linear's IDs are UUIDs.
func newID() string { return uuid.NewString() }

// emailOf makes a user's address from their name.
func emailOf(name string) string {
	return strings.ToLower(strings.Join(strings.Fields(name), ".")) + "@example.com"
}

// viewerKey carries the authenticated user of a request to the resolvers.
type viewerKey struct{}

func withViewer(ctx context.Context, u *user) context.Context {
	return context.WithValue(ctx, viewerKey{}, u)
}

func viewerOf(ctx context.Context) *user {
	u, _ := ctx.Value(viewerKey{}).(*user)
	return u
}
