package fakelinear

import (
	"context"
	"errors"

	"github.com/graph-gophers/graphql-go"
)

// Resolvers for the schema's types. They run inside ServeHTTP with s.mu held, so they
// read and change the store directly.

// rootResolver resolves Query and Mutation.
type rootResolver struct{ s *Server }

// errIssueNotFound is Linear's answer for an issue ID or identifier it does not know.
var errIssueNotFound = errors.New("Entity not found: Issue")

// pageArgs are a connection field's paging arguments.
type pageArgs struct {
	After *string
	First *int32
}

// Viewer is the user of the request's API key (ServeHTTP refuses a request without one).
func (r *rootResolver) Viewer(ctx context.Context) *userResolver {
	return &userResolver{u: viewerOf(ctx)}
}

func (r *rootResolver) Teams(args pageArgs) (*connection[*teamResolver], error) {
	return paginate(r.s.teams, args, func(t *team) (int, *teamResolver) {
		return t.seq, &teamResolver{s: r.s, t: t}
	})
}

func (r *rootResolver) Issue(args struct{ ID string }) (*issueResolver, error) {
	i := r.s.findIssue(args.ID)
	if i == nil {
		return nil, errIssueNotFound
	}
	return &issueResolver{s: r.s, i: i}, nil
}

func (r *rootResolver) Issues(args struct {
	After  *string
	First  *int32
	Filter *issueFilter
}) (*connection[*issueResolver], error) {
	matched := where(r.s.issues, func(i *issue) bool { return args.Filter.matches(r.s, i) })
	return paginate(matched, pageArgs{After: args.After, First: args.First}, func(i *issue) (int, *issueResolver) {
		return i.seq, &issueResolver{s: r.s, i: i}
	})
}

func (r *rootResolver) IssueUpdate(args struct {
	ID    string
	Input struct{ StateID *string }
}) (*issuePayloadResolver, error) {
	i := r.s.findIssue(args.ID)
	if i == nil {
		return nil, errIssueNotFound
	}
	if args.Input.StateID != nil {
		if err := r.s.setState(i, *args.Input.StateID); err != nil {
			return nil, err
		}
	}
	r.s.lastSyncID++
	return &issuePayloadResolver{syncID: r.s.lastSyncID, issue: &issueResolver{s: r.s, i: i}}, nil
}

func (r *rootResolver) CommentCreate(ctx context.Context, args struct {
	Input struct {
		Body    *string
		IssueID *string
	}
}) (*commentPayloadResolver, error) {
	if args.Input.IssueID == nil || args.Input.Body == nil || *args.Input.Body == "" {
		return nil, errors.New("Argument Validation Error: a comment needs an issueId and a body")
	}
	i := r.s.findIssue(*args.Input.IssueID)
	if i == nil {
		return nil, errIssueNotFound
	}
	c := &comment{id: newID(), issueID: i.id, body: *args.Input.Body, user: viewerOf(ctx), createdAt: r.s.tick()}
	r.s.comments = append(r.s.comments, c)
	r.s.lastSyncID++
	return &commentPayloadResolver{syncID: r.s.lastSyncID, c: c}, nil
}

type userResolver struct{ u *user }

func (r *userResolver) ID() graphql.ID { return graphql.ID(r.u.id) }
func (r *userResolver) Name() string   { return r.u.name }
func (r *userResolver) Email() string  { return r.u.email }

type teamResolver struct {
	s *Server
	t *team
}

func (r *teamResolver) ID() graphql.ID { return graphql.ID(r.t.id) }
func (r *teamResolver) Key() string    { return r.t.key }
func (r *teamResolver) Name() string   { return r.t.name }

func (r *teamResolver) States(args pageArgs) (*connection[*stateResolver], error) {
	states := where(r.s.states, func(st *state) bool { return st.teamID == r.t.id })
	return paginate(states, args, func(st *state) (int, *stateResolver) {
		return st.seq, &stateResolver{st: st}
	})
}

type stateResolver struct{ st *state }

func (r *stateResolver) ID() graphql.ID { return graphql.ID(r.st.id) }
func (r *stateResolver) Name() string   { return r.st.name }
func (r *stateResolver) Type() string   { return r.st.typ }

type projectResolver struct{ p *project }

func (r *projectResolver) ID() graphql.ID { return graphql.ID(r.p.id) }
func (r *projectResolver) Name() string   { return r.p.name }

type issueResolver struct {
	s *Server
	i *issue
}

func (r *issueResolver) ID() graphql.ID        { return graphql.ID(r.i.id) }
func (r *issueResolver) Identifier() string    { return r.i.identifier }
func (r *issueResolver) Title() string         { return r.i.title }
func (r *issueResolver) URL() string           { return issueURL(r.i.identifier) }
func (r *issueResolver) Priority() float64     { return float64(r.i.priority) }
func (r *issueResolver) CreatedAt() dateTime   { return dateTime{r.i.createdAt} }
func (r *issueResolver) UpdatedAt() dateTime   { return dateTime{r.i.updatedAt} }
func (r *issueResolver) State() *stateResolver { return &stateResolver{st: r.s.findState(r.i.stateID)} }
func (r *issueResolver) Team() *teamResolver {
	return &teamResolver{s: r.s, t: r.s.findTeam(r.i.teamID)}
}

// Description is null for an issue without one, as in Linear.
func (r *issueResolver) Description() *string {
	if r.i.description == "" {
		return nil
	}
	return &r.i.description
}

func (r *issueResolver) Project() *projectResolver {
	if r.i.projectID == "" {
		return nil
	}
	return &projectResolver{p: r.s.findProject(r.i.projectID)}
}

// Relations are the relations whose subject is this issue.
func (r *issueResolver) Relations(args pageArgs) (*connection[*relationResolver], error) {
	return r.relationsWhere(args, func(rel *relation) bool { return rel.issueID == r.i.id })
}

// InverseRelations are the relations whose object is this issue.
func (r *issueResolver) InverseRelations(args pageArgs) (*connection[*relationResolver], error) {
	return r.relationsWhere(args, func(rel *relation) bool { return rel.relatedID == r.i.id })
}

func (r *issueResolver) relationsWhere(args pageArgs, keep func(*relation) bool) (*connection[*relationResolver], error) {
	return paginate(where(r.s.relations, keep), args, func(rel *relation) (int, *relationResolver) {
		return rel.seq, &relationResolver{s: r.s, rel: rel}
	})
}

type relationResolver struct {
	s   *Server
	rel *relation
}

func (r *relationResolver) ID() graphql.ID { return graphql.ID(r.rel.id) }
func (r *relationResolver) Type() string   { return r.rel.typ }

func (r *relationResolver) Issue() *issueResolver {
	return &issueResolver{s: r.s, i: r.s.findIssue(r.rel.issueID)}
}

func (r *relationResolver) RelatedIssue() *issueResolver {
	return &issueResolver{s: r.s, i: r.s.findIssue(r.rel.relatedID)}
}

type issuePayloadResolver struct {
	syncID float64
	issue  *issueResolver
}

func (r *issuePayloadResolver) LastSyncID() float64   { return r.syncID }
func (r *issuePayloadResolver) Success() bool         { return true }
func (r *issuePayloadResolver) Issue() *issueResolver { return r.issue }

type commentResolver struct{ c *comment }

func (r *commentResolver) ID() graphql.ID      { return graphql.ID(r.c.id) }
func (r *commentResolver) Body() string        { return r.c.body }
func (r *commentResolver) CreatedAt() dateTime { return dateTime{r.c.createdAt} }
func (r *commentResolver) User() *userResolver { return &userResolver{u: r.c.user} }

type commentPayloadResolver struct {
	syncID float64
	c      *comment
}

func (r *commentPayloadResolver) LastSyncID() float64       { return r.syncID }
func (r *commentPayloadResolver) Success() bool             { return true }
func (r *commentPayloadResolver) Comment() *commentResolver { return &commentResolver{c: r.c} }
