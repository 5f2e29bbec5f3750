package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
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

// The same with a model that takes its time: crewSlowIssues issues whose plan and file each
// take crewSlowLatency to come (a real model takes seconds to tens of seconds per call).
const (
	crewSlowIssues  = 12
	crewSlowLatency = 2 * time.Second
)

func crewBenchScript() []fakellm.Response {
	var rs []fakellm.Response
	for i := 1; i <= crewBenchIssues; i++ {
		path := fmt.Sprintf("notes/c%02d.md", i)
		rs = append(rs,
			fakellm.Response{Match: projectPlanMatch(fmt.Sprintf("[CREW-BENCH-%02d]", i)), Text: planAnswer("Write "+path+".", path)},
			fakellm.Response{Match: genMatch(path), Text: content(fmt.Sprintf("# Note %d\n\nScripted.\n", i))})
	}
	for i := 1; i <= crewSlowIssues; i++ {
		path := fmt.Sprintf("notes/s%02d.md", i)
		rs = append(rs,
			fakellm.Response{Match: projectPlanMatch(fmt.Sprintf("[CREW-SLOW-%02d]", i)), Latency: fakellm.Duration(crewSlowLatency), Text: planAnswer("Write "+path+".", path)},
			fakellm.Response{Match: genMatch(path), Latency: fakellm.Duration(crewSlowLatency), Text: content(fmt.Sprintf("# Note %d\n\nScripted slowly.\n", i))})
	}
	return rs
}

// crewBenchRun works a fresh repository's 30 issues with workers workers and returns the
// wall time from StartProject to COMPLETED, where the time went (crewStages), and the CPU
// time the whole machine spent meanwhile (every process: the mesh, PostgreSQL, the
// container engine and the sandboxes).
func crewBenchRun(b *testing.B, workers int, slow bool) (wall time.Duration, stages crewStages, cpu time.Duration) {
	b.Helper()
	repo := fmt.Sprintf("local/crew-bench-%d-%d", workers, time.Now().UnixNano())
	if code, body := rest(b, http.MethodPost, "/v1/repos", token, map[string]any{"repo": repo, "auto_init": true}); code != http.StatusOK {
		b.Fatalf("create repo: %d %v", code, body)
	}
	n, marker, note := crewBenchIssues, "CREW-BENCH", "c"
	if slow {
		n, marker, note = crewSlowIssues, "CREW-SLOW", "s"
	}
	for i := 1; i <= n; i++ {
		if code, body := rest(b, http.MethodPost, "/v1/repos/"+repo+"/issues", token, map[string]any{
			"title": fmt.Sprintf("Write note %d [%s-%02d]", i, marker, i), "body": fmt.Sprintf("Write notes/%s%02d.md.", note, i)}); code != http.StatusOK {
			b.Fatalf("create issue: %d %v", code, body)
		}
	}
	code, body := rest(b, http.MethodPost, "/v1/projects", token, map[string]any{"repo": repo, "mode": "PROJECT_MODE_CREW",
		"max_workers": workers, "merge_policy": "MERGE_POLICY_AUTO", "check_command": "true"})
	if code != http.StatusOK {
		b.Fatalf("plan: %d %v", code, body)
	}
	id := body["project"].(map[string]any)["id"].(string)
	start, cpu0 := time.Now(), machineCPU(b)
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
			if !strings.HasPrefix(fmt.Sprint(p["status_reason"]), fmt.Sprintf("%d merged", n)) {
				b.Fatalf("the crew's report: %v", p["status_reason"])
			}
			d, c := time.Since(start), machineCPU(b)-cpu0
			return d, stagesOf(b, id), c
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

// crewStages is where a crew run's time went, medians over its tasks: a job (started →
// pull request opened), the wait in the merge queue (opened → its turn: the merge before
// it), its turn (→ checks passed: brought up to date and checked), the merge (→ merged),
// and the gap between two merges.
type crewStages struct{ job, queued, check, merge, gap time.Duration }

func (s crewStages) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
	return fmt.Sprintf("job %s, queued %s, update+check %s, merge %s; a merge every %s", r(s.job), r(s.queued), r(s.check), r(s.merge), r(s.gap))
}

// stagesOf reads project id's events into its crewStages.
func stagesOf(b *testing.B, id string) crewStages {
	b.Helper()
	req, _ := http.NewRequest(http.MethodGet, mesh.GatewayURL()+"/v1/projects/"+id+":watch", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	type times struct{ started, opened, passed, merged time.Time }
	byTask := map[string]*times{}
	var merges []time.Time
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 4<<20), 4<<20)
	for sc.Scan() {
		var line struct {
			Result struct {
				Type   string    `json:"type"`
				Time   time.Time `json:"time"`
				TaskID string    `json:"project_task_id"`
				Task   struct {
					ID string `json:"project_task_id"`
				} `json:"task"`
			} `json:"result"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		e := line.Result
		tid := firstNonEmptyString(e.TaskID, e.Task.ID)
		if tid == "" {
			continue
		}
		t := byTask[tid]
		if t == nil {
			t = &times{}
			byTask[tid] = t
		}
		switch e.Type {
		case "PROJECT_EVENT_TYPE_TASK_STARTED":
			if t.started.IsZero() {
				t.started = e.Time
			}
		case "PROJECT_EVENT_TYPE_TASK_PULL_REQUEST_OPENED":
			t.opened = e.Time
		case "PROJECT_EVENT_TYPE_TASK_CHECKS_PASSED":
			t.passed = e.Time
		case "PROJECT_EVENT_TYPE_TASK_MERGED":
			t.merged = e.Time
			merges = append(merges, e.Time)
		}
	}
	slices.SortFunc(merges, func(a, b time.Time) int { return a.Compare(b) })
	var job, queued, check, merge, gap []time.Duration
	for i := 1; i < len(merges); i++ {
		gap = append(gap, merges[i].Sub(merges[i-1]))
	}
	for _, t := range byTask {
		if t.started.IsZero() || t.opened.IsZero() || t.passed.IsZero() || t.merged.IsZero() {
			continue
		}
		// Its turn came with the last merge before its checks passed (or when it opened).
		turn := t.opened
		for _, m := range merges {
			if m.After(turn) && m.Before(t.passed) {
				turn = m
			}
		}
		job, queued = append(job, t.opened.Sub(t.started)), append(queued, turn.Sub(t.opened))
		check, merge = append(check, t.passed.Sub(turn)), append(merge, t.merged.Sub(t.passed))
	}
	if len(job) == 0 || len(gap) == 0 {
		b.Fatalf("project %s: no task's events from start to merge", id)
	}
	return crewStages{median(job), median(queued), median(check), median(merge), median(gap)}
}

func firstNonEmptyString(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// machineCPU is the CPU time this machine's processors have been busy since boot, all
// processors together (/proc/stat: user, nice, system, irq, softirq and steal).
func machineCPU(b *testing.B) time.Duration {
	b.Helper()
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		b.Fatalf("/proc/stat: %q", line)
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system (idle iowait) irq softirq steal
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			b.Fatalf("/proc/stat: %q: %v", line, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}

// BenchmarkCrewParallelism: 30 independent issues with 1 worker, then with 3 (target: 3
// workers in at most 1/2.5 of 1 worker's time). It also prints where a task's time went
// (crewStages: pull requests merge one at a time, each brought up to date with the base the
// one before moved and checked again, or several together in a merge group), and the
// machine's CPU time in each run: 3 workers cannot take less wall time than the CPU time
// their run needs spread over every core, so that quotient over 1 worker's time is the least
// ratio this machine allows. Then the same with a model that takes crewSlowLatency per call,
// where the workers' waits overlap.
func BenchmarkCrewParallelism(b *testing.B) {
	var one, three, cpu1, cpu3, slow1, slow3 []time.Duration
	var st1, st3 crewStages
	for b.Loop() {
		d, st, c := crewBenchRun(b, 1, false)
		one, cpu1, st1 = append(one, d), append(cpu1, c), st
		d, st, c = crewBenchRun(b, 3, false)
		three, cpu3, st3 = append(three, d), append(cpu3, c), st
		d, _, _ = crewBenchRun(b, 1, true)
		slow1 = append(slow1, d)
		d, _, _ = crewBenchRun(b, 3, true)
		slow3 = append(slow3, d)
	}
	m1, m3 := median(one), median(three)
	c1, c3 := median(cpu1), median(cpu3)
	cores := float64(runtime.NumCPU())
	ratio := float64(m3) / float64(m1)
	floor := c3.Seconds() / cores / m1.Seconds()
	slowRatio := float64(median(slow3)) / float64(median(slow1))
	b.ReportMetric(ratio, "3w/1w")
	b.ReportMetric(floor, "floor-3w/1w")
	b.ReportMetric(slowRatio, "3w/1w-slow-model")
	fmt.Printf("crew of %d independent issues (scripted model answering at once, no-op check): 1 worker %s, 3 workers %s; 3 workers take %.2f of 1 worker's time (target ≤ 0.40)\n",
		crewBenchIssues, m1.Round(100*time.Millisecond), m3.Round(100*time.Millisecond), ratio)
	fmt.Printf("crew stages (medians; the last run of each): 1 worker: %s\ncrew stages: 3 workers: %s\n", st1, st3)
	fmt.Printf("crew CPU: the machine was busy %.1f CPU-s with 1 worker (%.2f of its %d cores for the run), %.1f CPU-s with 3 workers (%.2f of them); "+
		"spread over every core, 3 workers' CPU needs at least %.2f of 1 worker's time on this machine (the floor of the ratio)\n",
		c1.Seconds(), c1.Seconds()/cores/m1.Seconds(), runtime.NumCPU(), c3.Seconds(), c3.Seconds()/cores/m3.Seconds(), floor)
	fmt.Printf("crew of %d independent issues, the model taking %s per plan and per file: 1 worker %s, 3 workers %s; 3 workers take %.2f of 1 worker's time\n",
		crewSlowIssues, crewSlowLatency, median(slow1).Round(100*time.Millisecond), median(slow3).Round(100*time.Millisecond), slowRatio)
}
