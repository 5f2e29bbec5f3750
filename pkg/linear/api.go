package linear

import (
	"context"
	"fmt"
	"time"
)

// defaultPageSize is the page size when a caller gives none; it is Linear's own default.
const defaultPageSize = 50

// Viewer returns the user the API key belongs to; a cheap way to check a key.
func (c *Client) Viewer(ctx context.Context) (*User, error) {
	var data struct {
		Viewer User `json:"viewer"`
	}
	if err := c.do(ctx, OpViewer, viewerDoc, nil, &data); err != nil {
		return nil, err
	}
	return &data.Viewer, nil
}

// Teams returns every team the key can see, each with its workflow states, reading all
// pages.
func (c *Client) Teams(ctx context.Context) ([]Team, error) {
	return collectPages(func(after string) ([]Team, pageInfo, error) {
		var data struct {
			Teams struct {
				Nodes []struct {
					Team
					States struct {
						Nodes []WorkflowState `json:"nodes"`
					} `json:"states"`
				} `json:"nodes"`
				PageInfo pageInfo `json:"pageInfo"`
			} `json:"teams"`
		}
		vars := pageVars(after, defaultPageSize)
		vars["statesFirst"] = statesPageSize
		if err := c.do(ctx, OpTeams, teamsDoc, vars, &data); err != nil {
			return nil, pageInfo{}, err
		}
		teams := make([]Team, 0, len(data.Teams.Nodes))
		for _, n := range data.Teams.Nodes {
			t := n.Team
			t.States = n.States.Nodes
			teams = append(teams, t)
		}
		return teams, data.Teams.PageInfo, nil
	})
}

// Issues returns one page of the issues matching filter: at most first (default 50),
// starting after the cursor after ("" for the first page).
func (c *Client) Issues(ctx context.Context, filter IssueFilter, after string, first int) (*IssuePage, error) {
	if first <= 0 {
		first = defaultPageSize
	}
	vars := pageVars(after, first)
	vars["relationsFirst"] = relationsPageSize
	if f := filter.variable(); f != nil {
		vars["filter"] = f
	}
	var data struct {
		Issues struct {
			Nodes    []wireIssue `json:"nodes"`
			PageInfo pageInfo    `json:"pageInfo"`
		} `json:"issues"`
	}
	if err := c.do(ctx, OpIssues, issuesDoc, vars, &data); err != nil {
		return nil, err
	}
	page := &IssuePage{EndCursor: data.Issues.PageInfo.EndCursor, HasNextPage: data.Issues.PageInfo.HasNextPage}
	for i := range data.Issues.Nodes {
		page.Issues = append(page.Issues, data.Issues.Nodes[i].issue())
	}
	return page, nil
}

// AllIssues returns every issue matching filter, reading pages of pageSize (default 50)
// until the last.
func (c *Client) AllIssues(ctx context.Context, filter IssueFilter, pageSize int) ([]Issue, error) {
	return collectPages(func(after string) ([]Issue, pageInfo, error) {
		page, err := c.Issues(ctx, filter, after, pageSize)
		if err != nil {
			return nil, pageInfo{}, err
		}
		return page.Issues, pageInfo{HasNextPage: page.HasNextPage, EndCursor: page.EndCursor}, nil
	})
}

// Issue returns one issue by its ID or its identifier (ENG-12); Linear takes either.
func (c *Client) Issue(ctx context.Context, id string) (*Issue, error) {
	var data struct {
		Issue wireIssue `json:"issue"`
	}
	vars := map[string]any{"id": id, "relationsFirst": relationsPageSize}
	if err := c.do(ctx, OpIssue, issueDoc, vars, &data); err != nil {
		return nil, err
	}
	issue := data.Issue.issue()
	return &issue, nil
}

// UpdateIssueState moves an issue to the workflow state stateID (a state of the issue's
// team) and returns the issue's updatedAt after the change, which the sync keeps to
// recognise its own change when it comes back by webhook or poll. An answer of
// success: false is ErrNotApplied.
func (c *Client) UpdateIssueState(ctx context.Context, issueID, stateID string) (time.Time, error) {
	var data struct {
		IssueUpdate struct {
			Success bool `json:"success"`
			Issue   *struct {
				UpdatedAt time.Time `json:"updatedAt"`
			} `json:"issue"`
		} `json:"issueUpdate"`
	}
	vars := map[string]any{"id": issueID, "input": map[string]any{"stateId": stateID}}
	if err := c.do(ctx, OpUpdateIssueState, updateIssueStateDoc, vars, &data); err != nil {
		return time.Time{}, err
	}
	if !data.IssueUpdate.Success || data.IssueUpdate.Issue == nil {
		return time.Time{}, fmt.Errorf("%w: %s answered success: false", ErrNotApplied, OpUpdateIssueState)
	}
	return data.IssueUpdate.Issue.UpdatedAt, nil
}

// CreateComment adds a markdown comment to an issue as the key's user and returns the
// comment's ID. An answer of success: false is ErrNotApplied.
func (c *Client) CreateComment(ctx context.Context, issueID, body string) (string, error) {
	var data struct {
		CommentCreate struct {
			Success bool `json:"success"`
			Comment struct {
				ID string `json:"id"`
			} `json:"comment"`
		} `json:"commentCreate"`
	}
	vars := map[string]any{"input": map[string]any{"issueId": issueID, "body": body}}
	if err := c.do(ctx, OpCreateComment, createCommentDoc, vars, &data); err != nil {
		return "", err
	}
	if !data.CommentCreate.Success {
		return "", fmt.Errorf("%w: %s answered success: false", ErrNotApplied, OpCreateComment)
	}
	return data.CommentCreate.Comment.ID, nil
}

// pageVars are the paging variables of a connection query.
func pageVars(after string, first int) map[string]any {
	vars := map[string]any{"first": first}
	if after != "" {
		vars["after"] = after
	}
	return vars
}
