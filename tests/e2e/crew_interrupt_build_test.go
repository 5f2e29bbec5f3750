package e2e

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/fakellm"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
)

// The interrupt-during-build scenario: the worker's plan answers at once; the first
// generation of its file takes long (fakellm's latency), so an interrupt lands while the
// builder waits on it; asked again after the resume, it answers at once.
const interruptBuildPath = "notes/cib.md"

// crewInterruptBuildScript is prepended to the e2e script (TestMain).
func crewInterruptBuildScript() []fakellm.Response {
	src := content(crewSrc("cib", false))
	return []fakellm.Response{
		{Match: projectPlanMatch("[CREW-IB-1]"), Text: planAnswer("Write "+interruptBuildPath+".", interruptBuildPath)},
		{Match: genMatch(interruptBuildPath), Times: 1, Latency: fakellm.Duration(20 * time.Second), Text: src},
		{Match: genMatch(interruptBuildPath), Text: src},
	}
}

// generationStatuses are the HTTP statuses fakellm recorded for the generations of path, in
// order (0: still being answered; 499: the client went away before the answer).
func generationStatuses(path string) []int {
	re := regexp.MustCompile(genMatch(path))
	var out []int
	for _, r := range llm.Requests() {
		if re.MatchString(r.Text()) {
			out = append(out, r.Status)
		}
	}
	return out
}

// TestCrewInterruptDuringBuild is the issue's acceptance for a worker interrupted while it
// builds: the interrupt stops the builder's model call in flight within 2 s — the job and
// its build are PAUSED and fakellm saw the client go away — and resume continues: the build
// asks for the file again and the crew merges it. Then PauseBuild and ResumeBuild over REST
// refuse malformed ids, unknown builds and a finished build.
func TestCrewInterruptDuringBuild(t *testing.T) {
	parallel(t)
	repo, _ := crewRepo(t, "crew-interrupt-build", []crewIssue{{"ib", "Write note cib [CREW-IB-1]", "cib", nil}}, 0)
	id := planCrew(t, repo, nil)

	// The worker builds; its build runs and waits on the slow generation.
	var jobID, buildID string
	deadline := time.Now().Add(liveness(3 * time.Minute))
	for {
		if jobID == "" {
			for _, w := range getJSON(t, "/v1/projects/"+id+"/pool")["workers"].([]any) {
				if wm := w.(map[string]any); wm["phase"] == "JOB_PHASE_BUILDING" {
					jobID = wm["job_id"].(string)
				}
			}
		}
		if jobID != "" && buildID == "" {
			buildID, _ = getJSON(t, "/v1/jobs/"+jobID)["job"].(map[string]any)["build_id"].(string)
		}
		if buildID != "" {
			b := getJSON(t, "/v1/builds/"+buildID)["build"].(map[string]any)
			if b["status"] == "BUILD_STATUS_RUNNING" && slices.Equal(generationStatuses(interruptBuildPath), []int{0}) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker's generation was never in flight (job %q, build %q, generations %v)", jobID, buildID, generationStatuses(interruptBuildPath))
		}
		time.Sleep(50 * time.Millisecond)
	}

	start := time.Now()
	code, body := rest(t, http.MethodPost, "/v1/projects/"+id+"/workers/1:interrupt", token, map[string]any{"reason": "wait, not like that"})
	if code != http.StatusOK {
		t.Fatalf("interrupt: %d %v", code, body)
	}
	// Within 2 s the job and its build are paused and the model call was cancelled.
	for {
		job := getJSON(t, "/v1/jobs/"+jobID)["job"].(map[string]any)
		b := getJSON(t, "/v1/builds/"+buildID)["build"].(map[string]any)
		gens := generationStatuses(interruptBuildPath)
		if job["status"] == "JOB_STATUS_PAUSED" && b["status"] == "BUILD_STATUS_PAUSED" && slices.Equal(gens, []int{499}) {
			if !strings.Contains(fmt.Sprint(b["error"]), "wait, not like that") {
				t.Errorf("the paused build's error %q does not say why", b["error"])
			}
			break
		}
		if time.Since(start) > 2*time.Second {
			t.Fatalf("2 s after the interrupt: job %v, build %v, generations %v (want PAUSED, PAUSED, [499])", job["status"], b["status"], gens)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("job and build paused, model call cancelled %s after the interrupt", time.Since(start).Round(time.Millisecond))
	// Paused, the build does nothing more: no step ends, no generation is asked.
	time.Sleep(1500 * time.Millisecond)
	if gens := generationStatuses(interruptBuildPath); !slices.Equal(gens, []int{499}) {
		t.Fatalf("the paused build asked again: %v", gens)
	}
	if b := getJSON(t, "/v1/builds/"+buildID)["build"].(map[string]any); b["status"] != "BUILD_STATUS_PAUSED" {
		t.Fatalf("the paused build is %v", b["status"])
	}

	// Resume: the worker's job goes on, resumes its build, and the file is asked for again.
	if code, body := rest(t, http.MethodPost, "/v1/projects/"+id+"/workers/1:resume", token, map[string]any{}); code != http.StatusOK {
		t.Fatalf("resume: %d %v", code, body)
	}
	p := waitProject(t, id, 3*time.Minute, "PROJECT_STATUS_COMPLETED")
	if p["status_reason"] != "1 merged, 0 skipped" {
		t.Fatalf("report: %v", p["status_reason"])
	}
	if gens := generationStatuses(interruptBuildPath); !slices.Equal(gens, []int{499, http.StatusOK}) {
		t.Errorf("generations of %s: %v, want the cancelled one and one more", interruptBuildPath, gens)
	}
	// One build, paused and resumed, to its end.
	ctx, cancel := context.WithTimeout(authed(context.Background()), liveness(time.Minute))
	defer cancel()
	bc := builderv1.NewBuilderServiceClient(dial(t, "builder"))
	var changes []string
	var others []*builderv1.WatchBuildResponse
	for _, e := range history(t, ctx, bc, buildID) {
		if sc := e.GetStatusChange(); sc != nil {
			changes = append(changes, strings.TrimPrefix(sc.Status.String(), "BUILD_STATUS_"))
			continue
		}
		others = append(others, e)
	}
	if want := []string{"RUNNING", "PAUSED", "PENDING", "RUNNING", "COMPLETED"}; !slices.Equal(changes, want) {
		t.Errorf("the build's status changes %v, want %v", changes, want)
	}
	// The interrupted step started once and ended once: the resumed run took it up.
	checkHistory(t, others)

	// Malformed, unknown and finished builds.
	for _, c := range []struct {
		path      string
		code      int
		mentioned string
	}{
		{"/v1/builds/not-a-uuid:pause", http.StatusBadRequest, "id"},
		{"/v1/builds/not-a-uuid:resume", http.StatusBadRequest, "id"},
		{"/v1/builds/00000000-0000-4000-8000-000000000000:pause", http.StatusNotFound, "build"},
		{"/v1/builds/00000000-0000-4000-8000-000000000000:resume", http.StatusNotFound, "build"},
		{"/v1/builds/" + buildID + ":pause", http.StatusBadRequest, "completed"},
		{"/v1/builds/" + buildID + ":resume", http.StatusBadRequest, "completed"},
	} {
		code, body := rest(t, http.MethodPost, c.path, token, map[string]any{})
		if code != c.code || !strings.Contains(fmt.Sprint(body["message"]), c.mentioned) {
			t.Errorf("POST %s: %d %v, want %d naming %s", c.path, code, body, c.code, c.mentioned)
		}
	}
	if code, body := rest(t, http.MethodPost, "/v1/builds/"+buildID+":pause", token, map[string]any{"reason": strings.Repeat("r", 1001)}); code != http.StatusBadRequest ||
		!strings.Contains(fmt.Sprint(body["message"]), "reason") {
		t.Errorf("pause with a long reason: %d %v, want 400 naming reason", code, body)
	}
}
