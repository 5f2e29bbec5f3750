package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/thefold/thefold/cmd/thefold/internal/eval"
	"github.com/thefold/thefold/pkg/client"
	"github.com/thefold/thefold/pkg/stack"
)

// evalFlags are thefold eval's own flags.
type evalFlags struct {
	tasks, out, dir string
	parallel        int
	taskTimeout     time.Duration
}

// runEval runs the eval: it loads the tasks, starts the stack (with the scripted model
// replaying the tasks' answers when no provider key is set, saying so), runs every task
// through the mesh and its hidden tests in a sandbox, then writes the reports and prints the
// summary. Tasks that fail are results, not errors: the error is for an eval that could not
// run (bad tasks, a stack that does not start, an interrupt).
func runEval(ctx context.Context, st *stack.Stack, src string, f evalFlags, out io.Writer) error {
	if f.parallel < 1 {
		return fmt.Errorf("-parallel: want at least 1, got %d", f.parallel)
	}
	if f.taskTimeout <= 0 {
		return fmt.Errorf("-timeout: want a positive duration, got %s", f.taskTimeout)
	}
	dir := f.dir
	if dir == "" {
		dir = filepath.Join(src, "eval", "tasks")
	}
	outDir := f.out
	if outDir == "" {
		outDir = filepath.Join(src, "eval", "out")
	}
	tasks, err := eval.LoadTasks(dir, f.tasks)
	if err != nil {
		return err
	}
	shownDir := dir
	if rel, err := filepath.Rel(src, dir); err == nil && filepath.IsLocal(rel) {
		shownDir = filepath.ToSlash(rel)
	}
	provider := realProvider()
	if provider == "" {
		common, err := eval.LoadCommon(dir)
		if err != nil {
			return err
		}
		script, err := eval.Script(tasks, common)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, `
*** SCRIPTED MODEL: REPLAYED ANSWERS, NOT A MODEL ***
No provider key is set (%s),
so the eval's model is fakellm: it REPLAYS the scripted answers of %s/*/fakellm.json.
The figures show the platform's wiring and its recovery from botched answers (several
scripts deliver the right answer the way models botch it); they say nothing about a model's
skill. Set ANTHROPIC_API_KEY (or another provider key) to measure a model.

`, scriptedNotice(), shownDir)
		// The scripted stack is the eval's own: no hourly cap on the jobs it starts.
		for _, k := range []string{"THEFOLD_AGENT_TASKS_PER_HOUR", "THEFOLD_AGENT_TASKS_PER_DAY"} {
			if os.Getenv(k) == "" {
				if err := os.Setenv(k, "0"); err != nil {
					return err
				}
			}
		}
		stop, err := startScriptedModel(st, script, out)
		if err != nil {
			return err
		}
		defer func() {
			fmt.Fprintln(out, "stopping the stack: its scripted model ends with this eval (make run starts it again)")
			stop()
		}()
	} else {
		fmt.Fprintf(out, "\nthe eval's model is a real one (%s): its %d tasks spend tokens at the provider's prices\n\n", provider, len(tasks))
	}
	if err := up(ctx, st, src, 2*time.Minute, out); err != nil {
		return err
	}
	c, err := stackClient(st)
	if err != nil {
		return err
	}
	defer c.Close()
	started := time.Now()
	runner := &eval.Runner{
		Client:     c,
		RepoPrefix: "local/eval-" + started.UTC().Format("20060102-150405") + "-",
		Timeout:    f.taskTimeout, Parallel: f.parallel, Log: out,
	}
	fmt.Fprintf(out, "\nrunning %d tasks, %d at a time (each to its review, then its hidden tests in a sandbox)\n", len(tasks), f.parallel)
	results := runner.Run(ctx, tasks)
	report := &eval.Report{Scripted: provider == "", Provider: provider, TasksDir: shownDir, Started: started,
		Elapsed: time.Since(started), Parallel: f.parallel, Results: results}
	werr := writeReports(report, outDir)
	report.Summary(out)
	if werr != nil {
		return werr
	}
	fmt.Fprintf(out, "\nreports: %s, %s, %s\n", filepath.Join(outDir, "report.md"), filepath.Join(outDir, "report.html"), filepath.Join(outDir, "results.json"))
	if ctx.Err() != nil {
		return fmt.Errorf("eval interrupted: %w", ctx.Err())
	}
	return nil
}

// stackClient is a gRPC client of st's services as the stack's admin (its token file).
func stackClient(st *stack.Stack) (*client.Client, error) {
	tok, err := os.ReadFile(st.TokenPath())
	if err != nil {
		return nil, err
	}
	cfg := client.Config{Token: strings.TrimSpace(string(tok)), Addrs: map[string]string{}}
	for s := range st.Ports.GRPC {
		cfg.Addrs[s] = st.GRPCAddr(s)
	}
	return client.New(cfg)
}

// writeReports writes report.md, report.html and results.json into dir.
func writeReports(r *eval.Report, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	page, err := r.HTML()
	if err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return errors.Join(
		os.WriteFile(filepath.Join(dir, "report.md"), []byte(r.Markdown()), 0o644),
		os.WriteFile(filepath.Join(dir, "report.html"), []byte(page), 0o644),
		os.WriteFile(filepath.Join(dir, "results.json"), append(js, '\n'), 0o644),
	)
}
