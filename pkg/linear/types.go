package linear

import "time"

// Workflow state types, Linear's fixed categories of a team's states (WorkflowState.type).
// The sync maps them, not the team-specific state names.
const (
	StateTriage    = "triage"
	StateBacklog   = "backlog"
	StateUnstarted = "unstarted"
	StateStarted   = "started"
	StateCompleted = "completed"
	StateCanceled  = "canceled"
)

// Relation types (IssueRelation.type). A "blocks" relation from A to B means B is blocked
// by A.
const (
	RelationBlocks    = "blocks"
	RelationDuplicate = "duplicate"
	RelationRelated   = "related"
	RelationSimilar   = "similar"
)

// User is the person the API key belongs to.
type User struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
}

// WorkflowState is one state of a team's workflow; Type is one of the State* constants.
type WorkflowState struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// Team is a Linear team. States is filled by Teams only; on an Issue it is empty.
type Team struct {
	ID     string          `json:"id"`
	Key    string          `json:"key"`
	Name   string          `json:"name"`
	States []WorkflowState `json:"-"`
}

// Project is the project an issue belongs to.
type Project struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// IssueRef names another issue: its ID for API calls, its identifier (ENG-12) for people.
type IssueRef struct {
	ID         string `json:"id"`
	Identifier string `json:"identifier"`
}

// Relation is a relation between an issue and Other. Its direction depends on the list it
// is in: in Issue.Relations the issue is the subject ("this blocks Other"), in
// Issue.InverseRelations Other is ("Other blocks this").
type Relation struct {
	ID    string
	Type  string
	Other IssueRef
}

// Issue is a Linear issue as the sync reads it.
type Issue struct {
	ID          string
	Identifier  string
	Title       string
	Description string
	URL         string
	// Priority is 0 (none), 1 (urgent), 2 (high), 3 (normal) or 4 (low).
	Priority  int
	CreatedAt time.Time
	UpdatedAt time.Time
	State     WorkflowState
	Team      Team
	// Project is nil for an issue in no project.
	Project          *Project
	Relations        []Relation
	InverseRelations []Relation
	// RelationsTruncated is true when the issue has more relations in either direction
	// than one read returns; the lists are then incomplete.
	RelationsTruncated bool
}

// BlockedBy returns the issues that block this one: the "blocks" relations pointing at it.
func (i *Issue) BlockedBy() []IssueRef {
	var refs []IssueRef
	for _, r := range i.InverseRelations {
		if r.Type == RelationBlocks {
			refs = append(refs, r.Other)
		}
	}
	return refs
}

// IssueFilter selects issues; an empty field does not filter. Fields combine with AND,
// values within a field with OR, as Linear's IssueFilter does.
type IssueFilter struct {
	TeamIDs    []string
	ProjectIDs []string
	// StateTypes are State* constants.
	StateTypes []string
	// UpdatedAfter keeps issues updated strictly after this instant (the sync's watermark).
	UpdatedAfter time.Time
}

// variable returns the filter as Linear's IssueFilter input, or nil when it filters
// nothing.
func (f IssueFilter) variable() map[string]any {
	v := map[string]any{}
	if len(f.TeamIDs) > 0 {
		v["team"] = map[string]any{"id": map[string]any{"in": f.TeamIDs}}
	}
	if len(f.ProjectIDs) > 0 {
		v["project"] = map[string]any{"id": map[string]any{"in": f.ProjectIDs}}
	}
	if len(f.StateTypes) > 0 {
		v["state"] = map[string]any{"type": map[string]any{"in": f.StateTypes}}
	}
	if !f.UpdatedAfter.IsZero() {
		v["updatedAt"] = map[string]any{"gt": f.UpdatedAfter.UTC().Format(time.RFC3339Nano)}
	}
	if len(v) == 0 {
		return nil
	}
	return v
}

// IssuePage is one page of issues and where the next one starts.
type IssuePage struct {
	Issues      []Issue
	EndCursor   string
	HasNextPage bool
}

// wireIssue is an issue as the TheFoldIssueFields fragment returns it.
type wireIssue struct {
	ID          string        `json:"id"`
	Identifier  string        `json:"identifier"`
	Title       string        `json:"title"`
	Description string        `json:"description"`
	URL         string        `json:"url"`
	Priority    float64       `json:"priority"`
	CreatedAt   time.Time     `json:"createdAt"`
	UpdatedAt   time.Time     `json:"updatedAt"`
	State       WorkflowState `json:"state"`
	Team        Team          `json:"team"`
	Project     *Project      `json:"project"`
	Relations   struct {
		Nodes []struct {
			ID           string   `json:"id"`
			Type         string   `json:"type"`
			RelatedIssue IssueRef `json:"relatedIssue"`
		} `json:"nodes"`
		PageInfo pageInfo `json:"pageInfo"`
	} `json:"relations"`
	InverseRelations struct {
		Nodes []struct {
			ID    string   `json:"id"`
			Type  string   `json:"type"`
			Issue IssueRef `json:"issue"`
		} `json:"nodes"`
		PageInfo pageInfo `json:"pageInfo"`
	} `json:"inverseRelations"`
}

// issue converts the wire form; Linear's priority is a Float on the wire.
func (w *wireIssue) issue() Issue {
	out := Issue{
		ID: w.ID, Identifier: w.Identifier, Title: w.Title, Description: w.Description, URL: w.URL,
		Priority: int(w.Priority), CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt,
		State: w.State, Team: w.Team, Project: w.Project,
		RelationsTruncated: w.Relations.PageInfo.HasNextPage || w.InverseRelations.PageInfo.HasNextPage,
	}
	for _, r := range w.Relations.Nodes {
		out.Relations = append(out.Relations, Relation{ID: r.ID, Type: r.Type, Other: r.RelatedIssue})
	}
	for _, r := range w.InverseRelations.Nodes {
		out.InverseRelations = append(out.InverseRelations, Relation{ID: r.ID, Type: r.Type, Other: r.Issue})
	}
	return out
}
