package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/fakellm"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
)

// The project benchmarks' scripts: a 50-task plan of 5 phases, and a 6-task project whose
// tasks write documents only (no toolchain applies: validation has nothing to run).

// benchPlan50 is a DecomposeProject answer of phases × perPhase tasks, each depending on
// the task at its position in the phase before.
func benchPlan(marker string, phases, perPhase int) string {
	var ps []map[string]any
	for i := 0; i < phases; i++ {
		var ts []map[string]any
		for j := 0; j < perPhase; j++ {
			deps := []string{}
			if i > 0 {
				deps = append(deps, fmt.Sprintf("p%dt%d", i-1, j))
			}
			ts = append(ts, map[string]any{"key": fmt.Sprintf("p%dt%d", i, j), "title": fmt.Sprintf("Write note %d.%d %s", i, j, marker),
				"description": fmt.Sprintf("Write notes/n%d_%d.md.", i, j), "depends_on": deps, "complexity": 1})
		}
		ps = append(ps, map[string]any{"name": fmt.Sprintf("Phase %d", i+1), "description": "scripted", "tasks": ts})
	}
	b, _ := json.Marshal(map[string]any{"summary": "Notes " + marker, "conventions": "Markdown notes under notes/.", "phases": ps})
	return string(b)
}

// benchProjectScript is prepended to the e2e script (TestMain).
func benchProjectScript() []fakellm.Response {
	rs := []fakellm.Response{
		{Match: both(`# Job: decompose a project`, regexp.QuoteMeta("[PROJ-BENCH-50]")), Text: benchPlan("[PROJ-BENCH-50]", 5, 10)},
		{Match: both(`# Job: decompose a project`, regexp.QuoteMeta("[PROJ-BENCH-RUN]")), Text: benchPlan("[PROJ-BENCH-RUN]", 3, 2)},
		{Match: both(`# Job: revise the next project phase`, regexp.QuoteMeta("[PROJ-BENCH-RUN]")), Text: `{"reasoning": "fine", "changed": false}`},
		{Match: both(`# Job: review a project`, regexp.QuoteMeta("[PROJ-BENCH-RUN]")), Text: `{"summary": "Notes.", "concerns": [], "documentation": "Six notes.", "quality_score": 8}`},
	}
	for i := 0; i < 3; i++ {
		for j := 0; j < 2; j++ {
			path := fmt.Sprintf("notes/n%d_%d.md", i, j)
			rs = append(rs,
				fakellm.Response{Match: projectPlanMatch(fmt.Sprintf("Write note %d.%d [PROJ-BENCH-RUN]", i, j)), Text: planAnswer("Write "+path+".", path)},
				fakellm.Response{Match: genMatch(path), Text: content(fmt.Sprintf("# Note %d.%d\n\nScripted.\n", i, j))})
		}
	}
	return rs
}

// BenchmarkProjectPlanAndStart is a 50-task, 5-phase plan (the scripted planner answering
// at once) stored by PlanProject and started by StartProject, which creates its 50 tasks in
// the tasks service. Target: ≤ 1 s for both. The project is cancelled after each run.
func BenchmarkProjectPlanAndStart(b *testing.B) {
	var plans, starts []time.Duration
	for i := 0; i < b.N; i++ {
		repo := fmt.Sprintf("local/bench-project-%d-%d", time.Now().UnixNano(), i)
		if code, body := rest(b, http.MethodPost, "/v1/repos", token, map[string]any{"repo": repo, "auto_init": true}); code != http.StatusOK {
			b.Fatalf("create repo: %d %v", code, body)
		}
		t0 := time.Now()
		code, body := rest(b, http.MethodPost, "/v1/projects", token, map[string]any{"repo": repo, "request": "Fifty notes [PROJ-BENCH-50]"})
		if code != http.StatusOK {
			b.Fatalf("plan: %d %v", code, body)
		}
		t1 := time.Now()
		id := body["project"].(map[string]any)["id"].(string)
		if code, body := rest(b, http.MethodPost, "/v1/projects/"+id+":start", token, map[string]any{}); code != http.StatusOK {
			b.Fatalf("start: %d %v", code, body)
		}
		t2 := time.Now()
		plans, starts = append(plans, t1.Sub(t0)), append(starts, t2.Sub(t1))
		if code, body := rest(b, http.MethodPost, "/v1/projects/"+id+":cancel", token, map[string]any{"reason": "benchmark"}); code != http.StatusOK {
			b.Fatalf("cancel: %d %v", code, body)
		}
	}
	b.StopTimer()
	p, s := median(plans), median(starts)
	b.ReportMetric(float64((p + s).Milliseconds()), "ms/plan+start")
	fmt.Printf("project of 50 tasks in 5 phases: PlanProject %s, StartProject %s, together %s (target ≤ 1 s; medians of %d)\n",
		p.Round(time.Millisecond), s.Round(time.Millisecond), (p + s).Round(time.Millisecond), len(plans))
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkProjectOrchestration runs a project of 6 tasks in 3 phases whose tasks write
// documents only (validation has no toolchain to run) with the scripted model answering at
// once, from StartProject to PENDING_REVIEW, and prints what the project's own orchestration
// costs per task beyond the task loop's: the wall time, less the time its task jobs ran
// (each job from its creation to its end) and the time the scripted model took to answer
// the project's own calls outside them (its phase revisions and its review: a model's
// latency, which the zero-latency model does not have; the demo benchmark counts
// it apart likewise), divided by the tasks. Target: ≤ 10 ms per task.
func BenchmarkProjectOrchestration(b *testing.B) {
	pc := agentv1.NewProjectServiceClient(dial(b, "agent"))
	var pers []time.Duration
	for i := 0; i < b.N; i++ {
		repo := fmt.Sprintf("local/bench-project-run-%d-%d", time.Now().UnixNano(), i)
		if code, body := rest(b, http.MethodPost, "/v1/repos", token, map[string]any{"repo": repo, "auto_init": true}); code != http.StatusOK {
			b.Fatalf("create repo: %d %v", code, body)
		}
		code, body := rest(b, http.MethodPost, "/v1/projects", token, map[string]any{"repo": repo, "request": "Six notes [PROJ-BENCH-RUN]"})
		if code != http.StatusOK {
			b.Fatalf("plan: %d %v", code, body)
		}
		id := body["project"].(map[string]any)["id"].(string)
		// Followed as a person watching it would (polling would load the machine the
		// project runs on).
		ctx, cancel := context.WithTimeout(authed(context.Background()), 5*time.Minute)
		stream, err := pc.WatchProject(ctx, &agentv1.WatchProjectRequest{Id: id})
		if err != nil {
			b.Fatal(err)
		}
		if code, body := rest(b, http.MethodPost, "/v1/projects/"+id+":start", token, map[string]any{}); code != http.StatusOK {
			b.Fatalf("start: %d %v", code, body)
		}
		for {
			ev, err := stream.Recv()
			if err != nil {
				b.Fatalf("watch project %s: %v", id, err)
			}
			if sc := ev.GetStatusChange(); sc != nil {
				if sc.Status == agentv1.ProjectStatus_PROJECT_STATUS_PENDING_REVIEW {
					break
				}
				switch sc.Status {
				case agentv1.ProjectStatus_PROJECT_STATUS_FAILED, agentv1.ProjectStatus_PROJECT_STATUS_CANCELLED, agentv1.ProjectStatus_PROJECT_STATUS_HUMAN_NEEDED:
					b.Fatalf("project %s: %v", id, sc)
				}
			}
		}
		cancel()
		code, got := rest(b, http.MethodGet, "/v1/projects/"+id, token, nil)
		if code != http.StatusOK {
			b.Fatalf("get project: %d %v", code, got)
		}
		p := got["project"].(map[string]any)
		// The project's own clock: from its start to its last change (the review).
		started, _ := time.Parse(time.RFC3339Nano, p["start_time"].(string))
		updated, _ := time.Parse(time.RFC3339Nano, p["update_time"].(string))
		wall := updated.Sub(started)
		code, jobs := rest(b, http.MethodGet, "/v1/jobs?project_id="+id+"&page_size=200", token, nil)
		if code != http.StatusOK {
			b.Fatalf("jobs: %d %v", code, jobs)
		}
		var spans []llmSpan
		for _, j := range jobs["jobs"].([]any) {
			jm := j.(map[string]any)
			c, _ := time.Parse(time.RFC3339Nano, jm["create_time"].(string))
			e, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(jm["end_time"]))
			if e.IsZero() {
				b.Fatalf("job %v has no end", jm["id"])
			}
			spans = append(spans, llmSpan{c, e})
		}
		if len(spans) != 6 {
			b.Fatalf("%d jobs, want 6", len(spans))
		}
		sort.Slice(spans, func(i, j int) bool { return spans[i].from.Before(spans[j].from) })
		var inJobs, gaps time.Duration
		for i, sp := range spans {
			inJobs += sp.to.Sub(sp.from)
			if i > 0 {
				gaps += sp.from.Sub(spans[i-1].to)
			}
		}
		n := len(spans)
		setup, tail := spans[0].from.Sub(started), updated.Sub(spans[n-1].to)
		model, calls := llmTime.within(started, updated, spans)
		per := (wall - inJobs - model) / time.Duration(n)
		pers = append(pers, per)
		fmt.Printf("project of 6 document tasks: %s from start to review, %s of it in the task jobs and %s in the scripted model's answers to the project's own %d calls; "+
			"orchestration %s per task (target ≤ 10 ms): %s before the first job (repository, sandbox), %s between jobs (%s each: taking a job's files, the phase revisions, the next job), "+
			"%s after the last (the review), model answers included\n",
			wall.Round(time.Millisecond), inJobs.Round(time.Millisecond), model.Round(100*time.Microsecond), calls, per.Round(100*time.Microsecond),
			setup.Round(time.Millisecond), gaps.Round(time.Millisecond), (gaps / time.Duration(n-1)).Round(100*time.Microsecond), tail.Round(time.Millisecond))
		if code, body := rest(b, http.MethodPost, "/v1/reviews/"+p["review_id"].(string)+":reject", token, map[string]any{"reason": "benchmark"}); code != http.StatusOK {
			b.Fatalf("reject: %d %v", code, body)
		}
	}
	m := median(pers)
	b.ReportMetric(float64(m.Microseconds())/1000, "ms/task-overhead")
	fmt.Printf("project orchestration: %s per task, the median of %d projects (target ≤ 10 ms)\n", m.Round(100*time.Microsecond), len(pers))
}
