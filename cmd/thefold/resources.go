package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/thefold/thefold/pkg/client"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

type tabwriterWriter = tabwriter.Writer

// enumName is an enum value's name without its prefix, in lower case ("in_progress").
func enumName(s fmt.Stringer, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), prefix))
}

func tasksCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tasks", Short: "List, show, create, change and order tasks"}
	var (
		repo     string
		statuses []string
		limit    int32
	)
	list := &cobra.Command{
		Use:     "list",
		Short:   "List your tasks, newest first",
		Example: "  thefold tasks list --repo local/demo --status backlog --status in_progress\n  thefold tasks list -o json | jq '.[].title'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &tasksv1.ListTasksRequest{Repo: repo, PageSize: limit}
			for _, s := range statuses {
				v, ok := tasksv1.TaskStatus_value["TASK_STATUS_"+strings.ToUpper(s)]
				if !ok || v == 0 {
					return usageError{fmt.Errorf("--status %q: one of backlog, planned, in_progress, in_review, done, blocked, cancelled", s)}
				}
				req.Statuses = append(req.Statuses, tasksv1.TaskStatus(v))
			}
			c, _, err := g.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			resp, err := c.Tasks().ListTasks(cmd.Context(), req)
			if err != nil {
				return err
			}
			return g.print(protoList(resp.Tasks), func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tREPO\tSTATUS\tTITLE")
				for _, t := range resp.Tasks {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", t.Id, t.Repo, enumName(t.Status, "TASK_STATUS_"), t.Title)
				}
			})
		},
	}
	list.Flags().StringVar(&repo, "repo", "", "only this repository (owner/name)")
	list.Flags().StringArrayVar(&statuses, "status", nil, "only tasks with this status (repeatable)")
	list.Flags().Int32Var(&limit, "limit", 100, "at most this many (1-200)")

	get := &cobra.Command{
		Use:     "get TASK_ID",
		Short:   "Show one task",
		Example: "  thefold tasks get 6c1e0f4a-2b7d-4c1e-9f3a-0d5b8e2a7c41 -o yaml",
		Args:    exactArgs(1, "TASK_ID"),
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Tasks().GetTask(cmd.Context(), &tasksv1.GetTaskRequest{Id: args[0]})
			if err != nil {
				return err
			}
			t := resp.Task
			return g.print(t, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "id\t%s\nrepo\t%s\nstatus\t%s\ntitle\t%s\n", t.Id, t.Repo, enumName(t.Status, "TASK_STATUS_"), t.Title)
				if t.Description != "" {
					fmt.Fprintf(w, "description\t%s\n", strings.ReplaceAll(t.Description, "\n", "\n\t"))
				}
			})
		}),
	}

	var title, description string
	create := &cobra.Command{
		Use:     "create",
		Short:   "Create a task (thefold jobs start TASK_ID works on it)",
		Example: `  thefold tasks create --repo local/demo --title "Add a health endpoint" --description "GET /health answers 200"`,
		Args:    cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.Tasks().CreateTask(cmd.Context(), &tasksv1.CreateTaskRequest{Repo: repo, Title: title, Description: description})
			if err != nil {
				return err
			}
			return g.print(resp.Task, func(w *tabwriter.Writer) { fmt.Fprintf(w, "%s\n", resp.Task.Id) })
		}),
	}
	create.Flags().StringVar(&repo, "repo", "", "the repository (owner/name)")
	create.Flags().StringVar(&title, "title", "", "a short imperative title")
	create.Flags().StringVar(&description, "description", "", "what to do and how to know it is done")
	cmd.AddCommand(list, get, create, taskUpdateCommand(g), taskDeleteCommand(g), taskGraphCommand(g), importIssuesCommand(g))
	return cmd
}

// taskUpdateCommand changes only the fields whose flags are given (UpdateTask's field mask),
// so that a change never overwrites what another writer set meanwhile.
func taskUpdateCommand(g *globals) *cobra.Command {
	var (
		title, description, priority, repo string
		labels                             []string
		req                                *tasksv1.UpdateTaskRequest
	)
	cmd := &cobra.Command{
		Use:   "update TASK_ID",
		Short: "Change a task's title, description, priority, labels or repository",
		Long: `update changes the fields whose flags are given and leaves the others as they are. A
task's status moves with its job (thefold jobs start, cancel, skip, resolve), not here.`,
		Example: `  thefold tasks update 6c1e0f4a-2b7d-4c1e-9f3a-0d5b8e2a7c41 --title "Add a /health endpoint" --priority high
  thefold tasks update 6c1e0f4a-2b7d-4c1e-9f3a-0d5b8e2a7c41 --label api --label ops
  thefold tasks update 6c1e0f4a-2b7d-4c1e-9f3a-0d5b8e2a7c41 --label ''   # no labels`,
		Args: exactArgs(1, "TASK_ID"),
		// The request is checked before connecting: bad flags are a usage error even when
		// TheFold cannot be reached.
		PreRunE: func(cmd *cobra.Command, args []string) error {
			t, f := &tasksv1.Task{}, cmd.Flags()
			var paths []string
			if f.Changed("title") {
				t.Title, paths = title, append(paths, "title")
			}
			if f.Changed("description") {
				t.Description, paths = description, append(paths, "description")
			}
			if f.Changed("priority") {
				v, ok := typev1.Priority_value["PRIORITY_"+strings.ToUpper(priority)]
				if !ok || v == 0 {
					return usageError{fmt.Errorf("--priority %q: one of low, medium, high, urgent", priority)}
				}
				t.Priority, paths = typev1.Priority(v), append(paths, "priority")
			}
			if f.Changed("label") {
				for _, l := range labels {
					if l != "" {
						t.Labels = append(t.Labels, l)
					}
				}
				paths = append(paths, "labels")
			}
			if f.Changed("repo") {
				t.Repo, paths = repo, append(paths, "repo")
			}
			if len(paths) == 0 {
				return usageError{errors.New("nothing to change: give --title, --description, --priority, --label or --repo")}
			}
			req = &tasksv1.UpdateTaskRequest{Id: args[0], Task: t, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}}
			return nil
		},
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.Tasks().UpdateTask(cmd.Context(), req)
			if err != nil {
				return err
			}
			t := resp.Task
			return g.print(t, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "id\t%s\nrepo\t%s\nstatus\t%s\ntitle\t%s\npriority\t%s\n", t.Id, t.Repo, enumName(t.Status, "TASK_STATUS_"), t.Title,
					enumName(t.Priority, "PRIORITY_"))
				if len(t.Labels) > 0 {
					fmt.Fprintf(w, "labels\t%s\n", strings.Join(t.Labels, ", "))
				}
			})
		}),
	}
	cmd.Flags().StringVar(&title, "title", "", "a short imperative title")
	cmd.Flags().StringVar(&description, "description", "", "what to do and how to know it is done")
	cmd.Flags().StringVar(&priority, "priority", "", "low, medium, high or urgent")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "the task's labels (repeatable; replaces them, --label '' removes them all)")
	cmd.Flags().StringVar(&repo, "repo", "", "move the task to this repository (owner/name)")
	return cmd
}

func taskDeleteCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "delete TASK_ID",
		Short:   "Delete a task and its dependency links",
		Example: "  thefold tasks delete 6c1e0f4a-2b7d-4c1e-9f3a-0d5b8e2a7c41",
		Args:    exactArgs(1, "TASK_ID"),
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Tasks().DeleteTask(cmd.Context(), &tasksv1.DeleteTaskRequest{Id: args[0]})
			if err != nil {
				return err
			}
			return g.print(resp, func(w *tabwriter.Writer) { fmt.Fprintf(w, "deleted\t%s\n", args[0]) })
		}),
	}
}

func jobsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "Start, watch, steer and inspect jobs"}
	var limit int32
	list := &cobra.Command{
		Use:     "list",
		Short:   "List your jobs, newest first",
		Example: "  thefold jobs list --limit 10\n  thefold jobs list -o json | jq -r '.[] | select(.status == \"JOB_STATUS_HUMAN_NEEDED\") | .id'",
		Args:    cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.Agent().ListJobs(cmd.Context(), &agentv1.ListJobsRequest{PageSize: limit})
			if err != nil {
				return err
			}
			return g.print(protoList(resp.Jobs), func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tREPO\tSTATUS\tPHASE\tCOST")
				for _, j := range resp.Jobs {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t$%.4f\n", j.Id, j.Repo, enumName(j.Status, "JOB_STATUS_"), enumName(j.Phase, "JOB_PHASE_"),
						float64(j.GetUsage().GetCostMicros())/1e6)
				}
			})
		}),
	}
	list.Flags().Int32Var(&limit, "limit", 50, "at most this many (1-200)")
	get := &cobra.Command{
		Use:     "get JOB_ID",
		Short:   "Show one job",
		Example: "  thefold jobs get 0b6f3c2e-8d1a-4f7e-a5c9-3e2d1b0a9f87",
		Args:    exactArgs(1, "JOB_ID"),
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Agent().GetJob(cmd.Context(), &agentv1.GetJobRequest{Id: args[0]})
			if err != nil {
				return err
			}
			return g.print(resp.Job, func(w *tabwriter.Writer) { printJob(w, resp.Job) })
		}),
	}
	start := &cobra.Command{
		Use:     "start TASK_ID",
		Short:   "Start a job that works on a task",
		Example: "  thefold jobs start 6c1e0f4a-2b7d-4c1e-9f3a-0d5b8e2a7c41\n  thefold jobs watch \"$(thefold jobs start 6c1e0f4a-2b7d-4c1e-9f3a-0d5b8e2a7c41)\"",
		Args:    exactArgs(1, "TASK_ID"),
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Agent().StartTask(cmd.Context(), &agentv1.StartTaskRequest{TaskId: args[0]})
			if err != nil {
				return err
			}
			return g.print(resp.Job, func(w *tabwriter.Writer) { fmt.Fprintf(w, "%s\n", resp.Job.Id) })
		}),
	}
	watch := &cobra.Command{
		Use:     "watch JOB_ID",
		Short:   "Follow a job's events until it ends (Ctrl-C stops watching, not the job)",
		Example: "  thefold jobs watch 0b6f3c2e-8d1a-4f7e-a5c9-3e2d1b0a9f87\n  thefold jobs watch 0b6f3c2e-8d1a-4f7e-a5c9-3e2d1b0a9f87 -o json   # one event per document",
		Args:    exactArgs(1, "JOB_ID"),
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			stream, err := c.Agent().WatchJob(cmd.Context(), &agentv1.WatchJobRequest{Id: args[0]})
			if err != nil {
				return err
			}
			for {
				ev, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				if ev.Id == 0 {
					continue // a heartbeat
				}
				if g.output == "json" || g.output == "yaml" {
					if err := g.print(ev, nil); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintf(g.out, "%s  %s\n", ev.GetTime().AsTime().Local().Format(time.TimeOnly), eventLine(ev))
			}
		}),
	}
	cmd.AddCommand(list, get, start, watch)
	cmd.AddCommand(jobControlCommands(g)...)
	cmd.AddCommand(auditCommand(g), metricsCommand(g))
	return cmd
}

// jobControlCommands are the ways a person steers a job: each prints the job's status after.
func jobControlCommands(g *globals) []*cobra.Command {
	var reason, guidance, note string
	control := func(use, short, example string, args cobra.PositionalArgs, call func(ctx context.Context, c *client.Client, args []string) (*agentv1.Job, error)) *cobra.Command {
		return &cobra.Command{
			Use: use, Short: short, Example: example, Args: args,
			RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
				j, err := call(cmd.Context(), c, args)
				if err != nil {
					return err
				}
				return g.print(j, func(w *tabwriter.Writer) {
					fmt.Fprintf(w, "%s\t%s\t%s\n", j.Id, enumName(j.Status, "JOB_STATUS_"), j.StatusReason)
				})
			}),
		}
	}
	const id = "0b6f3c2e-8d1a-4f7e-a5c9-3e2d1b0a9f87"
	pause := control("pause JOB_ID", "Pause a queued or running job at its next checkpoint (its sandbox is kept)",
		"  thefold jobs pause "+id+` --reason "lunch"`, exactArgs(1, "JOB_ID"),
		func(ctx context.Context, c *client.Client, args []string) (*agentv1.Job, error) {
			resp, err := c.Agent().PauseJob(ctx, &agentv1.PauseJobRequest{Id: args[0], Reason: reason})
			return resp.GetJob(), err
		})
	pause.Flags().StringVar(&reason, "reason", "", "why (kept as the job's status reason)")
	resume := control("resume JOB_ID", "Resume a paused job, or retry a job that needs a human with --guidance",
		"  thefold jobs resume "+id+"\n  thefold jobs resume "+id+` --guidance "The tests live in internal/store; run them there"`, exactArgs(1, "JOB_ID"),
		func(ctx context.Context, c *client.Client, args []string) (*agentv1.Job, error) {
			resp, err := c.Agent().ResumeJob(ctx, &agentv1.ResumeJobRequest{Id: args[0], Guidance: guidance})
			return resp.GetJob(), err
		})
	resume.Flags().StringVar(&guidance, "guidance", "", "for a job that needs a human: a hint for the retry")
	cancel := control("cancel JOB_ID", "Cancel an unfinished job: its sandbox goes, its task returns to the backlog",
		"  thefold jobs cancel "+id+` --reason "wrong repository"`, exactArgs(1, "JOB_ID"),
		func(ctx context.Context, c *client.Client, args []string) (*agentv1.Job, error) {
			resp, err := c.Agent().CancelJob(ctx, &agentv1.CancelJobRequest{Id: args[0], Reason: reason})
			return resp.GetJob(), err
		})
	cancel.Flags().StringVar(&reason, "reason", "", "why (kept as the job's status reason)")
	skip := control("skip JOB_ID", "Give up on a job that needs a human: the job ends skipped, its task cancelled",
		"  thefold jobs skip "+id+` --reason "not worth automating"`, exactArgs(1, "JOB_ID"),
		func(ctx context.Context, c *client.Client, args []string) (*agentv1.Job, error) {
			resp, err := c.Agent().SkipTask(ctx, &agentv1.SkipTaskRequest{Id: args[0], Reason: reason})
			return resp.GetJob(), err
		})
	skip.Flags().StringVar(&reason, "reason", "", "why (kept on the job and the task)")
	resolve := control("resolve JOB_ID --note TEXT", "Record that you solved a job's task by hand: the job completes, the task is done",
		"  thefold jobs resolve "+id+` --note "Fixed by hand in 4f2a9c1: the lock file was stale"`, exactArgs(1, "JOB_ID"),
		func(ctx context.Context, c *client.Client, args []string) (*agentv1.Job, error) {
			resp, err := c.Agent().ResolveTask(ctx, &agentv1.ResolveTaskRequest{Id: args[0], Note: note})
			return resp.GetJob(), err
		})
	resolve.Flags().StringVar(&note, "note", "", "what you did (required; kept on the job and in memory)")
	resolve.PreRunE = func(*cobra.Command, []string) error { return requireFlag("note", note) }
	answer := control(`answer JOB_ID "TEXT"`, "Answer the question of a job waiting for clarification: it runs again",
		"  thefold jobs answer "+id+` "Use blue, the brand colour"`, exactArgs(2, "JOB_ID", `"TEXT"`),
		func(ctx context.Context, c *client.Client, args []string) (*agentv1.Job, error) {
			resp, err := c.Agent().RespondToClarification(ctx, &agentv1.RespondToClarificationRequest{Id: args[0], Answer: args[1]})
			return resp.GetJob(), err
		})
	answer.PreRunE = func(_ *cobra.Command, args []string) error {
		if strings.TrimSpace(args[1]) == "" {
			return usageError{errors.New(`the answer "TEXT" is empty`)}
		}
		return nil
	}
	return []*cobra.Command{pause, resume, cancel, skip, resolve, answer}
}

func printJob(w io.Writer, j *agentv1.Job) {
	fmt.Fprintf(w, "id\t%s\ntask\t%s\nrepo\t%s\nstatus\t%s\nphase\t%s\ncost\t$%.4f\n", j.Id, j.TaskId, j.Repo,
		enumName(j.Status, "JOB_STATUS_"), enumName(j.Phase, "JOB_PHASE_"), float64(j.GetUsage().GetCostMicros())/1e6)
	if j.StatusReason != "" {
		fmt.Fprintf(w, "reason\t%s\n", j.StatusReason)
	}
	if j.ReviewId != "" {
		fmt.Fprintf(w, "review\t%s\n", j.ReviewId)
	}
	if u := j.GetPullRequest().GetUrl(); u != "" {
		fmt.Fprintf(w, "pull request\t%s\n", u)
	}
}

// eventLine is a job event as one line.
func eventLine(ev *agentv1.WatchJobResponse) string {
	kind := enumName(ev.Type, "JOB_EVENT_TYPE_")
	switch p := ev.Payload.(type) {
	case *agentv1.WatchJobResponse_StatusChange:
		return fmt.Sprintf("status %s → %s %s", enumName(p.StatusChange.PreviousStatus, "JOB_STATUS_"), enumName(p.StatusChange.Status, "JOB_STATUS_"), p.StatusChange.Reason)
	case *agentv1.WatchJobResponse_PhaseChanged:
		return "phase " + enumName(p.PhaseChanged.Phase, "JOB_PHASE_")
	case *agentv1.WatchJobResponse_Thought:
		return "· " + p.Thought.GetText()
	case *agentv1.WatchJobResponse_ReviewSubmitted:
		return fmt.Sprintf("review %s ready (AI quality %d/10)", p.ReviewSubmitted.ReviewId, p.ReviewSubmitted.QualityScore)
	case *agentv1.WatchJobResponse_PullRequest:
		return "pull request " + p.PullRequest.Url
	case *agentv1.WatchJobResponse_ClarificationRequested:
		return "question: " + p.ClarificationRequested.Question
	case *agentv1.WatchJobResponse_Message:
		return "message: " + firstLine(p.Message.Text, 120)
	}
	return kind
}

// exactArgs wants n arguments named names.
func exactArgs(n int, names ...string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("want %s, got %d arguments", strings.Join(names, " "), len(args))}
		}
		return nil
	}
}
