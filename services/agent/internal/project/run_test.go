package project

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/testenv"
	"github.com/thefold/thefold/pkg/tokens"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// --- trimForReview ---------------------------------------------------------------------------

// source is a file of n lines of code, each of about the same number of tokens.
func source(name string, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "\t%s%d := compute(%q, %d) // the line of %s", name, i, name, i*7, name)
	}
	return b.String()
}

// cutNote is the note trimForReview ends a cut file with: of its lines, or of its bytes
// for a file of one line.
var cutNote = regexp.MustCompile(`\n… \((\d+) of its (\d+) (lines|bytes) not shown: the file is cut to fit the review's budget\)$`)

// cut splits a review file's content into what was kept of the file and the note, and
// reads the note's figures (in lines); ok is false when the content has no note (the file
// is whole).
func cut(t *testing.T, content string) (kept, note string, hidden, total int, ok bool) {
	t.Helper()
	kept, note, hidden, total, unit, ok := cutIn(content)
	if ok && unit != "lines" {
		t.Errorf("%q…: the note counts %s, want lines", content[:min(len(content), 60)], unit)
	}
	return kept, note, hidden, total, ok
}

func cutIn(content string) (kept, note string, hidden, total int, unit string, ok bool) {
	loc := cutNote.FindStringSubmatchIndex(content)
	if loc == nil {
		return content, "", 0, 0, "", false
	}
	hidden, _ = strconv.Atoi(content[loc[2]:loc[3]])
	total, _ = strconv.Atoi(content[loc[4]:loc[5]])
	return content[:loc[0]], content[loc[0]:], hidden, total, content[loc[6]:loc[7]], true
}

func TestTrimForReviewKeepsSmallFilesWhole(t *testing.T) {
	files := []store.ProjectFile{
		{Path: "go.mod", Content: []byte("module example.com/todo\n\ngo 1.24\n")},
		{Path: "main.go", Content: []byte(source("main", 5))},
		{Path: "README.md", Content: []byte("# todo\n")},
	}
	budget := 0
	for _, f := range files {
		budget += tokens.Count(string(f.Content))
	}
	// Exactly the budget the files need: each still fits its share (the smallest are taken
	// first and leave what they do not use to the rest).
	out := trimForReview(files, budget)
	if len(out) != len(files) {
		t.Fatalf("%d review files for %d files", len(out), len(files))
	}
	for i, f := range files {
		rf := out[i]
		if rf.Path != f.Path || rf.Action != typev1.FileAction_FILE_ACTION_MODIFY || rf.Content != string(f.Content) {
			t.Errorf("file %d = {%s %v %q}, want %s whole (MODIFY, %q)", i, rf.Path, rf.Action, rf.Content, f.Path, f.Content)
		}
	}
}

func TestTrimForReviewCutsALargeFileToItsShare(t *testing.T) {
	small := "package small\n"
	big := source("big", 400)
	files := []store.ProjectFile{{Path: "big.go", Content: []byte(big)}, {Path: "small.go", Content: []byte(small)}}
	const budget = 1000
	if tokens.Count(big) <= 2*budget {
		t.Fatalf("the big file is only %d tokens: it does not test a cut", tokens.Count(big))
	}
	out := trimForReview(files, budget)
	if out[1].Content != small {
		t.Errorf("small.go = %q, want it whole", out[1].Content)
	}
	kept, note, hidden, total, ok := cut(t, out[0].Content)
	if !ok {
		t.Fatalf("big.go has no note of what was left out: %q…", out[0].Content[:min(len(out[0].Content), 200)])
	}
	lines := strings.Split(big, "\n")
	keptLines := strings.Split(kept, "\n")
	if total != len(lines) || hidden != len(lines)-len(keptLines) || hidden <= 0 {
		t.Errorf("note %q: want %d of its %d lines not shown", note, len(lines)-len(keptLines), len(lines))
	}
	if !slices.Equal(keptLines, lines[:len(keptLines)]) {
		t.Errorf("big.go is not cut to its first lines: %q…", kept[:min(len(kept), 200)])
	}
	// Its share is what the small file left of the budget; what is kept fits it, and fills
	// a fair part of it (the cut is not needlessly deep).
	share := budget - tokens.Count(small)
	if n := tokens.Count(kept); n > share || n < share/2 {
		t.Errorf("big.go keeps %d tokens (%d lines) of a share of %d", n, len(keptLines), share)
	}
	if out[0].Path != "big.go" || out[0].Action != typev1.FileAction_FILE_ACTION_MODIFY {
		t.Errorf("big.go = {%s %v}", out[0].Path, out[0].Action)
	}
}

func TestTrimForReviewSharesTheBudgetFairly(t *testing.T) {
	// Two large files: the smaller is taken first and gets half the budget, not all of it.
	a, b := source("a", 200), source("b", 300)
	const budget = 1000
	out := trimForReview([]store.ProjectFile{{Path: "b.go", Content: []byte(b)}, {Path: "a.go", Content: []byte(a)}}, budget)
	keptA, _, _, _, okA := cut(t, out[1].Content)
	keptB, _, _, _, okB := cut(t, out[0].Content)
	if !okA || !okB {
		t.Fatalf("both files should be cut: a.go cut %v, b.go cut %v", okA, okB)
	}
	if n := tokens.Count(keptA); n > budget/2 || n < budget/4 {
		t.Errorf("a.go keeps %d tokens, want at most its fair share %d (and not much less)", n, budget/2)
	}
	left := budget - tokens.Count(out[1].Content)
	if n := tokens.Count(keptB); n > left || n < left/2 {
		t.Errorf("b.go keeps %d tokens of the %d a.go left", n, left)
	}
}

func TestTrimForReviewSendsDeletedFilesWithoutContent(t *testing.T) {
	files := []store.ProjectFile{
		{Path: "old.go", Deleted: true, Content: []byte("package old\n")},
		{Path: "gone.go", Deleted: true},
		{Path: "new.go", Content: []byte("package new\n")},
	}
	for _, budget := range []int{0, 1000} {
		out := trimForReview(files, budget)
		for i, rf := range out[:2] {
			if rf.Path != files[i].Path || rf.Action != typev1.FileAction_FILE_ACTION_DELETE || rf.Content != "" {
				t.Errorf("budget %d: deleted %s = {%s %v %q}, want DELETE with no content", budget, files[i].Path, rf.Path, rf.Action, rf.Content)
			}
		}
		if out[2].Action != typev1.FileAction_FILE_ACTION_MODIFY {
			t.Errorf("budget %d: new.go is %v", budget, out[2].Action)
		}
	}
	// A deleted file takes nothing of the budget: the file after it gets all of it.
	out := trimForReview(files, tokens.Count("package new\n"))
	if out[2].Content != "package new\n" {
		t.Errorf("new.go = %q, want it whole: the deleted files use none of the budget", out[2].Content)
	}
}

func TestTrimForReviewKeepsTheInputOrder(t *testing.T) {
	// Sizes deliberately out of order: the smallest-first pass must not reorder the output.
	files := []store.ProjectFile{
		{Path: "z/large.go", Content: []byte(source("large", 60))},
		{Path: "a/tiny.go", Content: []byte("package a\n")},
		{Path: "m/gone.go", Deleted: true},
		{Path: "b/medium.go", Content: []byte(source("medium", 10))},
		{Path: "c/small.go", Content: []byte(source("small", 2))},
	}
	for _, budget := range []int{0, 150, 100000} {
		out := trimForReview(files, budget)
		var got, want []string
		for i := range files {
			got, want = append(got, out[i].GetPath()), append(want, files[i].Path)
		}
		if !slices.Equal(got, want) {
			t.Errorf("budget %d: paths %v, want the input order %v", budget, got, want)
		}
		for i, f := range files {
			if f.Deleted {
				continue
			}
			if kept, _, _, _, _ := cut(t, out[i].Content); !strings.HasPrefix(string(f.Content), kept) {
				t.Errorf("budget %d: %s holds %q…, not its own content", budget, f.Path, kept[:min(len(kept), 60)])
			}
		}
	}
}

func TestTrimForReviewZeroBudgetKeepsEveryFileCutToOneLine(t *testing.T) {
	files := []store.ProjectFile{
		{Path: "a.go", Content: []byte(source("a", 5))},
		{Path: "b.go", Content: []byte(source("b", 20))},
		{Path: "c.go", Deleted: true},
		{Path: "d.go", Content: []byte(source("d", 3))},
	}
	for _, budget := range []int{0, -10} {
		out := trimForReview(files, budget)
		if len(out) != len(files) {
			t.Fatalf("budget %d: %d review files for %d files", budget, len(out), len(files))
		}
		for i, f := range files {
			rf := out[i]
			if rf == nil || rf.Path != f.Path {
				t.Fatalf("budget %d: file %d is %v, want %s", budget, i, rf, f.Path)
			}
			if f.Deleted {
				continue
			}
			lines := strings.Split(string(f.Content), "\n")
			kept, note, hidden, total, ok := cut(t, rf.Content)
			if !ok || kept != lines[0] || hidden != len(lines)-1 || total != len(lines) {
				t.Errorf("budget %d: %s = %q, want its first line %q and a note of %d of its %d lines not shown (note %q)",
					budget, f.Path, rf.Content, lines[0], len(lines)-1, len(lines), note)
			}
		}
	}
}

func TestTrimForReviewStaysWithinTheBudget(t *testing.T) {
	// One goroutine's computation: the race detector multiplies its time by ten and finds
	// nothing in it (make test-unit runs it without -race).
	testenv.CPUBound(t)
	var files []store.ProjectFile
	for i, n := range []int{1, 3, 8, 20, 45, 90, 150, 300, 600} {
		files = append(files, store.ProjectFile{Path: fmt.Sprintf("f%d.go", i), Content: []byte(source(fmt.Sprintf("f%d_", i), n))})
	}
	files = append(files, store.ProjectFile{Path: "gone.go", Deleted: true})
	all := 0
	for _, f := range files {
		all += tokens.Count(string(f.Content))
	}
	for _, budget := range []int{40, 100, 500, 1000, 3000, 8000, all - 1, all, 10 * all} {
		out := trimForReview(files, budget)
		sum, notes, cuts, floor := 0, 0, 0, 0
		for _, rf := range out {
			sum += tokens.Count(rf.Content)
			if kept, note, _, _, _, ok := cutIn(rf.Content); ok {
				notes += tokens.Count(note)
				cuts++
				if !strings.Contains(kept, "\n") {
					floor += tokens.Count(kept) // a file keeps at least its first line
				}
			}
		}
		// A budget too small for a line of each file is exceeded by those first lines only.
		if sum > budget+notes+floor {
			t.Errorf("budget %d: the files come to %d tokens, over the budget, their %d notes (%d tokens) and the %d tokens of files cut to one line",
				budget, sum, cuts, notes, floor)
		}
		if budget >= 1000 && sum > budget+notes {
			t.Errorf("budget %d: the files come to %d tokens, over the budget and their %d notes (%d tokens)", budget, sum, cuts, notes)
		}
		if budget >= all && (cuts > 0 || sum != all) {
			t.Errorf("budget %d (the files need %d): %d files cut, %d tokens sent", budget, all, cuts, sum)
		}
		if budget < all && cuts == 0 {
			t.Errorf("budget %d (the files need %d): nothing was cut", budget, all)
		}
	}
}

// A file of one long line (minified code, a generated JSON document) cannot be cut by
// lines: it is cut by bytes to its share, not sent whole under a note that hides nothing.
func TestTrimForReviewCutsAFileOfOneLongLineByBytes(t *testing.T) {
	line := strings.Repeat(`{"name":"left-pad","version":"1.3.0","integrity":"sha512-é"},`, 1000)
	for _, budget := range []int{0, 500, 5000} {
		out := trimForReview([]store.ProjectFile{{Path: "vendor/bundle.min.js", Content: []byte(line)}}, budget)
		content := out[0].GetContent()
		kept, note, hidden, total, unit, ok := cutIn(content)
		if !ok || unit != "bytes" || total != len(line) || hidden != len(line)-len(kept) || hidden <= 0 {
			t.Errorf("budget %d: note %q (cut %v), want %d of its %d bytes not shown", budget, note, ok, len(line)-len(kept), len(line))
		}
		if !strings.HasPrefix(line, kept) || !utf8.ValidString(kept) {
			t.Errorf("budget %d: kept %q… is not a whole-character prefix of the file", budget, kept[:min(len(kept), 60)])
		}
		// Within the budget, give or take a token where the cut splits one.
		if n := tokens.Count(kept); n > budget+1 || n < budget*3/4 {
			t.Errorf("budget %d: a one-line file of %d tokens is cut to %d tokens", budget, tokens.Count(line), n)
		}
	}
}

// --- recordFile ------------------------------------------------------------------------------

func paths(fs []*agentv1.ProjectFile) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return out
}

func TestRecordFileAddsPathsSorted(t *testing.T) {
	p := &agentv1.Project{}
	for _, w := range []struct{ path, task string }{
		{"web/index.html", "t1"}, {"api/main.go", "t1"}, {"go.mod", "t2"}, {"api.go", "t2"}, {"api/handlers.go", "t3"},
	} {
		recordFile(p, w.path, w.task, false)
	}
	want := []string{"api.go", "api/handlers.go", "api/main.go", "go.mod", "web/index.html"}
	if got := paths(p.Files); !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	owners := map[string]string{"api.go": "t2", "api/handlers.go": "t3", "api/main.go": "t1", "go.mod": "t2", "web/index.html": "t1"}
	for _, f := range p.Files {
		if f.ProjectTaskId != owners[f.Path] || len(f.EarlierTaskIds) != 0 || f.Deleted {
			t.Errorf("%s = {task %s, earlier %v, deleted %v}, want {task %s, no history, not deleted}", f.Path, f.ProjectTaskId, f.EarlierTaskIds, f.Deleted, owners[f.Path])
		}
	}
}

func TestRecordFileKeepsTheHistoryOfAPath(t *testing.T) {
	p := &agentv1.Project{}
	recordFile(p, "b.go", "other", false)
	recordFile(p, "a.go", "t1", false)
	recordFile(p, "a.go", "t2", false)
	check := func(step, task string, earlier []string, deleted bool) {
		t.Helper()
		if len(p.Files) != 2 {
			t.Fatalf("%s: %d files %v, want a.go and b.go once each", step, len(p.Files), paths(p.Files))
		}
		f := p.Files[0]
		if f.Path != "a.go" || f.ProjectTaskId != task || !slices.Equal(f.EarlierTaskIds, earlier) || f.Deleted != deleted {
			t.Errorf("%s: %s = {task %s, earlier %v, deleted %v}, want {a.go task %s, earlier %v, deleted %v}", step, f.Path, f.ProjectTaskId,
				f.EarlierTaskIds, f.Deleted, task, earlier, deleted)
		}
	}
	check("a second task", "t2", []string{"t1"}, false)
	recordFile(p, "a.go", "t2", false)
	check("the same task again", "t2", []string{"t1"}, false)
	recordFile(p, "a.go", "t3", true)
	check("a third task deletes it", "t3", []string{"t1", "t2"}, true)
	recordFile(p, "a.go", "t3", false)
	check("the same task writes it again", "t3", []string{"t1", "t2"}, false)
	if b := p.Files[1]; b.Path != "b.go" || b.ProjectTaskId != "other" || len(b.EarlierTaskIds) != 0 {
		t.Errorf("b.go = {%s %s %v}, want it untouched", b.Path, b.ProjectTaskId, b.EarlierTaskIds)
	}
}

func TestRecordFileRecordsANewDeletedFile(t *testing.T) {
	p := &agentv1.Project{}
	recordFile(p, "legacy/old.go", "t1", true)
	if len(p.Files) != 1 || !p.Files[0].Deleted || p.Files[0].ProjectTaskId != "t1" || p.Files[0].Path != "legacy/old.go" {
		t.Fatalf("files %v, want legacy/old.go deleted by t1", p.Files)
	}
}

// --- skipDependents --------------------------------------------------------------------------

func TestSkipDependentsSkipsWhatDependsOnAFailedTask(t *testing.T) {
	task := func(id string, s agentv1.ProjectTaskStatus, deps ...string) *agentv1.ProjectTask {
		return &agentv1.ProjectTask{Id: id, Title: "build " + id, DependsOn: deps, Status: s}
	}
	const (
		completed = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED
		failed    = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_FAILED
		skipped   = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_SKIPPED
	)
	a := task("a", failed)
	// c comes before b, which it depends on: the skip must still reach it.
	c, b := task("c", pending, "b"), task("b", pending, "a")
	d := task("d", pending)
	e := task("e", completed, "a") // done before a failed (say, by hand): stays done
	f := task("f", pending, "c")
	g := task("g", pending, "d")
	h := task("h", pending, "e")
	i := task("i", failed, "a")
	j := task("j", pending, "d", "c", "b") // two failed dependencies: skipped once
	p := &agentv1.Project{Id: "p1", Phases: []*agentv1.ProjectPhase{
		{Number: 1, Name: "base", Tasks: []*agentv1.ProjectTask{a, c, b, d, e}},
		{Number: 2, Name: "more", Tasks: []*agentv1.ProjectTask{f, g, h, i, j}},
	}}
	x := &run{rec: &store.ProjectRecord{Project: p}}
	x.skipDependents(a)

	wantSkipped := map[string]struct {
		reason string
		phase  int32
	}{
		// The reason names the task that failed, for a dependent through others too.
		"b": {`depends on "build a" (a), which failed`, 1},
		"c": {`depends on "build a" (a), which failed`, 1},
		"f": {`depends on "build a" (a), which failed`, 2},
		"j": {`depends on "build a" (a), which failed`, 2},
	}
	for _, tk := range Tasks(p.Phases) {
		w, ok := wantSkipped[tk.Id]
		switch {
		case ok && (tk.Status != skipped || tk.StatusReason != w.reason):
			t.Errorf("%s = %v %q, want SKIPPED %q", tk.Id, tk.Status, tk.StatusReason, w.reason)
		case !ok && tk.StatusReason != "":
			t.Errorf("%s has a reason %q, want it untouched", tk.Id, tk.StatusReason)
		}
	}
	for tk, want := range map[*agentv1.ProjectTask]agentv1.ProjectTaskStatus{a: failed, d: pending, e: completed, g: pending, h: pending, i: failed} {
		if tk.Status != want {
			t.Errorf("%s = %v, want %v", tk.Id, tk.Status, want)
		}
	}

	seen := map[string]int{}
	for _, ev := range x.evs {
		ch := ev.GetTask()
		if ev.Type != agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_SKIPPED || ch == nil {
			t.Errorf("event %v, want only TASK_SKIPPED events", ev)
			continue
		}
		seen[ch.ProjectTaskId]++
		w, ok := wantSkipped[ch.ProjectTaskId]
		if !ok || ch.Status != skipped || ch.Reason != w.reason || ch.PhaseNumber != w.phase {
			t.Errorf("event for %s = {phase %d, %v, %q}, want {phase %d, SKIPPED, %q}", ch.ProjectTaskId, ch.PhaseNumber, ch.Status, ch.Reason, w.phase, w.reason)
		}
	}
	for id := range wantSkipped {
		if seen[id] != 1 {
			t.Errorf("%d TASK_SKIPPED events for %s, want 1", seen[id], id)
		}
	}
	if len(x.evs) != len(wantSkipped) {
		t.Errorf("%d events, want %d", len(x.evs), len(wantSkipped))
	}
}

func TestSkipDependentsOfATaskNothingDependsOn(t *testing.T) {
	a := &agentv1.ProjectTask{Id: "a", Title: "a", Status: agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_FAILED}
	b := &agentv1.ProjectTask{Id: "b", Title: "b", Status: pending}
	x := &run{rec: &store.ProjectRecord{Project: &agentv1.Project{Phases: []*agentv1.ProjectPhase{{Number: 1, Tasks: []*agentv1.ProjectTask{a, b}}}}}}
	x.skipDependents(a)
	if b.Status != pending || len(x.evs) != 0 {
		t.Errorf("b = %v, %d events; want b pending and no event", b.Status, len(x.evs))
	}
}

// --- ready and firstPending ------------------------------------------------------------------

func TestReadyWaitsForDependenciesDone(t *testing.T) {
	for _, c := range []struct {
		dep   agentv1.ProjectTaskStatus
		ready bool
	}{
		{agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED, true},
		{agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_SKIPPED, true},
		{agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING, false},
		{agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_RUNNING, false},
		{agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_FAILED, false},
	} {
		t.Run(c.dep.String(), func(t *testing.T) {
			dep := &agentv1.ProjectTask{Id: "dep", Status: c.dep}
			done := &agentv1.ProjectTask{Id: "done", Status: agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED}
			task := &agentv1.ProjectTask{Id: "task", Status: pending, DependsOn: []string{"done", "dep"}}
			second := &agentv1.ProjectPhase{Number: 2, Tasks: []*agentv1.ProjectTask{task}}
			p := &agentv1.Project{Phases: []*agentv1.ProjectPhase{{Number: 1, Tasks: []*agentv1.ProjectTask{done, dep}}, second}}
			got := ready(p, second)
			if c.ready && got != task {
				t.Errorf("ready = %v, want task (its dependency is %v)", got.GetId(), c.dep)
			}
			if !c.ready && got != nil {
				t.Errorf("ready = %v, want none (its dependency is %v)", got.GetId(), c.dep)
			}
		})
	}
}

func TestReadyIsTheFirstPendingTaskThatCanRun(t *testing.T) {
	st := func(id string, s agentv1.ProjectTaskStatus, deps ...string) *agentv1.ProjectTask {
		return &agentv1.ProjectTask{Id: id, Status: s, DependsOn: deps}
	}
	done := st("done", agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED)
	blocked := st("blocked", pending, "later")
	unknown := st("unknown", pending, "no-such-task")
	later := st("later", pending, "done")
	free := st("free", pending)
	ph := &agentv1.ProjectPhase{Number: 1, Tasks: []*agentv1.ProjectTask{done, blocked, unknown, later, free}}
	p := &agentv1.Project{Phases: []*agentv1.ProjectPhase{ph}}
	if got := ready(p, ph); got != later {
		t.Errorf("ready = %v, want later (done is not pending, blocked waits for later, unknown's dependency is none of the project's)", got.GetId())
	}
	later.Status = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_RUNNING
	if got := ready(p, ph); got != free {
		t.Errorf("with later running, ready = %v, want free", got.GetId())
	}
	free.Status = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED
	if got := ready(p, ph); got != nil {
		t.Errorf("with nothing runnable, ready = %v, want none", got.GetId())
	}
}

func TestFirstPending(t *testing.T) {
	completed := agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED
	phase := func(n int32, ss ...agentv1.ProjectTaskStatus) *agentv1.ProjectPhase {
		ph := &agentv1.ProjectPhase{Number: n}
		for i, s := range ss {
			ph.Tasks = append(ph.Tasks, &agentv1.ProjectTask{Id: fmt.Sprintf("p%dt%d", n, i), Status: s})
		}
		return ph
	}
	p := &agentv1.Project{Phases: []*agentv1.ProjectPhase{
		phase(1, completed, agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_SKIPPED),
		phase(2, agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_FAILED, agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_RUNNING),
		phase(3),
		phase(4, completed, pending),
		phase(5, pending),
	}}
	if got := firstPending(p); got != p.Phases[3] {
		t.Errorf("firstPending = phase %d, want phase 4", got.GetNumber())
	}
	p.Phases[3].Tasks[1].Status = completed
	if got := firstPending(p); got != p.Phases[4] {
		t.Errorf("firstPending = phase %d, want phase 5", got.GetNumber())
	}
	p.Phases[4].Tasks[0].Status = completed
	if got := firstPending(p); got != nil {
		t.Errorf("firstPending = phase %d, want none", got.GetNumber())
	}
	if got := firstPending(&agentv1.Project{}); got != nil {
		t.Errorf("firstPending of no phases = phase %d, want none", got.GetNumber())
	}
}

// --- branchName ------------------------------------------------------------------------------

func TestBranchName(t *testing.T) {
	const id = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	for _, c := range []struct{ title, want string }{
		{"Build a REST API for todos", "build-a-rest-api-for-todos"},
		{"  --Add OAuth2 (GitHub) login!!  ", "add-oauth2-github-login"},
		{"snake_case and CamelCase\tand\nnew lines", "snake-case-and-camelcase-and-new-lines"},
		{"v1.2.3 → v2.0", "v1-2-3-v2-0"},
		{"Café crème", "caf-cr-me"},
		{"", "work"},
		{"!!! ??? ***", "work"},
		{"日本語のタイトル", "work"},
		{strings.Repeat("a", 60), strings.Repeat("a", 40)},
		// The 40th character is a dash: it is trimmed, not kept at the end.
		{strings.Repeat("x", 39) + " tail", strings.Repeat("x", 39)},
		{"abcdefghij abcdefghij abcdefghij abcdefghij abcdefghij", "abcdefghij-abcdefghij-abcdefghij-abcdefg"},
	} {
		if got, want := branchName(c.title, id), "thefold/project-"+c.want+"-0f1e2d3c"; got != want {
			t.Errorf("branchName(%q) = %q, want %q", c.title, got, want)
		}
	}
}

func TestBranchNameIsAlwaysAValidSlug(t *testing.T) {
	valid := regexp.MustCompile(`^thefold/project-([a-z0-9]+(?:-[a-z0-9]+)*)-([0-9a-f]{8})$`)
	alphabet := []rune("aZ09 -_./!é日\t\n—")
	rng := rand.New(rand.NewPCG(28, 1))
	for range 2000 {
		title := make([]rune, rng.IntN(90))
		for i := range title {
			title[i] = alphabet[rng.IntN(len(alphabet))]
		}
		id := fmt.Sprintf("%08x-0000-4000-8000-000000000000", rng.Uint32())
		got := branchName(string(title), id)
		m := valid.FindStringSubmatch(got)
		if m == nil || len(m[1]) > 40 || m[2] != id[:8] {
			t.Fatalf("branchName(%q, %s) = %q: want thefold/project-<slug of at most 40>-%s", string(title), id, got, id[:8])
		}
	}
}

// --- request, firstNonEmpty, firstLine, truncate ---------------------------------------------

func TestRequest(t *testing.T) {
	for _, c := range []struct{ request, description, want string }{
		{"Build a todo app", "A todo app in Go", "Build a todo app"},
		{"", "3 tasks of o/r in 2 layers of their blocked-by graph", "3 tasks of o/r in 2 layers of their blocked-by graph"},
		{"", "", ""},
	} {
		if got := request(&agentv1.Project{Request: c.request, Description: c.description}); got != c.want {
			t.Errorf("request(%q, %q) = %q, want %q", c.request, c.description, got, c.want)
		}
	}
}

func TestFirstNonEmpty(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"", ""}, ""},
		{[]string{"", "", "c"}, "c"},
		{[]string{"a", "b"}, "a"},
		{[]string{"", "b", "c"}, "b"},
		{[]string{" ", "b"}, " "},
	} {
		if got := firstNonEmpty(c.in...); got != c.want {
			t.Errorf("firstNonEmpty(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestFirstLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"one line", "one line"},
		{"Title\nbody\nmore", "Title"},
		{"\n\n  Title  \nbody", "Title  "},
		{"   \n\t\n", ""},
		{"  padded  ", "padded"},
	} {
		if got := firstLine(c.in); got != c.want {
			t.Errorf("firstLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 0, ""},
		{"short", 10, "short"},
		{"exact", 5, "exact"},
		{"longer text", 6, "longer…"},
		{"abc", 0, "…"},
		{"héllo", 2, "h…"}, // é is 2 bytes: byte 2 is its second
		{"héllo", 3, "hé…"},
		{"ab😀cd", 3, "ab…"},
		{"ab😀cd", 5, "ab…"},
		{"ab😀cd", 6, "ab😀…"},
	} {
		if got := truncate(c.s, c.n); got != c.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

func TestTruncateNeverCutsACharacter(t *testing.T) {
	s := "Plan: añadir 日本語 support → then 😀 emoji, ß, and ascii"
	for n := range len(s) {
		got := truncate(s, n)
		// The longest prefix of s of at most n bytes that ends between characters.
		want := 0
		for i := range s {
			if i <= n {
				want = i
			}
		}
		prefix, ok := strings.CutSuffix(got, "…")
		if !ok || !utf8.ValidString(got) || prefix != s[:want] {
			t.Errorf("truncate(s, %d) = %q, want %q + \"…\"", n, got, s[:want])
		}
	}
	if got := truncate(s, len(s)); got != s {
		t.Errorf("truncate(s, len(s)) = %q, want s", got)
	}
}
