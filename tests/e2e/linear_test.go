package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/fakelinear"
	"github.com/thefold/thefold/pkg/linear"
)

// linearFake is the fake Linear the mesh's agent talks to (THEFOLD_AGENT_LINEAR_URL).
var linearFake *fakelinear.Server

// Linear through the mesh: a workspace connected over REST with the real client against the
// fake Linear; a sync makes tasks of the chosen states with blocked-by; a signed webhook
// delivered to the gateway's /hooks/linear brings a new issue in the background (a forged
// one is 401); a task's status set over REST is written back as Linear's state in the
// background (the mutation checked), once.
func TestLinearTwoWaySync(t *testing.T) {
	parallel(t)
	repo := "local/linear-synced"
	if code, body := rest(t, http.MethodPost, "/v1/repos", token, map[string]any{"repo": repo, "auto_init": true}); code != http.StatusOK {
		t.Fatalf("create repo: %d %v", code, body)
	}
	const key = "lin_api_e2e0000000000000000"
	linearFake.AddAPIKey(key, "E2E Admin")
	team := linearFake.AddTeam("E2E", "End to end")
	states := map[string]string{}
	for _, s := range [][2]string{{"Backlog", "backlog"}, {"Todo", "unstarted"}, {"In Progress", "started"}, {"Done", "completed"}} {
		states[s[0]] = linearFake.AddState(team, s[0], s[1])
	}
	schema := linearFake.AddIssue(team, fakelinear.NewIssue{Title: "Schema", Description: "Add the table.", StateID: states["Todo"], Priority: 2})
	login := linearFake.AddIssue(team, fakelinear.NewIssue{Title: "Login", StateID: states["Todo"]})
	linearFake.AddIssue(team, fakelinear.NewIssue{Title: "Someday", StateID: states["Backlog"]})
	linearFake.AddRelation(schema.ID, login.ID, linear.RelationBlocks)

	if code, bad := rest(t, http.MethodPost, "/v1/linear-connections", token, map[string]any{"connection": map[string]any{"api_key": key, "repo": repo,
		"team_ids": []string{team}, "state_types": []string{"done"}}}); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(bad["message"]), "state_types") {
		t.Fatalf("a bad state type: %d %v", code, bad)
	}
	code, body := rest(t, http.MethodPost, "/v1/linear-connections", token, map[string]any{"connection": map[string]any{"api_key": key, "repo": repo,
		"team_ids": []string{team}}})
	if code != http.StatusOK {
		t.Fatalf("connect: %d %v", code, body)
	}
	conn := body["connection"].(map[string]any)
	id, secret := conn["id"].(string), conn["webhook_secret"].(string)
	t.Cleanup(func() { rest(t, http.MethodDelete, "/v1/linear-connections/"+id, token, nil) })
	if _, ok := conn["api_key"]; ok || len(secret) != 64 {
		t.Fatalf("connection: %v", conn)
	}

	code, body = rest(t, http.MethodPost, "/v1/linear-connections/"+id+":sync", token, map[string]any{})
	if code != http.StatusOK || body["created"] != float64(2) {
		t.Fatalf("sync: %d %v", code, body)
	}
	tasks := repoTasks(t, repo)
	ts, tl := tasks["linear:"+schema.ID], tasks["linear:"+login.ID]
	if ts == nil || tl == nil || len(tasks) != 2 || ts["source"] != "TASK_SOURCE_LINEAR" || ts["title"] != schema.Identifier+": Schema" {
		t.Fatalf("tasks: %v", tasks)
	}
	if b, _ := tl["blocked_by"].([]any); len(b) != 1 || b[0] != ts["id"] {
		t.Fatalf("login blocked by %v, want the schema's task", tl["blocked_by"])
	}

	// A new issue comes in by webhook, through the gateway, without a sync asked for.
	deploy := linearFake.AddIssue(team, fakelinear.NewIssue{Title: "Deploy", StateID: states["Todo"]})
	payload := fakelinear.WebhookPayload("create", deploy)
	post := func(delivery, sig string) (int, map[string]any) {
		return inboundPost(t, "/hooks/linear", string(payload), map[string]string{"Content-Type": "application/json",
			"Linear-Signature": sig, "Linear-Delivery": delivery, "Linear-Event": "Issue"})
	}
	if code, ans := post("e2e-forged", fakelinear.SignWebhook(strings.Repeat("1", 64), payload)); code != http.StatusUnauthorized {
		t.Fatalf("forged delivery: %d %v", code, ans)
	}
	if code, ans := post("e2e-1", fakelinear.SignWebhook(secret, payload)); code != http.StatusOK || ans["accepted"] != true {
		t.Fatalf("signed delivery: %d %v", code, ans)
	}
	deadline := time.Now().Add(liveness(time.Minute))
	for repoTasks(t, repo)["linear:"+deploy.ID] == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the webhook's issue did not become a task within a minute: %v", repoTasks(t, repo))
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A status set in TheFold goes back to Linear.
	if code, body := rest(t, http.MethodPost, "/v1/tasks/"+ts["id"].(string)+":setStatus", token, map[string]any{"status": "TASK_STATUS_IN_PROGRESS"}); code != http.StatusOK {
		t.Fatalf("set status: %d %v", code, body)
	}
	// Written back in the background, without a sync asked for.
	deadline = time.Now().Add(liveness(90 * time.Second))
	for linearFake.Issue(schema.ID).State.Name != "In Progress" {
		if time.Now().After(deadline) {
			t.Fatalf("%s is %q in Linear 90 s after its task started, want In Progress", schema.Identifier, linearFake.Issue(schema.ID).State.Name)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if code, body = rest(t, http.MethodPost, "/v1/linear-connections/"+id+":sync", token, map[string]any{}); code != http.StatusOK || body["pushed"] != nil {
		t.Fatalf("a sync after the push wrote again: %d %v", code, body)
	}
	found := false
	for _, r := range linearFake.Requests() {
		if r.OperationName == linear.OpUpdateIssueState && r.Variables["id"] == schema.ID && strings.Contains(fmt.Sprint(r.Variables), states["In Progress"]) {
			found = true
		}
	}
	if !found {
		t.Fatal("no issueUpdate mutation moving the issue to In Progress")
	}
	code, body = rest(t, http.MethodGet, "/v1/linear-connections/"+id+"/issues", token, nil)
	if list, _ := body["issues"].([]any); code != http.StatusOK || len(list) != 3 {
		t.Fatalf("synced issues: %d %v", code, body)
	}
	if code, _ := rest(t, http.MethodGet, "/v1/linear-connections/"+id+"/issues", memberToken(t, "linear-other@example.com"), nil); code != http.StatusNotFound {
		t.Fatalf("another user's view of the connection: %d", code)
	}
}
