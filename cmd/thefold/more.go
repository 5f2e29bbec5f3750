package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/thefold/thefold/pkg/client"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
)

// withClient is a RunE that runs fn with a client of the profile.
func (g *globals) withClient(fn func(cmd *cobra.Command, args []string, c *client.Client) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, _, err := g.connect()
		if err != nil {
			return err
		}
		defer c.Close()
		return fn(cmd, args, c)
	}
}

func reviewsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "reviews", Short: "List, show and decide reviews"}
	var repo string
	list := &cobra.Command{
		Use: "list", Short: "List your reviews, newest first", Args: cobra.NoArgs,
		Example: "  thefold reviews list --repo local/demo",
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.Reviews().ListReviews(cmd.Context(), &agentv1.ListReviewsRequest{Repo: repo})
			if err != nil {
				return err
			}
			return g.print(protoList(resp.Reviews), func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tREPO\tSTATUS\tQUALITY\tJOB")
				for _, r := range resp.Reviews {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", r.Id, r.Repo, enumName(r.Status, "REVIEW_STATUS_"), r.QualityScore, r.JobId)
				}
			})
		}),
	}
	list.Flags().StringVar(&repo, "repo", "", "only this repository")
	show := &cobra.Command{
		Use: "show REVIEW_ID", Short: "Show a review: the diff and the AI review", Args: exactArgs(1, "REVIEW_ID"),
		Example: "  thefold reviews show 8e4d2c1a-5b6f-4a7e-9c3d-2f1e0a9b8c7d | less -R",
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Reviews().GetReview(cmd.Context(), &agentv1.GetReviewRequest{Id: args[0]})
			if err != nil {
				return err
			}
			v := resp.Review
			return g.print(v, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "review\t%s\nstatus\t%s\nquality\t%d/10\n", v.Id, enumName(v.Status, "REVIEW_STATUS_"), v.QualityScore)
				for _, cn := range v.Concerns {
					fmt.Fprintf(w, "concern\t%s\n", cn.GetMessage())
				}
				for _, f := range v.Files {
					fmt.Fprintf(w, "\n%s\n", f.GetDiff().GetUnifiedDiff())
				}
			})
		}),
	}
	approve := &cobra.Command{
		Use: "approve REVIEW_ID", Short: "Approve a review: the branch, commit and pull request follow", Args: exactArgs(1, "REVIEW_ID"),
		Example: "  thefold reviews approve 8e4d2c1a-5b6f-4a7e-9c3d-2f1e0a9b8c7d",
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Reviews().ApproveReview(cmd.Context(), &agentv1.ApproveReviewRequest{Id: args[0]})
			if err != nil {
				return err
			}
			return g.print(resp.Review, func(w *tabwriter.Writer) { fmt.Fprintf(w, "approved\t%s\n", resp.Review.Id) })
		}),
	}
	var feedback, reason string
	changes := &cobra.Command{
		Use: "request-changes REVIEW_ID --feedback TEXT", Short: "Send a review back with feedback: the job runs again", Args: exactArgs(1, "REVIEW_ID"),
		Example: `  thefold reviews request-changes 8e4d2c1a-5b6f-4a7e-9c3d-2f1e0a9b8c7d --feedback "Add a test for the empty input"`,
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Reviews().RequestChanges(cmd.Context(), &agentv1.RequestChangesRequest{Id: args[0], Feedback: feedback})
			if err != nil {
				return err
			}
			return g.print(resp.Review, func(w *tabwriter.Writer) { fmt.Fprintf(w, "sent back\t%s\n", resp.Review.Id) })
		}),
	}
	changes.Flags().StringVar(&feedback, "feedback", "", "what should change")
	reject := &cobra.Command{
		Use: "reject REVIEW_ID", Short: "Reject a review: the job ends, nothing is merged", Args: exactArgs(1, "REVIEW_ID"),
		Example: `  thefold reviews reject 8e4d2c1a-5b6f-4a7e-9c3d-2f1e0a9b8c7d --reason "Solved another way"`,
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Reviews().RejectReview(cmd.Context(), &agentv1.RejectReviewRequest{Id: args[0], Reason: reason})
			if err != nil {
				return err
			}
			return g.print(resp.Review, func(w *tabwriter.Writer) { fmt.Fprintf(w, "rejected\t%s\n", resp.Review.Id) })
		}),
	}
	reject.Flags().StringVar(&reason, "reason", "", "why")
	cmd.AddCommand(list, show, approve, changes, reject)
	return cmd
}

func reposCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "repos", Short: "The repositories you can work in"}
	cmd.AddCommand(&cobra.Command{
		Use: "list", Short: "List repositories", Args: cobra.NoArgs,
		Example: "  thefold repos list\n  thefold repos list -o json | jq -r '.[].repo'",
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.Repos().ListRepos(cmd.Context(), &githubv1.ListReposRequest{PageSize: 100})
			if err != nil {
				return err
			}
			return g.print(protoList(resp.Repos), func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "REPO\tDEFAULT BRANCH\tPROVIDER")
				for _, r := range resp.Repos {
					fmt.Fprintf(w, "%s\t%s\t%s\n", r.Repo, r.DefaultBranch, enumName(r.Provider, "REPO_PROVIDER_"))
				}
			})
		}),
	})
	var (
		labels []string
		poll   bool
		health bool
	)
	connect := &cobra.Command{
		Use: "connect REPO", Short: "Connect a repository's GitHub webhook; its secret is shown once", Args: exactArgs(1, "REPO"),
		Example: "  thefold repos connect acme/api --label thefold\n  thefold repos connect acme/api -o json | jq -r .connection.webhook_secret",
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.RepoEvents().ConnectRepository(cmd.Context(), &agentv1.ConnectRepositoryRequest{Repo: args[0], IssueLabels: labels, Poll: poll,
				Health: &agentv1.RepoHealthSettings{Enabled: health}})
			if err != nil {
				return err
			}
			cn := resp.Connection
			return g.print(resp, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "id\t%s\nrepo\t%s\nwebhook\t<your TheFold URL>%s (content type application/json)\nsecret\t%s\n\t(shown once: paste it into the webhook now)\n",
					cn.Id, cn.Repo, cn.WebhookPath, cn.WebhookSecret)
			})
		}),
	}
	connect.Flags().StringArrayVar(&labels, "label", nil, "only issues with this label become tasks (repeatable)")
	connect.Flags().BoolVar(&poll, "poll", false, "read the repository's GitHub event feed instead of waiting for a webhook")
	connect.Flags().BoolVar(&health, "health", false, "check the repository's health daily (thefold repos monitor tunes it)")
	connections := &cobra.Command{
		Use: "connections", Short: "List your connected repositories", Args: cobra.NoArgs,
		Example: "  thefold repos connections",
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.RepoEvents().ListRepoConnections(cmd.Context(), &agentv1.ListRepoConnectionsRequest{PageSize: 100})
			if err != nil {
				return err
			}
			return g.print(protoList(resp.Connections), func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tREPO\tLABELS\tLAST DELIVERY")
				for _, cn := range resp.Connections {
					last := "-"
					if cn.LastDeliveryTime != nil {
						last = cn.LastDeliveryTime.AsTime().Local().Format("2006-01-02 15:04:05")
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", cn.Id, cn.Repo, strings.Join(cn.IssueLabels, ","), last)
				}
			})
		}),
	}
	deliveries := &cobra.Command{
		Use: "deliveries CONNECTION_ID", Short: "What became of a connection's webhook deliveries, newest first", Args: exactArgs(1, "CONNECTION_ID"),
		Example: "  thefold repos deliveries 3a9e1f0c-7d2b-4c5e-8f6a-1b2c3d4e5f60",
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.RepoEvents().ListRepoDeliveries(cmd.Context(), &agentv1.ListRepoDeliveriesRequest{ConnectionId: args[0], PageSize: 100})
			if err != nil {
				return err
			}
			return g.print(protoList(resp.Deliveries), func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "DELIVERY\tEVENT\tSTATE\tOUTCOME")
				for _, d := range resp.Deliveries {
					ev := d.Event
					if d.Action != "" {
						ev += "." + d.Action
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", d.DeliveryId, ev, enumName(d.State, "REPO_DELIVERY_STATE_"), firstLine(d.Outcome, 100))
				}
			})
		}),
	}
	disconnect := &cobra.Command{
		Use: "disconnect CONNECTION_ID", Short: "Disconnect a repository (its tasks stay)", Args: exactArgs(1, "CONNECTION_ID"),
		Example: "  thefold repos disconnect 3a9e1f0c-7d2b-4c5e-8f6a-1b2c3d4e5f60",
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.RepoEvents().DeleteRepoConnection(cmd.Context(), &agentv1.DeleteRepoConnectionRequest{Id: args[0]})
			if err != nil {
				return err
			}
			return g.print(resp, func(w *tabwriter.Writer) { fmt.Fprintf(w, "disconnected\t%s\n", args[0]) })
		}),
	}
	cmd.AddCommand(connect, connections, deliveries, disconnect, monitorCommand(g), healthCommand(g), checkCommand(g))
	return cmd
}

// monitorCommand turns a connection's periodic health checks on or off and tunes them: only
// the flags given change.
func monitorCommand(g *globals) *cobra.Command {
	var (
		on, off, autoStart bool
		interval           time.Duration
		threshold          int32
	)
	cmd := &cobra.Command{
		Use: "monitor CONNECTION_ID", Short: "Turn a connected repository's periodic health checks on or off, and tune them",
		Args:    exactArgs(1, "CONNECTION_ID"),
		Example: "  thefold repos monitor 3a9e1f0c-7d2b-4c5e-8f6a-1b2c3d4e5f60 --on --interval 12h --todo-threshold 50\n  thefold repos monitor 3a9e1f0c-7d2b-4c5e-8f6a-1b2c3d4e5f60 --off",
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			h := &agentv1.RepoHealthSettings{Enabled: on, Interval: durationpb.New(interval), TodoThreshold: threshold, AutoStart: autoStart}
			var paths []string
			for flag, path := range map[string]string{"on": "health.enabled", "off": "health.enabled", "interval": "health.interval",
				"todo-threshold": "health.todo_threshold", "auto-start": "health.auto_start"} {
				if cmd.Flags().Changed(flag) && !slices.Contains(paths, path) {
					paths = append(paths, path)
				}
			}
			if on && off {
				return fmt.Errorf("--on and --off: choose one")
			}
			if len(paths) == 0 {
				return fmt.Errorf("nothing to change: give --on, --off, --interval, --todo-threshold or --auto-start")
			}
			slices.Sort(paths)
			resp, err := c.RepoEvents().UpdateRepoConnection(cmd.Context(), &agentv1.UpdateRepoConnectionRequest{Id: args[0],
				Connection: &agentv1.RepoConnection{Health: h}, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}})
			if err != nil {
				return err
			}
			return g.print(resp, func(w *tabwriter.Writer) { printHealthSettings(w, resp.Connection.GetHealth()) })
		}),
	}
	cmd.Flags().BoolVar(&on, "on", false, "check periodically")
	cmd.Flags().BoolVar(&off, "off", false, "stop checking periodically (on demand still works)")
	cmd.Flags().DurationVar(&interval, "interval", 0, "between checks, 1h to 720h (0: 24h)")
	cmd.Flags().Int32Var(&threshold, "todo-threshold", 0, "more TODO/FIXME markers than this is a finding (0: 200)")
	cmd.Flags().BoolVar(&autoStart, "auto-start", false, "start each healing task as it is filed")
	return cmd
}

func printHealthSettings(w *tabwriter.Writer, h *agentv1.RepoHealthSettings) {
	next := "-"
	if h.GetNextCheckTime() != nil {
		next = h.GetNextCheckTime().AsTime().Local().Format("2006-01-02 15:04:05")
	}
	fmt.Fprintf(w, "periodic\t%v\ninterval\t%s\ntodo threshold\t%d\nauto-start\t%v\nnext check\t%s\n", h.GetEnabled(),
		h.GetInterval().AsDuration(), h.GetTodoThreshold(), h.GetAutoStart(), next)
}

// healthCommand shows a connection's latest health check, its open findings and the trend.
func healthCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "health CONNECTION_ID", Short: "A connected repository's latest health check, open findings and trend",
		Args: exactArgs(1, "CONNECTION_ID"), Example: "  thefold repos health 3a9e1f0c-7d2b-4c5e-8f6a-1b2c3d4e5f60",
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.RepoHealth().GetRepoHealth(cmd.Context(), &agentv1.GetRepoHealthRequest{ConnectionId: args[0], TrendSize: 10})
			if err != nil {
				return err
			}
			return g.print(resp, func(w *tabwriter.Writer) { printHealth(w, resp) })
		}),
	}
}

func printHealth(w *tabwriter.Writer, h *agentv1.GetRepoHealthResponse) {
	fmt.Fprintf(w, "repo\t%s\n", h.Repo)
	printHealthSettings(w, h.Settings)
	r := h.GetLatest()
	if r == nil {
		fmt.Fprintln(w, "latest\tnot checked yet (thefold repos check)")
		return
	}
	fmt.Fprintf(w, "latest\t%s %s at %s\n", r.Id, enumName(r.State, "REPO_HEALTH_STATE_"), r.Commit)
	if r.Error != "" {
		fmt.Fprintf(w, "error\t%s\n", firstLine(r.Error, 120))
	}
	for _, c := range r.Checks {
		fmt.Fprintf(w, "  %s\t%s\t%s\n", c.Name, enumName(c.Status, "REPO_HEALTH_CHECK_STATUS_"), firstLine(c.Summary, 100))
	}
	for _, d := range r.Outdated {
		fmt.Fprintf(w, "  outdated\t%s %s → %s\tdirect=%v\n", d.Name, d.Version, d.Latest, d.Direct)
	}
	for _, v := range r.Vulnerabilities {
		where := "not called"
		if v.Called {
			where = "called: " + v.Function
			if v.Position != "" {
				where += " from " + v.Position
			}
		}
		fmt.Fprintf(w, "  vulnerable\t%s %s %s → %s\t%s\n", v.Id, v.Module, v.Version, cmp.Or(v.FixedVersion, "no fix"), where)
	}
	for _, f := range h.OpenFindings {
		fmt.Fprintf(w, "finding\t%s\ttask %s\t%s\n", f.Key, cmp.Or(f.TaskId, "-"), firstLine(cmp.Or(f.TaskError, f.Title), 100))
	}
	for _, p := range h.Trend {
		at := "-"
		if p.FinishTime != nil {
			at = p.FinishTime.AsTime().Local().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(w, "trend\t%s\t%s\tfailed=%d outdated=%d vulnerable=%d todos=%d stale=%d findings=%d\n", at,
			enumName(p.State, "REPO_HEALTH_STATE_"), p.FailedChecks, p.OutdatedCount, p.VulnerabilityCount, p.TodoCount, p.StaleTodoCount, p.FindingCount)
	}
}

// checkCommand queues a health check now and, with --wait, shows it once it is done.
func checkCommand(g *globals) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use: "check CONNECTION_ID", Short: "Check a connected repository's health now", Args: exactArgs(1, "CONNECTION_ID"),
		Example: "  thefold repos check 3a9e1f0c-7d2b-4c5e-8f6a-1b2c3d4e5f60 --wait 10m",
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.RepoHealth().CheckRepoHealth(cmd.Context(), &agentv1.CheckRepoHealthRequest{ConnectionId: args[0], RequestId: uuid.NewString()})
			if err != nil {
				return err
			}
			if wait <= 0 {
				return g.print(resp, func(w *tabwriter.Writer) {
					fmt.Fprintf(w, "report\t%s\nstate\t%s\n", resp.Report.Id, enumName(resp.Report.State, "REPO_HEALTH_STATE_"))
				})
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), wait)
			defer cancel()
			for {
				h, err := c.RepoHealth().GetRepoHealth(ctx, &agentv1.GetRepoHealthRequest{ConnectionId: args[0], TrendSize: 10})
				if err != nil {
					return err
				}
				if l := h.GetLatest(); l.GetId() != resp.Report.Id || l.GetState() == agentv1.RepoHealthState_REPO_HEALTH_STATE_DONE ||
					l.GetState() == agentv1.RepoHealthState_REPO_HEALTH_STATE_FAILED {
					return g.print(h, func(w *tabwriter.Writer) { printHealth(w, h) })
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("check %s not done within %s: %w", resp.Report.Id, wait, ctx.Err())
				case <-time.After(time.Second):
				}
			}
		}),
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for the check and show it (0: do not wait)")
	return cmd
}

func memoryCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "memory", Short: "What TheFold remembers"}
	var (
		repo  string
		limit int32
	)
	search := &cobra.Command{
		Use: "search QUERY", Short: "Search memories, with why each was found (vector, text, decay)", Args: exactArgs(1, "QUERY"),
		Example: `  thefold memory search "how are migrations applied" --repo local/demo --limit 5`,
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Memory().SearchMemories(cmd.Context(), &memoryv1.SearchMemoriesRequest{Query: args[0], Repo: repo, Limit: limit})
			if err != nil {
				return err
			}
			return g.print(resp, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "SCORE\tVECTOR\tTEXT\tDECAY\tMEMORY")
				for _, r := range resp.Results {
					s := r.GetScore()
					fmt.Fprintf(w, "%.3f\t%.3f\t%.3f\t%.3f\t%s\n", s.GetFinal(), s.GetVector(), s.GetText(), s.GetDecay(),
						firstLine(r.GetMemory().GetContent(), 80))
				}
			})
		}),
	}
	search.Flags().StringVar(&repo, "repo", "", "within this repository")
	search.Flags().Int32Var(&limit, "limit", 10, "at most this many (1-50)")
	cmd.AddCommand(search)
	return cmd
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

func keysCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Your API keys (for tools and CI)"}
	list := &cobra.Command{
		Use: "list", Short: "List your API keys", Args: cobra.NoArgs,
		Example: "  thefold keys list",
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.Auth().ListAPIKeys(cmd.Context(), &gatewayv1.ListAPIKeysRequest{})
			if err != nil {
				return err
			}
			return g.print(protoList(resp.ApiKeys), func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tNAME\tPREFIX\tSCOPES")
				for _, k := range resp.ApiKeys {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", k.Id, k.Name, k.Prefix, strings.Join(k.Scopes, ","))
				}
			})
		}),
	}
	var scopes []string
	create := &cobra.Command{
		Use: "create NAME", Short: "Create an API key; its secret is shown once", Args: exactArgs(1, "NAME"),
		Example: "  thefold keys create ci --scope tasks:read --scope jobs:write\n  thefold keys create laptop -o json | jq -r .secret",
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Auth().CreateAPIKey(cmd.Context(), &gatewayv1.CreateAPIKeyRequest{Name: args[0], Scopes: scopes})
			if err != nil {
				return err
			}
			return g.print(resp, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "id\t%s\nsecret\t%s\n\t(shown once: keep it now)\n", resp.ApiKey.Id, resp.Secret)
			})
		}),
	}
	create.Flags().StringArrayVar(&scopes, "scope", nil, `narrow the key, e.g. "tasks:read" (repeatable; none: all you can do)`)
	revoke := &cobra.Command{
		Use: "revoke KEY_ID", Short: "Revoke an API key", Args: exactArgs(1, "KEY_ID"),
		Example: "  thefold keys revoke 3a9e1f0c-7d2b-4c5e-8f6a-1b2c3d4e5f60",
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Auth().RevokeAPIKey(cmd.Context(), &gatewayv1.RevokeAPIKeyRequest{Id: args[0]})
			if err != nil {
				return err
			}
			return g.print(resp, func(w *tabwriter.Writer) { fmt.Fprintf(w, "revoked\t%s\n", args[0]) })
		}),
	}
	cmd.AddCommand(list, create, revoke)
	return cmd
}

func chatCommand(g *globals) *cobra.Command {
	var conv, repo, message string
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Talk to TheFold: it answers as it writes and acts through tools",
		Long: `chat opens a conversation (a new one, or --conversation ID) and reads your messages line
by line; each reply streams as the model writes it, with its tool calls and their results
shown compactly, and the notices of the jobs it started. -m sends one message, prints the
reply and exits (scripts). An empty line or end of input ends the chat.`,
		Example: `  thefold chat --repo local/demo
  thefold chat -m "Which repositories do I have?"`,
		Args: cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			ctx := cmd.Context()
			if conv == "" {
				resp, err := c.Chat().CreateConversation(ctx, &agentv1.CreateConversationRequest{Repo: repo})
				if err != nil {
					return err
				}
				conv = resp.Conversation.Id
				fmt.Fprintf(g.errOut, "conversation %s (continue it: thefold chat --conversation %s)\n", conv, conv)
			}
			send := func(text string) error { return chatTurn(ctx, g.out, c, conv, text) }
			if message != "" {
				return send(message)
			}
			in := bufio.NewScanner(g.in)
			for {
				fmt.Fprint(g.out, "you> ")
				if !in.Scan() || strings.TrimSpace(in.Text()) == "" {
					fmt.Fprintln(g.out)
					return nil
				}
				if err := send(in.Text()); err != nil {
					return err
				}
			}
		}),
	}
	cmd.Flags().StringVar(&conv, "conversation", "", "go on with this conversation")
	cmd.Flags().StringVar(&repo, "repo", "", "the repository the tools use by default (a new conversation)")
	cmd.Flags().StringVarP(&message, "message", "m", "", "send this one message and print the reply")
	return cmd
}

// chatTurn sends text and prints the reply as it streams, until it ends.
func chatTurn(ctx context.Context, out io.Writer, c *client.Client, conv, text string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Chat().WatchConversation(ctx, &agentv1.WatchConversationRequest{Id: conv, FromNow: true})
	if err != nil {
		return err
	}
	// The watch starts with a heartbeat once it is following: from then on nothing of the
	// reply can be missed.
	if _, err := stream.Recv(); err != nil {
		return err
	}
	sent, err := c.Chat().SendMessage(ctx, &agentv1.SendMessageRequest{ConversationId: conv, Text: text})
	if err != nil {
		return err
	}
	streaming := false
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch p := ev.Payload.(type) {
		case *agentv1.WatchConversationResponse_Delta:
			if !streaming {
				fmt.Fprint(out, "thefold> ")
				streaming = true
			}
			fmt.Fprint(out, p.Delta.Text)
		case *agentv1.WatchConversationResponse_Message:
			m := p.Message
			switch m.Role {
			case agentv1.ChatRole_CHAT_ROLE_ASSISTANT:
				if streaming {
					fmt.Fprintln(out)
					streaming = false
				}
			case agentv1.ChatRole_CHAT_ROLE_TOOL_CALL:
				b, _ := m.GetToolCall().GetInput().MarshalJSON()
				fmt.Fprintf(out, "  ↳ %s %s\n", m.GetToolCall().GetName(), firstLine(string(b), 100))
			case agentv1.ChatRole_CHAT_ROLE_TOOL_RESULT:
				mark := "✓"
				if m.GetToolResult().GetIsError() {
					mark = "✗"
				}
				fmt.Fprintf(out, "    %s %s\n", mark, firstLine(m.GetToolResult().GetContent(), 100))
			case agentv1.ChatRole_CHAT_ROLE_SYSTEM:
				fmt.Fprintf(out, "  • %s\n", firstLine(m.Text, 200))
			}
		case *agentv1.WatchConversationResponse_Reply:
			if p.Reply.Id == sent.Reply.Id && p.Reply.Status != agentv1.ReplyStatus_REPLY_STATUS_RUNNING {
				if streaming {
					fmt.Fprintln(out)
				}
				if p.Reply.Status != agentv1.ReplyStatus_REPLY_STATUS_COMPLETED {
					return fmt.Errorf("the reply %s: %s", enumName(p.Reply.Status, "REPLY_STATUS_"), p.Reply.StatusReason)
				}
				return nil
			}
		}
	}
}
