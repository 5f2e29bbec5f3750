package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/client"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

type tabwriterWriter = tabwriter.Writer

// enumName is an enum value's name without its prefix, in lower case ("in_progress").
func enumName(s fmt.Stringer, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), prefix))
}

func tasksCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tasks", Short: "List, show and create tasks"}
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
			items := make([]proto.Message, len(resp.Tasks))
			for i, t := range resp.Tasks {
				items[i] = t
			}
			return g.print(items, func(w *tabwriter.Writer) {
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
		Use:   "get TASK_ID",
		Short: "Show one task",
		Args:  exactArgs(1, "TASK_ID"),
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
	cmd.AddCommand(list, get, create)
	return cmd
}

func jobsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "Start, list, show and watch jobs"}
	var limit int32
	list := &cobra.Command{
		Use:   "list",
		Short: "List your jobs, newest first",
		Args:  cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.Agent().ListJobs(cmd.Context(), &agentv1.ListJobsRequest{PageSize: limit})
			if err != nil {
				return err
			}
			items := make([]proto.Message, len(resp.Jobs))
			for i, j := range resp.Jobs {
				items[i] = j
			}
			return g.print(items, func(w *tabwriter.Writer) {
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
		Use:   "get JOB_ID",
		Short: "Show one job",
		Args:  exactArgs(1, "JOB_ID"),
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Agent().GetJob(cmd.Context(), &agentv1.GetJobRequest{Id: args[0]})
			if err != nil {
				return err
			}
			return g.print(resp.Job, func(w *tabwriter.Writer) { printJob(w, resp.Job) })
		}),
	}
	start := &cobra.Command{
		Use:   "start TASK_ID",
		Short: "Start a job that works on a task",
		Args:  exactArgs(1, "TASK_ID"),
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Agent().StartTask(cmd.Context(), &agentv1.StartTaskRequest{TaskId: args[0]})
			if err != nil {
				return err
			}
			return g.print(resp.Job, func(w *tabwriter.Writer) { fmt.Fprintf(w, "%s\n", resp.Job.Id) })
		}),
	}
	watch := &cobra.Command{
		Use:   "watch JOB_ID",
		Short: "Follow a job's events until it ends (Ctrl-C stops watching, not the job)",
		Args:  exactArgs(1, "JOB_ID"),
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
	return cmd
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
