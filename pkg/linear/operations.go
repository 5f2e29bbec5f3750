package linear

// Operation names: the operationName of each request the client sends, so a recorded
// request, a log line or Linear's own audit can tell them apart.
const (
	OpViewer           = "TheFoldViewer"
	OpTeams            = "TheFoldTeams"
	OpIssues           = "TheFoldIssues"
	OpIssue            = "TheFoldIssue"
	OpUpdateIssueState = "TheFoldUpdateIssueState"
	OpCreateComment    = "TheFoldCreateComment"
)

// relationsPageSize is how many relations of each direction an issue read asks for;
// Issue.RelationsTruncated says when an issue has more.
const relationsPageSize = 50

// statesPageSize is how many workflow states a team read asks for; a team has a handful.
const statesPageSize = 100

// The documents, written against Linear's public schema (packages/sdk/src/schema.graphql
// in github.com/linear/linear). Field and type names are Linear's; fakelinear's schema
// is a subset of it and refuses anything else.
const (
	viewerDoc = `query TheFoldViewer {
  viewer { id name email }
}`

	teamsDoc = `query TheFoldTeams($first: Int, $after: String, $statesFirst: Int) {
  teams(first: $first, after: $after) {
    nodes {
      id key name
      states(first: $statesFirst) { nodes { id name type } }
    }
    pageInfo { hasNextPage endCursor }
  }
}`

	// issueFields is every issue field the sync reads, shared by the issue queries.
	issueFields = `fragment TheFoldIssueFields on Issue {
  id identifier title description url priority createdAt updatedAt
  state { id name type }
  team { id key name }
  project { id name }
  relations(first: $relationsFirst) {
    nodes { id type relatedIssue { id identifier } }
    pageInfo { hasNextPage }
  }
  inverseRelations(first: $relationsFirst) {
    nodes { id type issue { id identifier } }
    pageInfo { hasNextPage }
  }
}`

	issuesDoc = `query TheFoldIssues($filter: IssueFilter, $first: Int, $after: String, $relationsFirst: Int) {
  issues(filter: $filter, first: $first, after: $after) {
    nodes { ...TheFoldIssueFields }
    pageInfo { hasNextPage endCursor }
  }
}
` + issueFields

	issueDoc = `query TheFoldIssue($id: String!, $relationsFirst: Int) {
  issue(id: $id) { ...TheFoldIssueFields }
}
` + issueFields

	updateIssueStateDoc = `mutation TheFoldUpdateIssueState($id: String!, $input: IssueUpdateInput!) {
  issueUpdate(id: $id, input: $input) {
    success
    issue { id updatedAt }
  }
}`

	createCommentDoc = `mutation TheFoldCreateComment($input: CommentCreateInput!) {
  commentCreate(input: $input) {
    success
    comment { id }
  }
}`
)
