package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"sigs.k8s.io/yaml"

	"github.com/thefold/thefold/pkg/client"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
)

func projectsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "projects", Short: "Plan, edit, start and watch projects (a large request as phases of tasks)"}
	var (
		repo string
		pf   planFlags
		req  *agentv1.PlanProjectRequest
	)
	plan := &cobra.Command{
		Use:   `plan ["REQUEST"] --repo OWNER/NAME [--mode review|session|crew]`,
		Short: "Plan a project; nothing runs until thefold projects start",
		Long: `plan asks the planner for a project that does REQUEST: phases of tasks, each task after the
ones it depends on. Nothing runs until thefold projects start.

--mode review (the default) builds every task in one shared sandbox and ends in one review
and one pull request; session does the same and also commits each finished task to the
project's branch as it goes.

--mode crew works the tasks in parallel (--max-workers, default 3), each task its own job,
branch, review and pull request that closes its issue; a task starts once the tasks it
depends on are merged. Without a REQUEST a crew plan imports the repository's open issues
as its tasks. --merge-policy human (the default) waits for you at each review; auto
approves a review whose quality is at least --min-quality (default 8) and merges the pull
request when its checks pass. --check-command is the check run on a pull request where the
forge has none of its own (the local forge, a repository without CI): a program and its
arguments, no shell, e.g. "make check" (default: the sandbox's build, lint and tests).`,
		Example: `  thefold projects plan "A status service with a store, an API and a dashboard" --repo local/demo
  thefold projects plan --mode crew --repo acme/api --max-workers 4
  thefold projects plan --mode crew --repo local/demo --merge-policy auto --min-quality 9 --check-command "go test ./..."`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError{fmt.Errorf(`want one "REQUEST" (quote it), got %d arguments`, len(args))}
			}
			return nil
		},
		PreRunE: func(cmd *cobra.Command, args []string) (err error) {
			pf.repo = repo
			req, err = pf.request(cmd.Flags().Changed, args)
			return err
		},
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.Projects().PlanProject(cmd.Context(), req)
			if err != nil {
				return err
			}
			return g.print(resp.Project, func(w *tabwriter.Writer) { printPlan(w, resp.Project) })
		}),
	}
	plan.Flags().StringVar(&repo, "repo", "", "the repository (owner/name)")
	plan.Flags().StringVar(&pf.mode, "mode", "", "review (default), session or crew")
	plan.Flags().Int32Var(&pf.maxWorkers, "max-workers", 0, "crew: how many tasks run at once, 1-10 (default 3)")
	plan.Flags().StringVar(&pf.mergePolicy, "merge-policy", "", "crew: human (default) or auto")
	plan.Flags().Int32Var(&pf.minQuality, "min-quality", 0, "crew with --merge-policy auto: the least review quality merged without you, 1-10 (default 8)")
	plan.Flags().StringVar(&pf.checkCommand, "check-command", "", "crew: the command that checks a pull request where the forge has no checks, a program and its arguments, no shell (default: build, lint and tests)")
	_ = plan.RegisterFlagCompletionFunc("mode", cobra.FixedCompletions([]string{"review", "session", "crew"}, cobra.ShellCompDirectiveNoFileComp))
	_ = plan.RegisterFlagCompletionFunc("merge-policy", cobra.FixedCompletions([]string{"human", "auto"}, cobra.ShellCompDirectiveNoFileComp))
	list := &cobra.Command{
		Use: "list", Short: "List your projects, newest first", Args: cobra.NoArgs,
		Example: "  thefold projects list --repo local/demo",
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.Projects().ListProjects(cmd.Context(), &agentv1.ListProjectsRequest{Repo: repo})
			if err != nil {
				return err
			}
			return g.print(protoList(resp.Projects), func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tREPO\tSTATUS\tDESCRIPTION")
				for _, p := range resp.Projects {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", p.Id, p.Repo, enumName(p.Status, "PROJECT_STATUS_"), firstLine(p.Description, 60))
				}
			})
		}),
	}
	list.Flags().StringVar(&repo, "repo", "", "only this repository")
	get := &cobra.Command{
		Use: "get PROJECT_ID", Short: "Show a project's plan and progress", Args: exactArgs(1, "PROJECT_ID"),
		Example: "  thefold projects get 4f1a2b3c-5d6e-4f70-8a9b-0c1d2e3f4a5b",
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Projects().GetProject(cmd.Context(), &agentv1.GetProjectRequest{Id: args[0]})
			if err != nil {
				return err
			}
			return g.print(resp.Project, func(w *tabwriter.Writer) { printPlan(w, resp.Project) })
		}),
	}
	edit := &cobra.Command{
		Use:   "edit PROJECT_ID",
		Short: "Edit a planned project's phases and tasks in $EDITOR (YAML)",
		Long: `edit opens the plan's phases in $EDITOR (VISUAL, EDITOR, else vi) as YAML. Save to update
the plan; an unchanged file changes nothing. A plan edited by someone else meanwhile is
refused (exit 5): edit again.`,
		Example: "  thefold projects edit 4f1a2b3c-5d6e-4f70-8a9b-0c1d2e3f4a5b\n  EDITOR=nano thefold projects edit 4f1a2b3c-5d6e-4f70-8a9b-0c1d2e3f4a5b",
		Args:    exactArgs(1, "PROJECT_ID"),
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			ctx := cmd.Context()
			resp, err := c.Projects().GetProject(ctx, &agentv1.GetProjectRequest{Id: args[0]})
			if err != nil {
				return err
			}
			p := resp.Project
			before, err := phasesYAML(p.Phases)
			if err != nil {
				return err
			}
			after, err := editText(before, g.errOut)
			if err != nil {
				return err
			}
			if string(after) == string(before) {
				fmt.Fprintln(g.out, "The plan is unchanged.")
				return nil
			}
			phases, err := parsePhases(after)
			if err != nil {
				return usageError{fmt.Errorf("the edited plan: %w", err)}
			}
			up, err := c.Projects().UpdateProject(ctx, &agentv1.UpdateProjectRequest{Id: p.Id,
				Project:    &agentv1.Project{Etag: p.Etag, Phases: phases},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"phases"}}})
			if err != nil {
				return err
			}
			return g.print(up.Project, func(w *tabwriter.Writer) { printPlan(w, up.Project) })
		}),
	}
	start := &cobra.Command{
		Use: "start PROJECT_ID", Short: "Confirm a planned project: its tasks run phase by phase", Args: exactArgs(1, "PROJECT_ID"),
		Example: "  thefold projects start 4f1a2b3c-5d6e-4f70-8a9b-0c1d2e3f4a5b && thefold projects watch 4f1a2b3c-5d6e-4f70-8a9b-0c1d2e3f4a5b",
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Projects().StartProject(cmd.Context(), &agentv1.StartProjectRequest{Id: args[0]})
			if err != nil {
				return err
			}
			return g.print(resp.Project, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "%s\t%s\n", resp.Project.Id, enumName(resp.Project.Status, "PROJECT_STATUS_"))
			})
		}),
	}
	watch := &cobra.Command{
		Use: "watch PROJECT_ID", Short: "Follow a project: phases, tasks and each task's job, a line each", Args: exactArgs(1, "PROJECT_ID"),
		Long: `watch prints a line per event of the project: its phases, its tasks and their jobs' events.
A crew project's lines start with the worker and the issue they concern ("[w2 #14]").`,
		Example: "  thefold projects watch 4f1a2b3c-5d6e-4f70-8a9b-0c1d2e3f4a5b\n  thefold projects watch 4f1a2b3c-5d6e-4f70-8a9b-0c1d2e3f4a5b | grep -F '[w2 '",
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			stream, err := c.Projects().WatchProject(cmd.Context(), &agentv1.WatchProjectRequest{Id: args[0]})
			if err != nil {
				return err
			}
			// Crew events carry their worker and project task: a line says whose it is.
			tags := &crewTags{load: func() (*agentv1.Project, error) {
				resp, err := c.Projects().GetProject(cmd.Context(), &agentv1.GetProjectRequest{Id: args[0]})
				return resp.GetProject(), err
			}}
			for {
				ev, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				if ev.Id == 0 {
					continue
				}
				if g.output == "json" || g.output == "yaml" {
					if err := g.print(ev, nil); err != nil {
						return err
					}
					continue
				}
				line := projectEventLine(ev)
				if ev.Worker != 0 || ev.ProjectTaskId != "" {
					line = tags.prefix(ev.Worker, ev.ProjectTaskId) + " " + crewEventLine(ev)
				}
				fmt.Fprintf(g.out, "%s  %s\n", ev.GetTime().AsTime().Local().Format(time.TimeOnly), line)
			}
		}),
	}
	cmd.AddCommand(plan, list, get, edit, start, watch)
	cmd.AddCommand(crewCommands(g)...)
	return cmd
}

func printPlan(w io.Writer, p *agentv1.Project) {
	fmt.Fprintf(w, "project\t%s\nrepo\t%s\nstatus\t%s\n", p.Id, p.Repo, enumName(p.Status, "PROJECT_STATUS_"))
	crew := p.Mode == agentv1.ProjectMode_PROJECT_MODE_CREW
	if crew {
		printCrew(w, p)
	}
	fmt.Fprintf(w, "%s\n", p.Description)
	for _, ph := range p.Phases {
		fmt.Fprintf(w, "\nphase %d\t%s\n", ph.Number, ph.Name)
		for _, t := range ph.Tasks {
			deps := ""
			if len(t.DependsOn) > 0 {
				deps = " (after " + strings.Join(t.DependsOn, ", ") + ")"
			}
			if crew {
				crewTaskLine(w, t, deps)
				continue
			}
			fmt.Fprintf(w, "  %s\t%s\t%s%s\n", t.Id, enumName(t.Status, "PROJECT_TASK_STATUS_"), t.Title, deps)
		}
	}
}

// projectEventLine is a project event as one line: its own events, and each relayed job
// event under its task.
func projectEventLine(ev *agentv1.WatchProjectResponse) string {
	switch p := ev.Payload.(type) {
	case *agentv1.WatchProjectResponse_StatusChange:
		return fmt.Sprintf("project %s → %s %s", enumName(p.StatusChange.PreviousStatus, "PROJECT_STATUS_"),
			enumName(p.StatusChange.Status, "PROJECT_STATUS_"), p.StatusChange.Reason)
	case *agentv1.WatchProjectResponse_Phase:
		return fmt.Sprintf("phase %d %s: %s", p.Phase.Number, p.Phase.Name, enumName(ev.Type, "PROJECT_EVENT_TYPE_"))
	case *agentv1.WatchProjectResponse_Task:
		return fmt.Sprintf("task %s: %s", p.Task.ProjectTaskId, enumName(ev.Type, "PROJECT_EVENT_TYPE_"))
	case *agentv1.WatchProjectResponse_JobEvent:
		return fmt.Sprintf("  [%s] %s", p.JobEvent.ProjectTaskId, eventLine(p.JobEvent.Event))
	case *agentv1.WatchProjectResponse_ReviewSubmitted:
		return fmt.Sprintf("review %s ready (AI quality %d/10)", p.ReviewSubmitted.ReviewId, p.ReviewSubmitted.QualityScore)
	case *agentv1.WatchProjectResponse_PullRequest:
		return "pull request " + p.PullRequest.Url
	case *agentv1.WatchProjectResponse_Message:
		return "message to the project: " + firstLine(p.Message.Text, 120)
	}
	return enumName(ev.Type, "PROJECT_EVENT_TYPE_")
}

// phasesYAML is the editable form of a plan: its phases as YAML.
func phasesYAML(phases []*agentv1.ProjectPhase) ([]byte, error) {
	doc := &agentv1.Project{Phases: phases}
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(doc)
	if err != nil {
		return nil, err
	}
	y, err := yaml.JSONToYAML(b)
	if err != nil {
		return nil, err
	}
	return append([]byte("# The plan's phases: edit titles, descriptions, depends_on; add or remove tasks and phases.\n"), y...), nil
}

// parsePhases reads an edited plan.
func parsePhases(b []byte) ([]*agentv1.ProjectPhase, error) {
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, err
	}
	doc := &agentv1.Project{}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(j, doc); err != nil {
		return nil, err
	}
	return doc.Phases, nil
}

// editText opens text in the person's editor and returns what they saved.
func editText(text []byte, errOut io.Writer) ([]byte, error) {
	f, err := os.CreateTemp("", "thefold-plan-*.yaml")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(text); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	editor := os.Getenv("VISUAL")
	if editor == "" {
		editor = os.Getenv("EDITOR")
	}
	if editor == "" {
		editor = "vi"
	}
	// The editor setting may hold arguments ("code --wait"): run it through the shell.
	cmd := exec.Command("/bin/sh", "-c", editor+` "$1"`, "editor", f.Name())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("the editor (%s): %w", editor, err)
	}
	return os.ReadFile(f.Name())
}
