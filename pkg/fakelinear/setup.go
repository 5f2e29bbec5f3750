package fakelinear

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Workflow state types and relation types Linear accepts.
var (
	stateTypes    = []string{"triage", "backlog", "unstarted", "started", "completed", "canceled"}
	relationTypes = []string{"blocks", "duplicate", "related", "similar"}
)

// State is a workflow state as read back.
type State struct {
	ID, Name, Type string
}

// Issue is an issue as read back by a test or put into a webhook payload.
type Issue struct {
	ID, Identifier, Title, Description, URL string
	Priority                                int
	State                                   State
	TeamID, TeamKey                         string
	// ProjectID is empty for an issue in no project.
	ProjectID            string
	CreatedAt, UpdatedAt time.Time
}

// NewIssue is what AddIssue creates. An empty StateID puts the issue in its team's first
// state; an empty ProjectID in no project.
type NewIssue struct {
	Title, Description string
	// Priority is 0 (none) to 4 (low).
	Priority           int
	StateID, ProjectID string
}

// Comment is a comment as read back.
type Comment struct {
	ID, IssueID, Body string
	// UserName is the name of the API key's user who wrote it.
	UserName  string
	CreatedAt time.Time
}

// AddAPIKey accepts key as a personal API key of a user named userName (the viewer of
// requests sent with it).
func (s *Server) AddAPIKey(key, userName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[key] = &user{id: newID(), name: userName, email: emailOf(userName)}
}

// AddTeam creates a team with the given key (the prefix of its issue identifiers) and
// returns its ID. It has no workflow states until AddState.
func (s *Server) AddTeam(key, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &team{seq: s.nextSeq(), id: newID(), key: key, name: name}
	s.teams = append(s.teams, t)
	return t.id
}

// AddState adds a workflow state to a team and returns its ID. stateType must be one of
// Linear's: triage, backlog, unstarted, started, completed, canceled.
func (s *Server) AddState(teamID, name, stateType string) string {
	if !slices.Contains(stateTypes, stateType) {
		panic(fmt.Sprintf("fakelinear: %q is not a Linear workflow state type", stateType))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	mustFind(s.findTeam(teamID), "team", teamID)
	st := &state{seq: s.nextSeq(), id: newID(), teamID: teamID, name: name, typ: stateType}
	s.states = append(s.states, st)
	return st.id
}

// AddProject creates a project and returns its ID.
func (s *Server) AddProject(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &project{id: newID(), name: name}
	s.projects = append(s.projects, p)
	return p.id
}

// AddIssue creates an issue in a team, numbered after the team's previous one (ENG-1,
// ENG-2, …), and returns it.
func (s *Server) AddIssue(teamID string, in NewIssue) Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := mustFind(s.findTeam(teamID), "team", teamID)
	stateID := in.StateID
	if stateID == "" {
		stateID = s.firstState(teamID)
	}
	if in.ProjectID != "" {
		mustFind(s.findProject(in.ProjectID), "project", in.ProjectID)
	}
	if _, err := s.teamState(teamID, stateID); err != nil {
		panic("fakelinear: AddIssue: " + err.Error())
	}
	t.issueCount++
	now := s.tick()
	i := &issue{
		seq: s.nextSeq(), id: newID(), identifier: t.key + "-" + strconv.Itoa(t.issueCount), teamID: teamID,
		stateID: stateID, projectID: in.ProjectID, title: in.Title, description: in.Description,
		priority: in.Priority, createdAt: now, updatedAt: now,
	}
	s.issues = append(s.issues, i)
	return s.snapshot(i)
}

// firstState returns the ID of a team's first workflow state.
func (s *Server) firstState(teamID string) string {
	for _, st := range s.states {
		if st.teamID == teamID {
			return st.id
		}
	}
	panic(fmt.Sprintf("fakelinear: team %q has no workflow state", teamID))
}

// AddRelation relates issueID to relatedIssueID and returns the relation's ID. With
// relationType "blocks", issueID blocks relatedIssueID. Relations do not change the
// issues' updatedAt.
func (s *Server) AddRelation(issueID, relatedIssueID, relationType string) string {
	if !slices.Contains(relationTypes, relationType) {
		panic(fmt.Sprintf("fakelinear: %q is not a Linear issue relation type", relationType))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	from := mustFind(s.findIssue(issueID), "issue", issueID)
	to := mustFind(s.findIssue(relatedIssueID), "issue", relatedIssueID)
	r := &relation{seq: s.nextSeq(), id: newID(), issueID: from.id, relatedID: to.id, typ: relationType}
	s.relations = append(s.relations, r)
	return r.id
}

// SetIssueState moves an issue to another state of its team as a person editing it in
// Linear would, bumping its updatedAt, and returns it.
func (s *Server) SetIssueState(issueID, stateID string) Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := mustFind(s.findIssue(issueID), "issue", issueID)
	if err := s.setState(i, stateID); err != nil {
		panic("fakelinear: SetIssueState: " + err.Error())
	}
	return s.snapshot(i)
}

// EditIssue changes an issue's title and description as a person editing it in Linear
// would, bumping its updatedAt, and returns it.
func (s *Server) EditIssue(issueID, title, description string) Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := mustFind(s.findIssue(issueID), "issue", issueID)
	i.title, i.description = title, description
	i.updatedAt = s.tick()
	return s.snapshot(i)
}

// Issue returns an issue by ID or identifier.
func (s *Server) Issue(id string) Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshot(mustFind(s.findIssue(id), "issue", id))
}

// Comments returns the comments on an issue, oldest first.
func (s *Server) Comments(issueID string) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := mustFind(s.findIssue(issueID), "issue", issueID)
	var out []Comment
	for _, c := range s.comments {
		if c.issueID == i.id {
			out = append(out, Comment{ID: c.id, IssueID: c.issueID, Body: c.body, UserName: c.user.name, CreatedAt: c.createdAt})
		}
	}
	return out
}
