package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/thefold/thefold/pkg/client"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/mcpserver"
)

// Exit codes, documented in the root command's help: scripts may rely on them.
const (
	exitOK          = 0
	exitFailure     = 1 // anything not below
	exitUsage       = 2 // a bad command, flag or argument, or input the API refused (INVALID_ARGUMENT)
	exitAuth        = 3 // not logged in, a login that expired or was revoked, or not allowed
	exitNotFound    = 4 // the resource does not exist (or is someone else's)
	exitPrecondtion = 5 // the resource is not in a state that allows it (FAILED_PRECONDITION, ABORTED)
	exitUnavailable = 6 // TheFold cannot be reached
)

const exitCodesHelp = `Exit codes:
  0  success
  1  failure
  2  bad usage, or input the API refused (its field violations are printed by field)
  3  not logged in, the login expired or was revoked, or not allowed (thefold login)
  4  not found (or someone else's)
  5  the resource's state does not allow it
  6  TheFold cannot be reached (is the stack up? thefold status)`

// stackCommands are the commands that manage a local stack; they keep their own flags
// (-data-dir, -src, …) and are run by run (main.go).
var stackCommands = []struct{ name, short string }{
	{"up", "Build and start the nine services, wait until healthy"},
	{"demo", "The main job end to end: a task to a reviewed pull request"},
	{"eval", "Run the eval's tasks through the mesh and report"},
	{"down", "Stop the supervisor, then the services"},
	{"status", "Show which services run and which are down"},
	{"supervise", "The supervisor itself (thefold up starts it)"},
	{"token", "Issue, save and print a fresh admin token"},
	{"init", "Create the signing keys and the admin token only (docker compose)"},
	{"rotate-key", "Replace the token signing key"},
}

// globals are the flags every API command takes.
type globals struct {
	profile string
	output  string
	out     io.Writer
	errOut  io.Writer
	in      io.Reader
}

// execute runs the command line args and returns the process's exit code.
func execute(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) int {
	root := newRoot(in, out, errOut)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(errOut, "thefold:", describe(err))
	code := exitCode(err)
	if code == exitUsage && cmd != nil && isUsageError(err) {
		fmt.Fprintf(errOut, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// usageError marks an error of the command line itself.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func isUsageError(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

func newRoot(in io.Reader, out, errOut io.Writer) *cobra.Command {
	g := &globals{out: out, errOut: errOut, in: in}
	root := &cobra.Command{
		Use:   "thefold",
		Short: "TheFold: an autonomous software-development platform, from the terminal",
		Long: `thefold runs a local TheFold stack (up, down, status, demo, eval) and talks to a running
one (login, tasks, jobs): the gRPC API through the Go client (pkg/client), as the user you
logged in as.

Where TheFold is: the profile's server (thefold login --host), else THEFOLD_HOST and each
service's THEFOLD_<SERVICE>_ADDR, else this machine's documented ports. Who you are: the
profile's credentials, else THEFOLD_TOKEN or THEFOLD_API_KEY.

` + exitCodesHelp,
		Example: `  thefold up && thefold login --token "$(thefold token)"
  thefold run "Add a health endpoint" --repo local/demo
  thefold tasks graph --repo local/demo
  thefold usage --since 7d --by day`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentFlags().StringVar(&g.profile, "profile", os.Getenv("THEFOLD_PROFILE"), "the login profile to use (default: the current one)")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "table", "output format: table, json or yaml")
	for _, sc := range stackCommands {
		name := sc.name
		root.AddCommand(&cobra.Command{
			Use:                name + " [flags]",
			Short:              sc.short,
			Long:               sc.short + ". Flags are Go-style (-data-dir DIR); thefold " + name + " -h lists them.",
			GroupID:            "stack",
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				return run(cmd.Context(), append([]string{name}, args...), out)
			},
		})
	}
	root.AddGroup(&cobra.Group{ID: "stack", Title: "Run a local stack:"}, &cobra.Group{ID: "api", Title: "Work with TheFold:"})
	for _, c := range []*cobra.Command{loginCommand(g), logoutCommand(g), whoamiCommand(g), tasksCommand(g), jobsCommand(g), runCommand(g), projectsCommand(g), reviewsCommand(g), chatCommand(g), reposCommand(g), linearCommand(g), memoryCommand(g), keysCommand(g), skillsCommand(g), modelsCommand(g), usageCommand(g), prefsCommand(g), mcpCommand(g)} {
		c.GroupID = "api"
		root.AddCommand(c)
	}
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageError{fmt.Errorf("unknown command %q", args[0])}
		}
		return nil
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return root
}

// protoList is xs as the list g.print writes (a JSON or YAML array of messages).
func protoList[T proto.Message](xs []T) []proto.Message {
	out := make([]proto.Message, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// connect is the client of the profile (or the environment).
func (g *globals) connect() (*client.Client, *profile, error) {
	cfg, p, err := g.clientConfig()
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(cfg)
	return c, p, err
}

// print writes v (a proto message or a list of them) in the output format, with table
// drawing the table form.
func (g *globals) print(v any, table func(w *tabwriter.Writer)) error {
	switch g.output {
	case "table", "":
		w := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
		table(w)
		return w.Flush()
	case "json", "yaml":
		b, err := marshalAny(v)
		if err != nil {
			return err
		}
		if g.output == "yaml" {
			if b, err = yaml.JSONToYAML(b); err != nil {
				return err
			}
			_, err = g.out.Write(b)
			return err
		}
		_, err = fmt.Fprintln(g.out, string(b))
		return err
	}
	return usageError{fmt.Errorf("--output: %q is not one of table, json, yaml", g.output)}
}

var marshal = protojson.MarshalOptions{UseProtoNames: true, Indent: "  "}

// marshalAny is a proto message, or a slice of them, as JSON.
func marshalAny(v any) ([]byte, error) {
	switch m := v.(type) {
	case proto.Message:
		return marshal.Marshal(m)
	case []proto.Message:
		items := make([]json.RawMessage, len(m))
		for i, x := range m {
			b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(x)
			if err != nil {
				return nil, err
			}
			items[i] = b
		}
		return json.MarshalIndent(items, "", "  ")
	}
	return json.MarshalIndent(v, "", "  ")
}

// describe is err as a person should read it: the API's message and its field violations.
func describe(err error) string {
	st, ok := statusOf(err)
	if !ok {
		return err.Error()
	}
	msg := st.Message()
	var fields []string
	for _, f := range errs.FieldViolations(st) {
		fields = append(fields, fmt.Sprintf("  %s: %s", f.GetField(), f.GetDescription()))
	}
	sort.Strings(fields)
	switch st.Code() {
	case codes.Unauthenticated:
		msg += "\n(log in again: thefold login)"
	case codes.Unavailable:
		msg += "\n(is TheFold running? thefold status, or check --profile / THEFOLD_HOST)"
	}
	if len(fields) > 0 {
		msg += "\n" + strings.Join(fields, "\n")
	}
	return msg
}

// exitCode is the documented exit code for err.
func exitCode(err error) int {
	if isUsageError(err) {
		return exitUsage
	}
	if errors.Is(err, errNotLoggedIn) {
		return exitAuth
	}
	st, ok := statusOf(err)
	if !ok {
		if strings.HasPrefix(err.Error(), "unknown command") || strings.Contains(err.Error(), "flag") {
			return exitUsage
		}
		return exitFailure
	}
	switch st.Code() {
	case codes.InvalidArgument, codes.OutOfRange:
		return exitUsage
	case codes.Unauthenticated, codes.PermissionDenied:
		return exitAuth
	case codes.NotFound:
		return exitNotFound
	case codes.FailedPrecondition, codes.Aborted, codes.AlreadyExists:
		return exitPrecondtion
	case codes.Unavailable, codes.DeadlineExceeded:
		return exitUnavailable
	}
	return exitFailure
}

// statusOf is the gRPC status err carries, if any (itself, or an error it wraps).
func statusOf(err error) (*grpcstatus.Status, bool) {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if st, ok := grpcstatus.FromError(e); ok && st != nil && st.Code() != codes.Unknown {
			return st, true
		}
	}
	return nil, false
}

func mcpCommand(g *globals) *cobra.Command {
	var transport, addr string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve TheFold to AI agents as an MCP server (stdio or streamable HTTP)",
		Long: `Serve TheFold's tools over the Model Context Protocol, as the logged-in user: create and
start a task, watch a job, answer its question, read a review, search memory, find
relevant files, list tasks and repositories, plan a project (and start it only when the
person confirmed). No tool approves, rejects or merges: reviews stay with the person.

Over stdio for an agent that runs it (Claude Code, Cursor: command "thefold mcp"), or
over streamable HTTP at http://ADDR/mcp on a loopback address only.`,
		Example: `  thefold mcp                               # stdio
  thefold mcp --transport http --addr 127.0.0.1:8765`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if transport != "stdio" && transport != "http" {
				return usageError{fmt.Errorf("--transport %q: stdio or http", transport)}
			}
			c, _, err := g.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			return mcpserver.Serve(cmd.Context(), c, transport, addr)
		},
	}
	cmd.Flags().StringVar(&transport, "transport", "stdio", "stdio or http")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8765", "the loopback address of the HTTP transport")
	return cmd
}
