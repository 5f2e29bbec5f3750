package e2e

import (
	"bufio"
	"encoding/json"
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
// wall time from StartProject to COMPLETED, and the median gap between two merges.
func crewBenchRun(b *testing.B, workers int) (time.Duration, time.Duration) {
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
			d := time.Since(start)
			return d, mergeGap(b, id)
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

// mergeGap is the median time between two merges of project id (its events).
func mergeGap(b *testing.B, id string) time.Duration {
	b.Helper()
	req, _ := http.NewRequest(http.MethodGet, mesh.GatewayURL()+"/v1/projects/"+id+":watch", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var merged []time.Time
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 4<<20), 4<<20)
	for sc.Scan() {
		var line struct {
			Result struct {
				Type string    `json:"type"`
				Time time.Time `json:"time"`
			} `json:"result"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Result.Type == "PROJECT_EVENT_TYPE_TASK_MERGED" {
			merged = append(merged, line.Result.Time)
		}
	}
	var gaps []time.Duration
	for i := 1; i < len(merged); i++ {
		gaps = append(gaps, merged[i].Sub(merged[i-1]))
	}
	if len(gaps) == 0 {
		return 0
	}
	return median(gaps)
}

// BenchmarkCrewParallelism: 30 independent issues with 1 worker, then with 3 (target: 3
// workers in at most 1/2.5 of 1 worker's time). It also prints the median time between two
// merges: pull requests merge one at a time, each brought up to date with the base the one
// before moved and checked again, so with 3 workers that gap bounds the run.
func BenchmarkCrewParallelism(b *testing.B) {
	var one, three, gap1, gap3 []time.Duration
	for b.Loop() {
		d, g := crewBenchRun(b, 1)
		one, gap1 = append(one, d), append(gap1, g)
		d, g = crewBenchRun(b, 3)
		three, gap3 = append(three, d), append(gap3, g)
	}
	m1, m3 := median(one), median(three)
	ratio := float64(m3) / float64(m1)
	b.ReportMetric(ratio, "3w/1w")
	fmt.Printf("crew of %d independent issues (scripted model, no-op check): 1 worker %s, 3 workers %s; 3 workers take %.2f of 1 worker's time (target ≤ 0.40); "+
		"a merge every %s with 1 worker, every %s with 3 (each after its pull request took in the base the last merge moved and was checked again)\n",
		crewBenchIssues, m1.Round(100*time.Millisecond), m3.Round(100*time.Millisecond), ratio, median(gap1).Round(10*time.Millisecond), median(gap3).Round(10*time.Millisecond))
}
