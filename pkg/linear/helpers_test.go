package linear_test

import (
	"net/http/httptest"
	"testing"

	"github.com/thefold/thefold/pkg/fakelinear"
	"github.com/thefold/thefold/pkg/linear"
)

// The client is tested against fakelinear over real HTTP, so the documents it sends are
// validated against the fake's subset of Linear's schema.

const (
	testKey  = "lin_api_test_key_0123456789"
	userName = "Ada Lovelace"
)

// newFake starts a fake Linear that accepts testKey and a client pointed at it.
func newFake(t *testing.T) (*fakelinear.Server, *linear.Client) {
	t.Helper()
	fake := fakelinear.New()
	fake.AddAPIKey(testKey, userName)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fake, &linear.Client{BaseURL: srv.URL + "/graphql", APIKey: testKey, HTTP: srv.Client()}
}

// workspace is a small Linear workspace: team ENG with four states, team OPS with one,
// and a project.
type workspace struct {
	eng, ops                                 string
	backlog, todo, started, done, opsStarted string
	project                                  string
}

func newWorkspace(fake *fakelinear.Server) workspace {
	var w workspace
	w.eng = fake.AddTeam("ENG", "Engineering")
	w.backlog = fake.AddState(w.eng, "Backlog", linear.StateBacklog)
	w.todo = fake.AddState(w.eng, "Todo", linear.StateUnstarted)
	w.started = fake.AddState(w.eng, "In Progress", linear.StateStarted)
	w.done = fake.AddState(w.eng, "Done", linear.StateCompleted)
	w.ops = fake.AddTeam("OPS", "Operations")
	w.opsStarted = fake.AddState(w.ops, "Doing", linear.StateStarted)
	w.project = fake.AddProject("Sync")
	return w
}

// lastRequest returns the last request the fake received.
func lastRequest(t *testing.T, fake *fakelinear.Server) fakelinear.Request {
	t.Helper()
	reqs := fake.Requests()
	if len(reqs) == 0 {
		t.Fatal("the fake received no request")
	}
	return reqs[len(reqs)-1]
}

// identifiers lists the identifiers of issues, in order.
func identifiers(issues []linear.Issue) []string {
	out := make([]string, 0, len(issues))
	for _, i := range issues {
		out = append(out, i.Identifier)
	}
	return out
}
