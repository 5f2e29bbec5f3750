package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/client"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
)

// linearCommand connects Linear workspaces and looks at their sync.
func linearCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "linear", Short: "Sync Linear issues with your tasks, both ways"}
	var (
		repo, keyEnv        string
		teams, projects, st []string
		every               time.Duration
	)
	connect := &cobra.Command{
		Use: "connect", Short: "Connect Linear teams: their issues become tasks and the tasks' statuses go back",
		Args: cobra.NoArgs,
		Example: "  LINEAR_API_KEY=lin_api_… thefold linear connect --repo acme/api --team 3f6c…\n" +
			"  thefold linear connect --repo acme/api --team 3f6c… --state unstarted --key-env MY_LINEAR_KEY",
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			key := os.Getenv(keyEnv)
			if key == "" {
				// Read from standard input rather than a flag: a key on the command line
				// stays in the shell's history.
				line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if err != nil && line == "" {
					return fmt.Errorf("no API key: set %s or pass it on standard input", keyEnv)
				}
				key = strings.TrimSpace(line)
			}
			resp, err := c.Linear().ConnectLinear(cmd.Context(), &agentv1.ConnectLinearRequest{Connection: &agentv1.LinearConnection{
				ApiKey: key, Repo: repo, TeamIds: teams, ProjectIds: projects, StateTypes: st, SyncInterval: durationpb.New(every)}})
			if err != nil {
				return err
			}
			cn := resp.Connection
			return g.print(resp, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "id\t%s\nlinear user\t%s\nteams\t%s\nrepo\t%s\nwebhook\t<your TheFold URL>%s (Linear: Settings → API → Webhooks, resource Issues)\n"+
					"secret\t%s\n\t(shown once: paste it into the webhook now)\n", cn.Id, cn.LinearUser, strings.Join(cn.TeamKeys, ","), cn.Repo,
					cn.WebhookPath, cn.WebhookSecret)
			})
		}),
	}
	connect.Flags().StringVar(&repo, "repo", "", "the repository the tasks are for (required)")
	connect.Flags().StringArrayVar(&teams, "team", nil, "a Linear team id to sync (repeatable, at least one)")
	connect.Flags().StringArrayVar(&projects, "project", nil, "only issues of this Linear project id (repeatable)")
	connect.Flags().StringArrayVar(&st, "state", nil, "a workflow state type whose issues become tasks: backlog, unstarted, started, triage (default unstarted and started)")
	connect.Flags().DurationVar(&every, "every", 0, "between periodic syncs, 1m to 24h (0: 10m)")
	connect.Flags().StringVar(&keyEnv, "key-env", "LINEAR_API_KEY", "the environment variable holding the API key (else it is read from standard input)")
	list := &cobra.Command{
		Use: "connections", Short: "List your Linear connections", Args: cobra.NoArgs, Example: "  thefold linear connections",
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.Linear().ListLinearConnections(cmd.Context(), &agentv1.ListLinearConnectionsRequest{PageSize: 100})
			if err != nil {
				return err
			}
			return g.print(protoList(resp.Connections), func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tTEAMS\tREPO\tKEY\tLAST SYNC")
				for _, cn := range resp.Connections {
					last := "-"
					if cn.LastSyncTime != nil {
						last = cn.LastSyncTime.AsTime().Local().Format("2006-01-02 15:04:05") + " " + firstLine(cn.LastSyncStatus, 60)
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", cn.Id, strings.Join(cn.TeamKeys, ","), cn.Repo, cn.ApiKeyHint, last)
				}
			})
		}),
	}
	sync := &cobra.Command{
		Use: "sync CONNECTION_ID", Short: "Pull every issue of a connection now and push what waits", Args: exactArgs(1, "CONNECTION_ID"),
		Example: "  thefold linear sync 3a9e1f0c-7d2b-4c5e-8f6a-1b2c3d4e5f60",
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Linear().SyncLinear(cmd.Context(), &agentv1.SyncLinearRequest{ConnectionId: args[0]})
			if err != nil {
				return err
			}
			return g.print(resp, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "created\t%d\nupdated\t%d\nunchanged\t%d\npushed\t%d\nconflicts\t%d\n", resp.Created, resp.Updated, resp.Unchanged,
					resp.Pushed, resp.Conflicts)
				for _, p := range resp.Problems {
					fmt.Fprintf(w, "problem\t%s\n", p)
				}
			})
		}),
	}
	issues := &cobra.Command{
		Use: "issues CONNECTION_ID", Short: "The issues a connection synced, with their tasks and conflicts", Args: exactArgs(1, "CONNECTION_ID"),
		Example: "  thefold linear issues 3a9e1f0c-7d2b-4c5e-8f6a-1b2c3d4e5f60",
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Linear().ListLinearIssues(cmd.Context(), &agentv1.ListLinearIssuesRequest{ConnectionId: args[0], PageSize: 100})
			if err != nil {
				return err
			}
			return g.print(protoList(resp.Issues), func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ISSUE\tSTATE\tTASK\tPUSHED\tCONFLICT")
				for _, is := range resp.Issues {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", is.Identifier, is.StateName, is.TaskId, is.PushedStatus, firstLine(is.Conflict, 80))
				}
			})
		}),
	}
	disconnect := &cobra.Command{
		Use: "disconnect CONNECTION_ID", Short: "Stop syncing a Linear connection (its tasks stay)", Args: exactArgs(1, "CONNECTION_ID"),
		Example: "  thefold linear disconnect 3a9e1f0c-7d2b-4c5e-8f6a-1b2c3d4e5f60",
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Linear().DeleteLinearConnection(cmd.Context(), &agentv1.DeleteLinearConnectionRequest{Id: args[0]})
			if err != nil {
				return err
			}
			return g.print(resp, func(w *tabwriter.Writer) { fmt.Fprintf(w, "disconnected\t%s\n", args[0]) })
		}),
	}
	cmd.AddCommand(connect, list, sync, issues, disconnect)
	return cmd
}
