package linear_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/thefold/thefold/pkg/fakelinear"
	"github.com/thefold/thefold/pkg/linear"
)

func TestViewer(t *testing.T) {
	t.Parallel()
	fake, client := newFake(t)
	got, err := client.Viewer(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got.ID == "" || got.Name != userName || got.Email != "ada.lovelace@example.com" {
		t.Errorf("Viewer = %+v", got)
	}
	req := lastRequest(t, fake)
	if req.OperationName != linear.OpViewer || !strings.HasPrefix(req.Query, "query TheFoldViewer ") {
		t.Errorf("request = %q %q, want operation %s", req.OperationName, req.Query, linear.OpViewer)
	}
}

func TestTeamsWithStates(t *testing.T) {
	t.Parallel()
	fake, client := newFake(t)
	w := newWorkspace(fake)
	teams, err := client.Teams(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []linear.Team{
		{ID: w.eng, Key: "ENG", Name: "Engineering", States: []linear.WorkflowState{
			{ID: w.backlog, Name: "Backlog", Type: linear.StateBacklog},
			{ID: w.todo, Name: "Todo", Type: linear.StateUnstarted},
			{ID: w.started, Name: "In Progress", Type: linear.StateStarted},
			{ID: w.done, Name: "Done", Type: linear.StateCompleted},
		}},
		{ID: w.ops, Key: "OPS", Name: "Operations", States: []linear.WorkflowState{
			{ID: w.opsStarted, Name: "Doing", Type: linear.StateStarted},
		}},
	}
	if diff := cmp.Diff(want, teams); diff != "" {
		t.Errorf("Teams (-want +got):\n%s", diff)
	}
	if req := lastRequest(t, fake); req.OperationName != linear.OpTeams {
		t.Errorf("operation = %q, want %s", req.OperationName, linear.OpTeams)
	}
}

func TestIssuesFilteredAndPaged(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		filter    func(workspace) linear.IssueFilter
		first     int
		wantIDs   []string
		wantPages []int
		// wantVar is the filter variable the client must send.
		wantVar func(workspace) map[string]any
	}{
		{
			name: "team and state type, more issues than a page",
			filter: func(w workspace) linear.IssueFilter {
				return linear.IssueFilter{TeamIDs: []string{w.eng}, StateTypes: []string{linear.StateStarted}}
			},
			first:     3,
			wantIDs:   []string{"ENG-1", "ENG-2", "ENG-3", "ENG-4", "ENG-5", "ENG-6", "ENG-7"},
			wantPages: []int{3, 3, 1},
			wantVar: func(w workspace) map[string]any {
				return map[string]any{
					"team":  map[string]any{"id": map[string]any{"in": []string{w.eng}}},
					"state": map[string]any{"type": map[string]any{"in": []string{"started"}}},
				}
			},
		},
		{
			name: "state type across teams",
			filter: func(workspace) linear.IssueFilter {
				return linear.IssueFilter{StateTypes: []string{linear.StateStarted}}
			},
			first:     4,
			wantIDs:   []string{"ENG-1", "ENG-2", "ENG-3", "ENG-4", "ENG-5", "ENG-6", "ENG-7", "OPS-1", "OPS-2", "OPS-3"},
			wantPages: []int{4, 4, 2},
			wantVar: func(workspace) map[string]any {
				return map[string]any{"state": map[string]any{"type": map[string]any{"in": []string{"started"}}}}
			},
		},
		{
			name: "several state types of one team",
			filter: func(w workspace) linear.IssueFilter {
				return linear.IssueFilter{TeamIDs: []string{w.eng}, StateTypes: []string{linear.StateBacklog, linear.StateCompleted}}
			},
			wantIDs:   []string{"ENG-8", "ENG-9"},
			wantPages: []int{2},
			wantVar: func(w workspace) map[string]any {
				return map[string]any{
					"team":  map[string]any{"id": map[string]any{"in": []string{w.eng}}},
					"state": map[string]any{"type": map[string]any{"in": []string{"backlog", "completed"}}},
				}
			},
		},
		{
			name:      "project",
			filter:    func(w workspace) linear.IssueFilter { return linear.IssueFilter{ProjectIDs: []string{w.project}} },
			first:     2,
			wantIDs:   []string{"ENG-1", "ENG-3", "ENG-5", "ENG-7", "OPS-2"},
			wantPages: []int{2, 2, 1},
			wantVar: func(w workspace) map[string]any {
				return map[string]any{"project": map[string]any{"id": map[string]any{"in": []string{w.project}}}}
			},
		},
		{
			name:      "no filter, default page size",
			filter:    func(workspace) linear.IssueFilter { return linear.IssueFilter{} },
			wantIDs:   []string{"ENG-1", "ENG-2", "ENG-3", "ENG-4", "ENG-5", "ENG-6", "ENG-7", "ENG-8", "ENG-9", "OPS-1", "OPS-2", "OPS-3"},
			wantPages: []int{12},
			wantVar:   func(workspace) map[string]any { return nil },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake, client := newFake(t)
			w := newWorkspace(fake)
			addIssues(fake, w)
			filter := tc.filter(w)

			var got []linear.Issue
			var pages []int
			after := ""
			for {
				page, err := client.Issues(t.Context(), filter, after, tc.first)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, page.Issues...)
				pages = append(pages, len(page.Issues))
				if !page.HasNextPage {
					break
				}
				after = page.EndCursor
			}
			if diff := cmp.Diff(tc.wantIDs, identifiers(got)); diff != "" {
				t.Errorf("issues (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPages, pages); diff != "" {
				t.Errorf("page sizes (-want +got):\n%s", diff)
			}
			checkIssuesRequests(t, fake.Requests(), tc.wantVar(w), tc.first)

			all, err := client.AllIssues(t.Context(), filter, tc.first)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantIDs, identifiers(all)); diff != "" {
				t.Errorf("AllIssues (-want +got):\n%s", diff)
			}
		})
	}
}

// addIssues fills newWorkspace: ENG-1..7 started (the odd ones in the project), ENG-8 and
// ENG-9 in backlog, OPS-1..3 started (OPS-2 in the project).
func addIssues(fake *fakelinear.Server, w workspace) {
	for n := 1; n <= 7; n++ {
		in := fakelinear.NewIssue{Title: "started work", StateID: w.started}
		if n%2 == 1 {
			in.ProjectID = w.project
		}
		fake.AddIssue(w.eng, in)
	}
	fake.AddIssue(w.eng, fakelinear.NewIssue{Title: "later", StateID: w.backlog})
	fake.AddIssue(w.eng, fakelinear.NewIssue{Title: "later too", StateID: w.backlog})
	for n := 1; n <= 3; n++ {
		in := fakelinear.NewIssue{Title: "ops work", StateID: w.opsStarted}
		if n == 2 {
			in.ProjectID = w.project
		}
		fake.AddIssue(w.ops, in)
	}
}

// checkIssuesRequests checks the paged requests: each is TheFoldIssues with the filter
// variable, the page size, and from the second on the cursor the page before returned.
func checkIssuesRequests(t *testing.T, reqs []fakelinear.Request, wantFilter map[string]any, first int) {
	t.Helper()
	if first == 0 {
		first = 50
	}
	for n, req := range reqs {
		if req.OperationName != linear.OpIssues || !strings.Contains(req.Query, "issues(filter: $filter, first: $first, after: $after)") {
			t.Errorf("request %d: operation %q, query %q", n, req.OperationName, req.Query)
		}
		if diff := cmp.Diff(jsonValue(t, wantFilter), req.Variables["filter"]); diff != "" {
			t.Errorf("request %d: filter variable (-want +got):\n%s", n, diff)
		}
		if req.Variables["first"] != float64(first) {
			t.Errorf("request %d: first = %v, want %d", n, req.Variables["first"], first)
		}
		if _, hasAfter := req.Variables["after"]; hasAfter != (n > 0) {
			t.Errorf("request %d: after = %v", n, req.Variables["after"])
		}
	}
}

// jsonValue is v as it looks after a JSON round trip (as the fake records variables).
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestIssue(t *testing.T) {
	t.Parallel()
	fake, client := newFake(t)
	w := newWorkspace(fake)
	created := fake.AddIssue(w.eng, fakelinear.NewIssue{
		Title: "Sync Linear", Description: "Both ways.", Priority: 2, StateID: w.started, ProjectID: w.project,
	})
	for _, id := range []string{created.ID, created.Identifier} {
		got, err := client.Issue(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		want := &linear.Issue{
			ID: created.ID, Identifier: "ENG-1", Title: "Sync Linear", Description: "Both ways.",
			URL: created.URL, Priority: 2, CreatedAt: created.CreatedAt, UpdatedAt: created.UpdatedAt,
			State:   linear.WorkflowState{ID: w.started, Name: "In Progress", Type: linear.StateStarted},
			Team:    linear.Team{ID: w.eng, Key: "ENG", Name: "Engineering"},
			Project: &linear.Project{ID: w.project, Name: "Sync"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Issue(%q) (-want +got):\n%s", id, diff)
		}
		if req := lastRequest(t, fake); req.OperationName != linear.OpIssue || req.Variables["id"] != id {
			t.Errorf("request = %q %v", req.OperationName, req.Variables)
		}
	}

	_, err := client.Issue(t.Context(), "ENG-404")
	var gqlErr *linear.GraphQLError
	if !errors.As(err, &gqlErr) || !strings.Contains(err.Error(), "Entity not found") || linear.IsRetryable(err) {
		t.Errorf("unknown issue: err = %v, want a GraphQLError saying Entity not found", err)
	}
}

func TestRelationsOnBothIssues(t *testing.T) {
	t.Parallel()
	fake, client := newFake(t)
	w := newWorkspace(fake)
	a := fake.AddIssue(w.eng, fakelinear.NewIssue{Title: "schema"})
	b := fake.AddIssue(w.eng, fakelinear.NewIssue{Title: "migration"})
	c := fake.AddIssue(w.eng, fakelinear.NewIssue{Title: "docs"})
	blocks := fake.AddRelation(a.ID, b.ID, linear.RelationBlocks)
	related := fake.AddRelation(c.ID, a.ID, linear.RelationRelated)
	ref := func(i fakelinear.Issue) linear.IssueRef { return linear.IssueRef{ID: i.ID, Identifier: i.Identifier} }

	all, err := client.AllIssues(t.Context(), linear.IssueFilter{TeamIDs: []string{w.eng}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("AllIssues returned %v", identifiers(all))
	}
	cases := []struct {
		got                        linear.Issue
		wantRelations, wantInverse []linear.Relation
		wantBlockedBy              []linear.IssueRef
	}{
		{
			got:           all[0],
			wantRelations: []linear.Relation{{ID: blocks, Type: linear.RelationBlocks, Other: ref(b)}},
			wantInverse:   []linear.Relation{{ID: related, Type: linear.RelationRelated, Other: ref(c)}},
		},
		{
			got:           all[1],
			wantInverse:   []linear.Relation{{ID: blocks, Type: linear.RelationBlocks, Other: ref(a)}},
			wantBlockedBy: []linear.IssueRef{ref(a)},
		},
		{
			got:           all[2],
			wantRelations: []linear.Relation{{ID: related, Type: linear.RelationRelated, Other: ref(a)}},
		},
	}
	for _, tc := range cases {
		if diff := cmp.Diff(tc.wantRelations, tc.got.Relations); diff != "" {
			t.Errorf("%s relations (-want +got):\n%s", tc.got.Identifier, diff)
		}
		if diff := cmp.Diff(tc.wantInverse, tc.got.InverseRelations); diff != "" {
			t.Errorf("%s inverse relations (-want +got):\n%s", tc.got.Identifier, diff)
		}
		if diff := cmp.Diff(tc.wantBlockedBy, tc.got.BlockedBy()); diff != "" {
			t.Errorf("%s blocked by (-want +got):\n%s", tc.got.Identifier, diff)
		}
		if tc.got.RelationsTruncated {
			t.Errorf("%s: relations reported truncated", tc.got.Identifier)
		}
	}
}

func TestRelationsTruncated(t *testing.T) {
	t.Parallel()
	fake, client := newFake(t)
	w := newWorkspace(fake)
	hub := fake.AddIssue(w.eng, fakelinear.NewIssue{Title: "hub"})
	var last fakelinear.Issue
	for range 51 {
		last = fake.AddIssue(w.eng, fakelinear.NewIssue{Title: "spoke"})
		fake.AddRelation(hub.ID, last.ID, linear.RelationBlocks)
	}
	got, err := client.Issue(t.Context(), hub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.RelationsTruncated || len(got.Relations) != 50 {
		t.Errorf("hub: truncated %v with %d relations, want truncated with 50", got.RelationsTruncated, len(got.Relations))
	}
	spoke, err := client.Issue(t.Context(), last.ID)
	if err != nil {
		t.Fatal(err)
	}
	if spoke.RelationsTruncated || len(spoke.BlockedBy()) != 1 {
		t.Errorf("spoke: truncated %v, blocked by %v", spoke.RelationsTruncated, spoke.BlockedBy())
	}
}

func TestUpdatedAfter(t *testing.T) {
	t.Parallel()
	fake, client := newFake(t)
	w := newWorkspace(fake)
	first := fake.AddIssue(w.eng, fakelinear.NewIssue{Title: "one", StateID: w.started})
	fake.AddIssue(w.eng, fakelinear.NewIssue{Title: "two", StateID: w.started})
	mark := fake.AddIssue(w.eng, fakelinear.NewIssue{Title: "three", StateID: w.started}).UpdatedAt
	changed := fake.SetIssueState(first.ID, w.done)

	cases := []struct {
		name  string
		after time.Time
		want  []string
	}{
		{name: "before every change", after: first.CreatedAt.Add(-time.Millisecond), want: []string{"ENG-1", "ENG-2", "ENG-3"}},
		{name: "after the last creation", after: mark, want: []string{"ENG-1"}},
		{name: "after the state change", after: changed.UpdatedAt, want: []string{}},
	}
	for _, tc := range cases {
		got, err := client.AllIssues(t.Context(), linear.IssueFilter{UpdatedAfter: tc.after}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, identifiers(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
		wantVar := map[string]any{"updatedAt": map[string]any{"gt": tc.after.UTC().Format(time.RFC3339Nano)}}
		if diff := cmp.Diff(jsonValue(t, wantVar), lastRequest(t, fake).Variables["filter"]); diff != "" {
			t.Errorf("%s: filter variable (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestUpdateIssueState(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// state picks the target state; issue the issue to move ("" moves the created one).
		state   func(workspace) string
		issue   string
		wantErr bool
	}{
		{name: "a state of the issue's team", state: func(w workspace) string { return w.done }},
		{name: "a state of another team", state: func(w workspace) string { return w.opsStarted }, wantErr: true},
		{name: "an unknown issue", state: func(w workspace) string { return w.done }, issue: "ENG-404", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake, client := newFake(t)
			w := newWorkspace(fake)
			before := fake.AddIssue(w.eng, fakelinear.NewIssue{Title: "ship it", StateID: w.started})
			issueID := before.ID
			if tc.issue != "" {
				issueID = tc.issue
			}
			stateID := tc.state(w)

			updatedAt, err := client.UpdateIssueState(t.Context(), issueID, stateID)
			after := fake.Issue(before.ID)
			req := lastRequest(t, fake)
			if req.OperationName != linear.OpUpdateIssueState || !strings.Contains(req.Query, "issueUpdate(id: $id, input: $input)") {
				t.Errorf("request = %q %q", req.OperationName, req.Query)
			}
			wantVars := map[string]any{"id": issueID, "input": map[string]any{"stateId": stateID}}
			if diff := cmp.Diff(jsonValue(t, wantVars), jsonValue(t, req.Variables)); diff != "" {
				t.Errorf("variables (-want +got):\n%s", diff)
			}
			if tc.wantErr {
				var gqlErr *linear.GraphQLError
				if !errors.As(err, &gqlErr) || after.State.ID != w.started || !after.UpdatedAt.Equal(before.UpdatedAt) {
					t.Errorf("err = %v, state %s; want a GraphQLError and the issue unchanged", err, after.State.Name)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if after.State.ID != stateID || !updatedAt.Equal(after.UpdatedAt) || !updatedAt.After(before.UpdatedAt) {
				t.Errorf("state %s, updatedAt %v (fake %v, before %v)", after.State.Name, updatedAt, after.UpdatedAt, before.UpdatedAt)
			}
		})
	}
}

func TestCreateComment(t *testing.T) {
	t.Parallel()
	fake, client := newFake(t)
	w := newWorkspace(fake)
	issue := fake.AddIssue(w.eng, fakelinear.NewIssue{Title: "comment here"})
	body := "TheFold picked this up: **building** `pkg/linear`."

	id, err := client.CreateComment(t.Context(), issue.ID, body)
	if err != nil {
		t.Fatal(err)
	}
	want := []fakelinear.Comment{{ID: id, IssueID: issue.ID, Body: body, UserName: userName}}
	if diff := cmp.Diff(want, fake.Comments(issue.ID), cmpopts.IgnoreFields(fakelinear.Comment{}, "CreatedAt")); diff != "" {
		t.Errorf("comments (-want +got):\n%s", diff)
	}
	req := lastRequest(t, fake)
	wantVars := map[string]any{"input": map[string]any{"issueId": issue.ID, "body": body}}
	if req.OperationName != linear.OpCreateComment || !strings.Contains(req.Query, "commentCreate(input: $input)") {
		t.Errorf("request = %q %q", req.OperationName, req.Query)
	}
	if diff := cmp.Diff(jsonValue(t, wantVars), jsonValue(t, req.Variables)); diff != "" {
		t.Errorf("variables (-want +got):\n%s", diff)
	}
}

func TestErrorsFromLinear(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// setup breaks the fake or the client.
		setup func(*fakelinear.Server, *linear.Client)
		check func(t *testing.T, err error, start time.Time)
	}{
		{
			name:  "unknown API key",
			setup: func(_ *fakelinear.Server, c *linear.Client) { c.APIKey = "lin_api_revoked_key_42" },
			check: func(t *testing.T, err error, _ time.Time) {
				if !errors.Is(err, linear.ErrUnauthorized) || linear.IsRetryable(err) || strings.Contains(err.Error(), "lin_api_revoked_key_42") {
					t.Errorf("err = %v, want ErrUnauthorized, not retryable, without the key", err)
				}
			},
		},
		{
			name:  "key sent as a bearer token",
			setup: func(_ *fakelinear.Server, c *linear.Client) { c.APIKey = "Bearer " + testKey },
			check: func(t *testing.T, err error, _ time.Time) {
				if !errors.Is(err, linear.ErrUnauthorized) {
					t.Errorf("err = %v, want ErrUnauthorized", err)
				}
			},
		},
		{
			name:  "rate limited",
			setup: func(f *fakelinear.Server, _ *linear.Client) { f.FailNext(1, 429) },
			check: func(t *testing.T, err error, start time.Time) {
				var limited *linear.RateLimitError
				if !errors.As(err, &limited) || !linear.IsRetryable(err) {
					t.Fatalf("err = %v, want a retryable RateLimitError", err)
				}
				if !limited.Reset.After(start) || limited.Reset.After(start.Add(2*time.Minute)) {
					t.Errorf("Reset = %v, want about a minute after %v", limited.Reset, start)
				}
			},
		},
		{
			name:  "server error",
			setup: func(f *fakelinear.Server, _ *linear.Client) { f.FailNext(1, 500) },
			check: func(t *testing.T, err error, _ time.Time) {
				var status *linear.StatusError
				if !errors.As(err, &status) || status.StatusCode != 500 || !linear.IsRetryable(err) || errors.Is(err, linear.ErrUnauthorized) {
					t.Errorf("err = %v, want a retryable StatusError 500", err)
				}
			},
		},
		{
			name:  "bad gateway",
			setup: func(f *fakelinear.Server, _ *linear.Client) { f.FailNext(1, 502) },
			check: func(t *testing.T, err error, _ time.Time) {
				if !linear.IsRetryable(err) {
					t.Errorf("err = %v, want retryable", err)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake, client := newFake(t)
			tc.setup(fake, client)
			start := time.Now()
			_, err := client.Viewer(t.Context())
			if err == nil {
				t.Fatal("Viewer succeeded")
			}
			tc.check(t, err, start)
			if got := len(fake.Requests()); got != 1 {
				t.Errorf("the fake received %d requests, want 1 (the client must not retry by itself)", got)
			}
		})
	}
}
