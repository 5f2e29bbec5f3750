package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/fakellm"
)

func cliCrewScript() []fakellm.Response {
	return []fakellm.Response{
		{Match: both(`# Job: plan a task`, `\[CREW-CLI-1\].*CLI-SAYS-HELLO`), Text: planAnswer("Write notes/cl.md.", "notes/cl.md")},
		{Match: projectPlanMatch("[CREW-CLI-1]"), Latency: fakellm.Duration(20 * time.Second), Text: planAnswer("Write notes/cl.md.", "notes/cl.md")},
		{Match: genMatch("notes/cl.md"), Text: content(crewSrc("cl", false))},
	}
}

// A crew from the command line: planned over the open issues, its pool, a worker
// interrupted and told something, which continues it to its review gate (merge policy
// human).
func TestCLICrewTalksToAWorker(t *testing.T) {
	parallel(t)
	cfg := t.TempDir()
	tok := []string{"THEFOLD_TOKEN=" + token}
	repo, numbers := crewRepo(t, fmt.Sprintf("cli-crew-%d", time.Now().UnixNano()), []crewIssue{{"c", "Write note cl [CREW-CLI-1]", "cl", nil}}, 0)
	var planned map[string]any
	cliJSON(t, cfg, tok, &planned, "projects", "plan", "--mode", "crew", "--repo", repo, "--max-workers", "2")
	id, _ := planned["id"].(string)
	if id == "" || planned["mode"] != "PROJECT_MODE_CREW" || planned["max_workers"] != float64(2) {
		t.Fatalf("plan -o json: %v", planned)
	}
	if out, errOut, code := cli(t, cfg, tok, "projects", "start", id); code != 0 {
		t.Fatalf("start: exit %d %s %s", code, out, errOut)
	}
	// The pool shows the worker planning (the scripted plan takes 20 s).
	deadline := time.Now().Add(liveness(2 * time.Minute))
	for {
		out, errOut, code := cli(t, cfg, tok, "projects", "pool", id)
		if code != 0 {
			t.Fatalf("pool: exit %d %s", code, errOut)
		}
		if l := lineWith(out, "planning"); l != "" && strings.Contains(l, fmt.Sprintf("#%d", numbers["c"])) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no worker planning: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	out, errOut, code := cli(t, cfg, tok, "projects", "interrupt", id, "--worker", "1", "--reason", "wait")
	if code != 0 || !strings.Contains(out, "interrupted") {
		t.Fatalf("interrupt: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code = cli(t, cfg, tok, "projects", "interrupt", id); code != 2 || !strings.Contains(errOut, "--worker") {
		t.Fatalf("interrupt without a worker: exit %d %s", code, errOut)
	}
	var msg map[string]any
	cliJSON(t, cfg, tok, &msg, "projects", "message", id, "--worker", "1", "CLI-SAYS-HELLO:", "keep", "it", "small")
	if msg["text"] != "CLI-SAYS-HELLO: keep it small" || msg["worker"] != float64(1) {
		t.Fatalf("message -o json: %v", msg)
	}
	// The message continues the worker: its job reaches its review gate.
	deadline = time.Now().Add(liveness(3 * time.Minute))
	for {
		var p map[string]any
		cliJSON(t, cfg, tok, &p, "projects", "get", id)
		tk := projectTasks(p)["[CREW-CLI-1]"]
		if tk["status"] == "PROJECT_TASK_STATUS_IN_REVIEW" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not reach its review: %v", tk)
		}
		time.Sleep(300 * time.Millisecond)
	}
	out, _, code = cli(t, cfg, tok, "projects", "get", id)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("#%d", numbers["c"])) {
		t.Fatalf("get shows the crew task's issue: exit %d\n%s", code, out)
	}
	// Done here: the project ends without a merge.
	if code, body := rest(t, http.MethodPost, "/v1/projects/"+id+":cancel", token, map[string]any{"reason": "test over"}); code != http.StatusOK {
		t.Fatalf("cancel: %d %v", code, body)
	}
}
