package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/thefold/thefold/pkg/client"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
)

// The commands of a CREW project: its workers (pool), a person's words to one of them or to
// the project (message), and stopping and continuing one (interrupt, resume-worker).

const exampleProject = "4f1a2b3c-5d6e-4f70-8a9b-0c1d2e3f4a5b"

// planFlags are thefold projects plan's flags.
type planFlags struct {
	repo, mode, mergePolicy, checkCommand string
	maxWorkers, minQuality                int32
}

// crewOnlyFlags are plan's flags that only a CREW project takes.
var crewOnlyFlags = []string{"max-workers", "merge-policy", "min-quality", "check-command"}

// request is the PlanProjectRequest of the command line, checked before connecting:
// changed says which flags were given.
func (f planFlags) request(changed func(string) bool, args []string) (*agentv1.PlanProjectRequest, error) {
	req := &agentv1.PlanProjectRequest{Repo: f.repo}
	if changed("mode") {
		v, ok := agentv1.ProjectMode_value["PROJECT_MODE_"+strings.ToUpper(f.mode)]
		if !ok || v == 0 {
			return nil, usageError{fmt.Errorf("--mode %q: one of review, session, crew", f.mode)}
		}
		req.Mode = agentv1.ProjectMode(v)
	}
	crew := req.Mode == agentv1.ProjectMode_PROJECT_MODE_CREW
	if len(args) > 0 {
		req.Request = args[0]
	}
	if strings.TrimSpace(req.Request) == "" && !crew {
		return nil, usageError{errors.New(`want "REQUEST" (only --mode crew plans without one: from the repository's open issues)`)}
	}
	for _, name := range crewOnlyFlags {
		if changed(name) && !crew {
			return nil, usageError{fmt.Errorf("--%s is for --mode crew only", name)}
		}
	}
	if changed("max-workers") {
		if f.maxWorkers < 1 || f.maxWorkers > 10 {
			return nil, usageError{fmt.Errorf("--max-workers %d: 1 to 10", f.maxWorkers)}
		}
		req.MaxWorkers = f.maxWorkers
	}
	if changed("merge-policy") {
		v, ok := agentv1.MergePolicy_value["MERGE_POLICY_"+strings.ToUpper(f.mergePolicy)]
		if !ok || v == 0 {
			return nil, usageError{fmt.Errorf("--merge-policy %q: human or auto", f.mergePolicy)}
		}
		req.MergePolicy = agentv1.MergePolicy(v)
	}
	if changed("min-quality") {
		if req.MergePolicy != agentv1.MergePolicy_MERGE_POLICY_AUTO {
			return nil, usageError{errors.New("--min-quality is for --merge-policy auto only")}
		}
		if f.minQuality < 1 || f.minQuality > 10 {
			return nil, usageError{fmt.Errorf("--min-quality %d: 1 to 10", f.minQuality)}
		}
		req.AutoMergeMinQuality = f.minQuality
	}
	if changed("check-command") {
		if n := utf8.RuneCountInString(f.checkCommand); n > 1000 {
			return nil, usageError{fmt.Errorf("--check-command: %d characters, at most 1000", n)}
		}
		req.CheckCommand = f.checkCommand
	}
	return req, nil
}

// workerTarget is the worker a command is for: --worker N or --task PROJECT_TASK_ID.
type workerTarget struct {
	worker int32
	task   string
}

// check is the usage error of a target given wrongly. required: exactly one of the two;
// otherwise at most one (neither is the project itself).
func (t workerTarget) check(changed func(string) bool, required bool) error {
	byWorker, byTask := changed("worker"), changed("task")
	switch {
	case required && byWorker == byTask:
		return usageError{errors.New("give exactly one of --worker N or --task PROJECT_TASK_ID")}
	case byWorker && byTask:
		return usageError{errors.New("give at most one of --worker N or --task PROJECT_TASK_ID (neither: to the project itself)")}
	case byWorker && t.worker < 1:
		return usageError{fmt.Errorf("--worker %d: workers are numbered from 1", t.worker)}
	case byTask && strings.TrimSpace(t.task) == "":
		return usageError{errors.New("--task is empty")}
	}
	return nil
}

func (t *workerTarget) flags(cmd *cobra.Command) {
	cmd.Flags().Int32Var(&t.worker, "worker", 0, "the worker's number (thefold projects pool)")
	cmd.Flags().StringVar(&t.task, "task", "", "the project task the worker runs (its id in thefold projects get)")
}

// messageText is a message's words: the arguments after the project's id.
// With reorder set (--prioritize, --hold or --release) the words may be left out.
func messageText(args []string, reorder bool) (string, error) {
	if len(args) < 1 || (len(args) < 2 && !reorder) {
		return "", usageError{fmt.Errorf("want PROJECT_ID TEXT..., got %d arguments", len(args))}
	}
	text := strings.Join(args[1:], " ")
	if strings.TrimSpace(text) == "" && !reorder {
		return "", usageError{errors.New("the message TEXT is empty")}
	}
	return text, nil
}

func crewCommands(g *globals) []*cobra.Command {
	var (
		target                    workerTarget
		requestID                 string
		req                       *agentv1.PostProjectMessageRequest
		prioritize, hold, release []string
	)
	message := &cobra.Command{
		Use:   "message PROJECT_ID [--worker N | --task PROJECT_TASK_ID] TEXT...",
		Short: "Send a message to a worker of a crew project, or to the project itself",
		Long: `message sends your words to one worker of a running (or paused) crew project, named by
its number (--worker) or by the project task it runs (--task): its job reads them, as
yours, at its next model call; a worker you interrupted continues with them. Naming
neither sends the message to the project: guidance for every task started after it.
--prioritize, --hold and --release (to the project only) re-order the crew: tasks to start
first, tasks not to start until released, and their release; the words are optional then.

The words are the arguments after PROJECT_ID, joined by spaces; put -- before words that
start with a dash. A retry with the same --request-id sends the message once.`,
		Example: `  thefold projects message ` + exampleProject + ` --worker 2 "The store already has a migration helper; use it"
  thefold projects message ` + exampleProject + ` --task 7d2e9a1b-3c4f-4e5a-8b6c-1d0e2f3a4b5c Keep the old endpoint working
  thefold projects message ` + exampleProject + ` Prefer table tests everywhere
  thefold projects message ` + exampleProject + ` --prioritize 7d2e9a1b-3c4f-4e5a-8b6c-1d0e2f3a4b5c --hold 0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d`,
		Args: cobra.ArbitraryArgs,
		PreRunE: func(cmd *cobra.Command, args []string) error {
			reorder := len(prioritize)+len(hold)+len(release) > 0
			text, err := messageText(args, reorder)
			if err != nil {
				return err
			}
			if err := target.check(cmd.Flags().Changed, false); err != nil {
				return err
			}
			if reorder && (cmd.Flags().Changed("worker") || cmd.Flags().Changed("task")) {
				return usageError{errors.New("--prioritize, --hold and --release re-order the crew itself: not with --worker or --task")}
			}
			if requestID == "" {
				requestID = uuid.NewString()
			}
			req = &agentv1.PostProjectMessageRequest{ProjectId: args[0], Worker: target.worker, ProjectTaskId: target.task,
				Text: text, RequestId: requestID, Prioritize: prioritize, Hold: hold, Release: release}
			return nil
		},
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.Projects().PostProjectMessage(cmd.Context(), req)
			if err != nil {
				return err
			}
			return g.print(resp.Message, func(w *tabwriter.Writer) { printMessage(w, resp.Message) })
		}),
	}
	target.flags(message)
	message.Flags().StringVar(&requestID, "request-id", "", "an idempotency key: a retry with it sends the message once (default: a fresh one)")
	message.Flags().StringSliceVar(&prioritize, "prioritize", nil, "project tasks to start before any other ready task, in this order (repeat or comma-separate)")
	message.Flags().StringSliceVar(&hold, "hold", nil, "pending project tasks not to start until released")
	message.Flags().StringSliceVar(&release, "release", nil, "held project tasks to release")

	// interrupt and resume-worker are one worker's controls: each prints the worker after.
	var reason string
	control := func(use, short, long, example string, call func(cmd *cobra.Command, c *client.Client, id string, t workerTarget) (*agentv1.ProjectWorker, error)) *cobra.Command {
		var t workerTarget
		cmd := &cobra.Command{
			Use: use, Short: short, Long: long, Example: example, Args: exactArgs(1, "PROJECT_ID"),
			PreRunE: func(cmd *cobra.Command, _ []string) error { return t.check(cmd.Flags().Changed, true) },
			RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
				wk, err := call(cmd, c, args[0], t)
				if err != nil {
					return err
				}
				return g.print(wk, func(w *tabwriter.Writer) { printWorkers(w, []*agentv1.ProjectWorker{wk}, time.Now()) })
			}),
		}
		t.flags(cmd)
		return cmd
	}
	interrupt := control("interrupt PROJECT_ID (--worker N | --task PROJECT_TASK_ID)",
		"Stop what one worker of a crew project is doing; it waits for a message or resume-worker",
		`interrupt cancels the worker's current model call or command; its job waits, paused at
its checkpoint, until you send it a message (thefold projects message) or resume it
(thefold projects resume-worker). A worker already interrupted is shown as it is.`,
		"  thefold projects interrupt "+exampleProject+` --worker 2 --reason "wrong approach, wait"`+
			"\n  thefold projects interrupt "+exampleProject+" --task 7d2e9a1b-3c4f-4e5a-8b6c-1d0e2f3a4b5c",
		func(cmd *cobra.Command, c *client.Client, id string, t workerTarget) (*agentv1.ProjectWorker, error) {
			resp, err := c.Projects().InterruptWorker(cmd.Context(), &agentv1.InterruptWorkerRequest{ProjectId: id, Worker: t.worker,
				ProjectTaskId: t.task, Reason: reason})
			return resp.GetWorker(), err
		})
	interrupt.Flags().StringVar(&reason, "reason", "", "why (kept as its job's status reason)")
	resume := control("resume-worker PROJECT_ID (--worker N | --task PROJECT_TASK_ID)",
		"Continue an interrupted worker of a crew project from its checkpoint", "",
		"  thefold projects resume-worker "+exampleProject+" --worker 2",
		func(cmd *cobra.Command, c *client.Client, id string, t workerTarget) (*agentv1.ProjectWorker, error) {
			resp, err := c.Projects().ResumeWorker(cmd.Context(), &agentv1.ResumeWorkerRequest{ProjectId: id, Worker: t.worker, ProjectTaskId: t.task})
			return resp.GetWorker(), err
		})

	pool := &cobra.Command{
		Use:   "pool PROJECT_ID",
		Short: "Show a crew project's workers: each idle or on which task, its job's phase, PR and cost",
		Example: "  thefold projects pool " + exampleProject + "\n  watch -n 5 thefold projects pool " + exampleProject +
			"\n  thefold projects pool " + exampleProject + ` -o json | jq '.workers[] | select(.state == "WORKER_STATE_WAITING")'`,
		Args: exactArgs(1, "PROJECT_ID"),
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Projects().GetProjectPool(cmd.Context(), &agentv1.GetProjectPoolRequest{Id: args[0]})
			if err != nil {
				return err
			}
			return g.print(resp, func(w *tabwriter.Writer) { printPool(w, resp, time.Now()) })
		}),
	}
	return []*cobra.Command{message, interrupt, resume, pool}
}

// printPool is the pool as a table, a line per worker, the tasks waiting for one, and the
// merge queue.
func printPool(w io.Writer, resp *agentv1.GetProjectPoolResponse, now time.Time) {
	printWorkers(w, resp.Workers, now)
	fmt.Fprintf(w, "\n%d tasks ready for a worker\n", resp.ReadyTasks)
	if len(resp.MergeQueue) == 0 {
		return
	}
	fmt.Fprintf(w, "\nMERGE QUEUE\tISSUE\tTASK\tPR\tSTATUS\n")
	for i, e := range resp.MergeQueue {
		pos := fmt.Sprint(i + 1)
		if e.InGroup {
			pos += " (group)"
		}
		status := "-"
		if e.StatusReason != "" {
			status = firstLine(e.StatusReason, 80)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", pos, issueRef(e.IssueNumber), firstLine(e.Title, 40), prRef(e.PullRequest.GetNumber()), status)
	}
}

func printWorkers(w io.Writer, workers []*agentv1.ProjectWorker, now time.Time) {
	fmt.Fprintln(w, "WORKER\tSTATE\tISSUE\tTASK\tPHASE\tATTEMPT\tPR\tLAST EVENT\tCOST")
	for _, wk := range workers {
		title, phase, attempt, last := "-", "-", "-", "-"
		if wk.Title != "" {
			title = firstLine(wk.Title, 40)
		}
		if wk.Phase != agentv1.JobPhase_JOB_PHASE_UNSPECIFIED {
			phase = enumName(wk.Phase, "JOB_PHASE_")
		}
		if wk.Attempt > 0 {
			attempt = fmt.Sprint(wk.Attempt)
		}
		if wk.LastEventTime != nil {
			last = fmt.Sprintf("%s %s ago", enumName(wk.LastEventType, "JOB_EVENT_TYPE_"), age(now.Sub(wk.LastEventTime.AsTime())))
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", wk.Number, enumName(wk.State, "WORKER_STATE_"), issueRef(wk.IssueNumber),
			title, phase, attempt, prRef(wk.PullRequest.GetNumber()), last, dollars(wk.GetUsage().GetCostMicros()))
	}
}

// printMessage is a posted message: whom it went to, when, and its words.
func printMessage(w io.Writer, m *agentv1.ProjectMessage) {
	to := "the project"
	if m.Worker != 0 {
		to = fmt.Sprintf("worker %d", m.Worker)
	}
	fmt.Fprintf(w, "message\t%s\nto\t%s\n", m.Id, to)
	if m.ProjectTaskId != "" {
		fmt.Fprintf(w, "task\t%s\n", m.ProjectTaskId)
	}
	if m.JobId != "" {
		fmt.Fprintf(w, "job\t%s\n", m.JobId)
	}
	if m.CreateTime != nil {
		fmt.Fprintf(w, "sent\t%s\n", m.CreateTime.AsTime().Local().Format(time.DateTime))
	}
	fmt.Fprintf(w, "text\t%s\n", strings.ReplaceAll(m.Text, "\n", "\n\t"))
}

// age is how long ago, as short as a glance wants it.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func issueRef(n int32) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("#%d", n)
}

func prRef(n int32) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("PR #%d", n)
}

// printCrew is what a CREW project adds to its plan: how its workers merge.
func printCrew(w io.Writer, p *agentv1.Project) {
	workers := "3 (default)"
	if p.MaxWorkers > 0 {
		workers = fmt.Sprint(p.MaxWorkers)
	}
	merge := "human"
	if p.MergePolicy == agentv1.MergePolicy_MERGE_POLICY_AUTO {
		q := "8 (default)"
		if p.AutoMergeMinQuality > 0 {
			q = fmt.Sprint(p.AutoMergeMinQuality)
		}
		merge = "auto, review quality at least " + q
	}
	fmt.Fprintf(w, "mode\tcrew\nworkers\t%s\nmerge\t%s\nchecks\t%s\n", workers, merge, orElse(p.CheckCommand, "the sandbox's validation (build, lint, tests)"))
}

// crewTaskLine is a CREW task: status, worker, issue, pull request, and what waits on a person.
func crewTaskLine(w io.Writer, t *agentv1.ProjectTask, deps string) {
	worker, checks := "-", ""
	if t.Worker != 0 {
		worker = fmt.Sprintf("w%d", t.Worker)
	}
	if t.CheckFailures > 0 {
		checks = fmt.Sprintf("checks failed %d×", t.CheckFailures)
	}
	note := ""
	if t.Status == agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_HUMAN_NEEDED && t.StatusReason != "" {
		note = " — needs a person: " + firstLine(t.StatusReason, 100)
	} else if t.CheckFailures > 0 && t.Checks != "" {
		note = " — checks: " + firstLine(t.Checks, 100)
	}
	fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\t%s%s%s\n", t.Id, enumName(t.Status, "PROJECT_TASK_STATUS_"), worker, issueRef(t.IssueNumber),
		prRef(t.PullRequest.GetNumber()), checks, t.Title, deps, note)
}

// crewTags prefixes a CREW project's events with their worker and issue ("[w2 #14]"),
// asking the project for its tasks' issues when an event names a task it does not know.
type crewTags struct {
	load   func() (*agentv1.Project, error)
	issues map[string]int32
	asked  map[string]bool
}

func (c *crewTags) issue(taskID string) int32 {
	if n, ok := c.issues[taskID]; ok || taskID == "" || c.asked[taskID] {
		return n
	}
	if c.issues == nil {
		c.issues, c.asked = map[string]int32{}, map[string]bool{}
	}
	c.asked[taskID] = true
	p, err := c.load()
	if err != nil {
		return 0 // the line goes without its issue rather than the watch failing
	}
	for _, ph := range p.GetPhases() {
		for _, t := range ph.Tasks {
			c.issues[t.Id] = t.IssueNumber
		}
	}
	return c.issues[taskID]
}

// prefix is "[w2 #14]": the worker, then the issue, else the start of the task's id.
func (c *crewTags) prefix(worker int32, taskID string) string {
	var parts []string
	if worker != 0 {
		parts = append(parts, fmt.Sprintf("w%d", worker))
	}
	if n := c.issue(taskID); n != 0 {
		parts = append(parts, issueRef(n))
	} else if taskID != "" {
		parts = append(parts, shortID(taskID))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// crewEventLine is a CREW project's event about one worker or task, without the project
// task's id (its prefix names it).
func crewEventLine(ev *agentv1.WatchProjectResponse) string {
	switch p := ev.Payload.(type) {
	case *agentv1.WatchProjectResponse_Task:
		what := strings.ReplaceAll(strings.TrimPrefix(enumName(ev.Type, "PROJECT_EVENT_TYPE_"), "task_"), "_", " ")
		if pr := p.Task.GetPullRequest(); ev.Type == agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_PULL_REQUEST_OPENED && pr != nil {
			what += fmt.Sprintf(" %s %s", prRef(pr.Number), pr.Url)
		}
		if p.Task.Reason != "" {
			what += ": " + firstLine(p.Task.Reason, 120)
		}
		return what
	case *agentv1.WatchProjectResponse_JobEvent:
		return eventLine(p.JobEvent.Event)
	case *agentv1.WatchProjectResponse_Message:
		return "message: " + firstLine(p.Message.Text, 120)
	}
	return projectEventLine(ev)
}
