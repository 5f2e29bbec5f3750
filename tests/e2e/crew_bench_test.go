package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/fakellm"
)

// The crew benchmark: 30 independent issues whose jobs write one note each (no toolchain
// applies: validation has nothing to run), the model answering at once and a check that
// does nothing ("true"), worked by 1 worker and by 3. The ratio of their wall times says
// whether the workers really run in parallel.

const crewBenchIssues = 30

func crewBenchScript() []fakellm.Response {
	var rs []fakellm.Response
	for i := 1; i <= crewBenchIssues; i++ {
		path := fmt.Sprintf("notes/c%02d.md", i)
		rs = append(rs,
			fakellm.Response{Match: projectPlanMatch(fmt.Sprintf("[CREW-BENCH-%02d]", i)), Text: planAnswer("Write "+path+".", path)},
			fakellm.Response{Match: genMatch(path), Text: content(fmt.Sprintf("# Note %d\n\nScripted.\n", i))})
	}
	return rs
}

// crewBenchRun works a fresh repository's 30 issues with workers workers and returns the
// wall time from StartProject to COMPLETED.
func crewBenchRun(b *testing.B, workers int) time.Duration {
	b.Helper()
	repo := fmt.Sprintf("local/crew-bench-%d-%d", workers, time.Now().UnixNano())
	if code, body := rest(b, http.MethodPost, "/v1/repos", token, map[string]any{"repo": repo, "auto_init": true}); code != http.StatusOK {
		b.Fatalf("create repo: %d %v", code, body)
	}
	for i := 1; i <= crewBenchIssues; i++ {
		if code, body := rest(b, http.MethodPost, "/v1/repos/"+repo+"/issues", token, map[string]any{
			"title": fmt.Sprintf("Write note %d [CREW-BENCH-%02d]", i, i), "body": fmt.Sprintf("Write notes/c%02d.md.", i)}); code != http.StatusOK {
			b.Fatalf("create issue: %d %v", code, body)
		}
	}
	code, body := rest(b, http.MethodPost, "/v1/projects", token, map[string]any{"repo": repo, "mode": "PROJECT_MODE_CREW",
		"max_workers": workers, "merge_policy": "MERGE_POLICY_AUTO", "check_command": "true"})
	if code != http.StatusOK {
		b.Fatalf("plan: %d %v", code, body)
	}
	id := body["project"].(map[string]any)["id"].(string)
	start := time.Now()
	if code, body := rest(b, http.MethodPost, "/v1/projects/"+id+":start", token, map[string]any{}); code != http.StatusOK {
		b.Fatalf("start: %d %v", code, body)
	}
	for {
		code, got := rest(b, http.MethodGet, "/v1/projects/"+id, token, nil)
		if code != http.StatusOK {
			b.Fatalf("get: %d %v", code, got)
		}
		p := got["project"].(map[string]any)
		switch p["status"] {
		case "PROJECT_STATUS_COMPLETED":
			if !strings.HasPrefix(fmt.Sprint(p["status_reason"]), fmt.Sprintf("%d merged", crewBenchIssues)) {
				b.Fatalf("the crew's report: %v", p["status_reason"])
			}
			return time.Since(start)
		case "PROJECT_STATUS_RUNNING":
		default:
			b.Fatalf("project %s is %v: %v", id, p["status"], p["status_reason"])
		}
		if time.Since(start) > 20*time.Minute {
			b.Fatalf("project %s still running after 20 minutes", id)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// BenchmarkCrewParallelism: 30 independent issues with 1 worker, then with 3 (target: 3
// workers in at most 1/2.5 of 1 worker's time).
func BenchmarkCrewParallelism(b *testing.B) {
	var one, three []time.Duration
	for b.Loop() {
		one = append(one, crewBenchRun(b, 1))
		three = append(three, crewBenchRun(b, 3))
	}
	m1, m3 := median(one), median(three)
	ratio := float64(m3) / float64(m1)
	b.ReportMetric(ratio, "3w/1w")
	fmt.Printf("crew of %d independent issues (scripted model, no-op check): 1 worker %s, 3 workers %s, %.1f s vs %.1f s per issue; 3 workers take %.2f of 1 worker's time (target ≤ 0.40)\n",
		crewBenchIssues, m1.Round(100*time.Millisecond), m3.Round(100*time.Millisecond), m1.Seconds()/crewBenchIssues, m3.Seconds()/crewBenchIssues, ratio)
}
