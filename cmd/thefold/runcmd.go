package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/thefold/thefold/pkg/client"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// errDetached is a run the person stopped watching (Ctrl-C): the job goes on.
var errDetached = errors.New("detached")

// terminal reports whether w is a terminal (a progress line is redrawn in place there;
// elsewhere each change is a line of its own).
func terminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// ANSI colours for a terminal.
const (
	ansiRed, ansiGreen, ansiCyan, ansiBold, ansiReset = "\x1b[31m", "\x1b[32m", "\x1b[36m", "\x1b[1m", "\x1b[0m"
)

func runCommand(g *globals) *cobra.Command {
	var (
		repo, description, answer string
		yes                       bool
	)
	cmd := &cobra.Command{
		Use:   `run "TITLE" --repo OWNER/NAME`,
		Short: "Do a task end to end: create it, run its job live, review it here, get the pull request",
		Long: `run creates a task, starts its job and follows it live: phase, build step and file, fix
rounds, cost so far. A question of the job is asked here. At the review gate it shows the
diff and the AI review and asks: approve, request changes, or reject; approving opens the
pull request, whose link it prints. Ctrl-C stops watching, not the job: thefold jobs watch
JOB goes on watching it.

With --yes the review is approved without asking (scripts); --answer answers a question
without asking.`,
		Example: `  thefold run "Add a health endpoint" --repo local/demo
  thefold run "Fix the flaky test" --repo local/api --description "TestWatch fails 1 in 20" --yes`,
		Args: exactArgs(1, `"TITLE"`),
		RunE: func(cmd *cobra.Command, args []string) error {
			if repo == "" {
				return usageError{errors.New("--repo is required (owner/name)")}
			}
			c, _, err := g.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			r := &runner{g: g, c: c, tty: terminal(g.out), yes: yes, answer: answer, in: bufio.NewReader(g.in)}
			return r.run(cmd.Context(), repo, args[0], description)
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "the repository (owner/name)")
	cmd.Flags().StringVar(&description, "description", "", "what to do and how to know it is done")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "approve the review without asking")
	cmd.Flags().StringVar(&answer, "answer", "", "the answer to a question of the job, without asking")
	return cmd
}

type runner struct {
	g      *globals
	c      *client.Client
	tty    bool
	yes    bool
	answer string
	in     *bufio.Reader
	// label, when set, marks every line of the run (the demo's "[SCRIPTED MODEL]").
	label string
	// approveNote is said before a review is approved without asking (--yes, the demo).
	approveNote string
	// line is the progress line shown (a terminal redraws it in place).
	line string
}

func (r *runner) colour(code, s string) string {
	if !r.tty {
		return s
	}
	return code + s + ansiReset
}

// progress shows s: in place on a terminal, as a line of its own elsewhere.
func (r *runner) progress(s string) {
	if r.label != "" {
		s = r.label + " " + s
	}
	if s == r.line {
		return
	}
	r.line = s
	if r.tty {
		fmt.Fprintf(r.g.out, "\r\x1b[2K%s", s)
		return
	}
	fmt.Fprintln(r.g.out, s)
}

// say prints a line of its own (after the progress line on a terminal).
func (r *runner) say(format string, args ...any) {
	if r.tty && r.line != "" {
		fmt.Fprintln(r.g.out)
		r.line = ""
	}
	if r.label != "" {
		format = r.label + " " + format
	}
	fmt.Fprintf(r.g.out, format+"\n", args...)
}

func (r *runner) run(ctx context.Context, repo, title, description string) error {
	job, err := r.start(ctx, repo, title, description)
	if err != nil {
		return err
	}
	err = r.follow(ctx, job)
	if errors.Is(err, errDetached) || (err != nil && ctx.Err() != nil) {
		r.say("Detached: the job goes on. Watch it again with: thefold jobs watch %s", job.Id)
		return nil
	}
	return err
}

// start creates the task and starts its job.
func (r *runner) start(ctx context.Context, repo, title, description string) (*agentv1.Job, error) {
	task, err := r.c.Tasks().CreateTask(ctx, &tasksv1.CreateTaskRequest{Repo: repo, Title: title, Description: description})
	if err != nil {
		return nil, err
	}
	job, err := r.c.Agent().StartTask(ctx, &agentv1.StartTaskRequest{TaskId: task.Task.Id})
	if err != nil {
		return nil, err
	}
	r.say("%s task %s %q, job %s on %s", r.colour(ansiBold, "TheFold"), task.Task.Id, title, job.Job.Id, repo)
	return job.Job, nil
}

// follow watches job until it ends, answering its question and deciding its review on the
// way.
func (r *runner) follow(ctx context.Context, job *agentv1.Job) error {
	stream, err := r.c.Agent().WatchJob(ctx, &agentv1.WatchJobRequest{Id: job.Id})
	if err != nil {
		return err
	}
	phase, step, cost := "", "", job.GetUsage().GetCostMicros()
	prShown := false
	showPR := func(pr *typev1.PullRequestRef) {
		if !prShown && pr.GetUrl() != "" {
			prShown = true
			r.say("%s %s", r.colour(ansiGreen, "Pull request:"), pr.GetUrl())
		}
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if ev.Id == 0 {
			continue
		}
		switch p := ev.Payload.(type) {
		case *agentv1.WatchJobResponse_PhaseChanged:
			phase, step = enumName(p.PhaseChanged.Phase, "JOB_PHASE_"), ""
		case *agentv1.WatchJobResponse_Progress:
			step = progressText(p.Progress)
		case *agentv1.WatchJobResponse_Diagnosis:
			r.say("  diagnosis: %s — %s", enumName(p.Diagnosis.GetCategory(), "DIAGNOSIS_CATEGORY_"), p.Diagnosis.GetReason())
		case *agentv1.WatchJobResponse_ClarificationRequested:
			if err := r.clarify(ctx, job.Id, p.ClarificationRequested.Question); err != nil {
				return err
			}
		case *agentv1.WatchJobResponse_StatusChange:
			st := p.StatusChange.Status
			switch st {
			case agentv1.JobStatus_JOB_STATUS_PENDING_REVIEW:
				if err := r.review(ctx, job.Id); err != nil {
					return err
				}
			case agentv1.JobStatus_JOB_STATUS_HUMAN_NEEDED, agentv1.JobStatus_JOB_STATUS_FAILED, agentv1.JobStatus_JOB_STATUS_CANCELLED,
				agentv1.JobStatus_JOB_STATUS_REJECTED, agentv1.JobStatus_JOB_STATUS_SKIPPED:
				r.say("%s %s: %s", r.colour(ansiRed, "Job "+enumName(st, "JOB_STATUS_")), job.Id, p.StatusChange.Reason)
				if st == agentv1.JobStatus_JOB_STATUS_HUMAN_NEEDED {
					return fmt.Errorf("the job needs a person: thefold jobs get %s", job.Id)
				}
				return errors.New("the job ended without a pull request")
			}
		case *agentv1.WatchJobResponse_PullRequest:
			showPR(p.PullRequest)
		}
		switch ev.Payload.(type) {
		case *agentv1.WatchJobResponse_PhaseChanged, *agentv1.WatchJobResponse_StatusChange:
			if got, err := r.c.Agent().GetJob(ctx, &agentv1.GetJobRequest{Id: job.Id}); err == nil {
				cost = got.Job.GetUsage().GetCostMicros()
				if got.Job.Status == agentv1.JobStatus_JOB_STATUS_COMPLETED {
					// The job can be done before this watch has read its pull request's
					// event (a phase change read late): the job itself names it.
					showPR(got.Job.GetPullRequest())
					r.say("%s job %s is done ($%.4f).", r.colour(ansiGreen, "✓"), job.Id, float64(cost)/1e6)
					return nil
				}
			}
		}
		if phase != "" && phase != "unspecified" {
			r.progress(fmt.Sprintf("%s %-12s %s  $%.4f", r.colour(ansiCyan, "▸"), phase, step, float64(cost)/1e6))
		}
	}
	return nil
}

// page shows text through the pager on a terminal (a diff longer than the screen), and
// prints it elsewhere. The pager is THEFOLD_PAGER, else PAGER (either set empty: none), else
// less when installed; LESS=FRX makes less keep the colours and exit at once when the text
// fits on the screen.
func (r *runner) page(text string) {
	if pager := pagerCommand(); r.tty && pager != "" {
		cmd := exec.Command("sh", "-c", pager)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(text), r.g.out, r.g.errOut
		cmd.Env = append(os.Environ(), "LESS=FRX")
		if err := cmd.Start(); err == nil {
			_ = cmd.Wait() // quitting the pager early is no error of the run
			return
		}
	}
	fmt.Fprint(r.g.out, text)
}

func pagerCommand() string {
	for _, k := range []string{"THEFOLD_PAGER", "PAGER"} {
		if v, ok := os.LookupEnv(k); ok {
			return v
		}
	}
	if _, err := exec.LookPath("less"); err == nil {
		return "less"
	}
	return ""
}

// progressText is a build's progress: its phase, the step of the steps known so far, the
// file, and the fix round that ended.
func progressText(p *agentv1.JobProgress) string {
	s := fmt.Sprintf("%s step %d/%d", enumName(p.BuildPhase, "BUILD_PHASE_"), p.CurrentStep, max(p.TotalSteps, p.CurrentStep))
	if p.FilePath != "" {
		s += " " + p.FilePath
	}
	if p.FixRound > 0 {
		verdict := "still failing"
		if p.FixPassed {
			verdict = "fixed"
		}
		s += fmt.Sprintf(" · fix round %d %s", p.FixRound, verdict)
	}
	return s
}

// ask prints question and reads a line, or fails when there is no one to ask.
func (r *runner) ask(question string) (string, error) {
	r.say("%s", question)
	fmt.Fprint(r.g.out, "> ")
	s, err := r.in.ReadString('\n')
	if err != nil && s == "" {
		return "", errDetached
	}
	return strings.TrimSpace(s), nil
}

func (r *runner) clarify(ctx context.Context, job, question string) error {
	answer := r.answer
	if answer == "" {
		var err error
		if answer, err = r.ask(r.colour(ansiBold, "The job asks: ") + question); err != nil {
			return err
		}
	} else {
		r.say("The job asks: %s\nAnswering: %s", question, answer)
	}
	_, err := r.c.Agent().RespondToClarification(ctx, &agentv1.RespondToClarificationRequest{Id: job, Answer: answer})
	return err
}

// review shows the job's review and decides it.
func (r *runner) review(ctx context.Context, job string) error {
	got, err := r.c.Agent().GetJob(ctx, &agentv1.GetJobRequest{Id: job})
	if err != nil {
		return err
	}
	rv, err := r.c.Reviews().GetReview(ctx, &agentv1.GetReviewRequest{Id: got.Job.ReviewId})
	if err != nil {
		return err
	}
	v := rv.Review
	r.say("%s review %s: %d files, +%d −%d, AI quality %d/10", r.colour(ansiBold, "Ready for review:"), v.Id,
		v.GetStats().GetFilesChanged(), v.GetStats().GetAdditions(), v.GetStats().GetDeletions(), v.QualityScore)
	var diff strings.Builder
	for _, f := range v.Files {
		if r.label != "" {
			diff.WriteString(r.label + " ")
		}
		diff.WriteString(r.colour(ansiBold, "── "+f.GetDiff().GetPath()) + "\n")
		for _, line := range strings.Split(strings.TrimRight(f.GetDiff().GetUnifiedDiff(), "\n"), "\n") {
			switch {
			case strings.HasPrefix(line, "+") && !strings.HasPrefix(line, "+++"):
				line = r.colour(ansiGreen, line)
			case strings.HasPrefix(line, "-") && !strings.HasPrefix(line, "---"):
				line = r.colour(ansiRed, line)
			case strings.HasPrefix(line, "@@"):
				line = r.colour(ansiCyan, line)
			}
			diff.WriteString(line + "\n")
		}
	}
	r.page(diff.String())
	for _, c := range v.Concerns {
		r.say("  concern: %s", c.GetMessage())
	}
	if v.Documentation != "" {
		r.say("  %s", v.Documentation)
	}
	choice := "a"
	if r.yes && r.approveNote != "" {
		r.say("%s", r.approveNote)
	}
	if !r.yes {
		if choice, err = r.ask("[a]pprove, [c]hange (with feedback), or [r]eject?"); err != nil {
			return err
		}
	}
	switch strings.ToLower(strings.TrimSpace(choice)) {
	case "a", "approve", "y", "yes":
		_, err = r.c.Reviews().ApproveReview(ctx, &agentv1.ApproveReviewRequest{Id: v.Id})
		r.say("Approved: the pull request is being opened.")
	case "c", "change", "changes":
		feedback, ferr := r.ask("What should change?")
		if ferr != nil {
			return ferr
		}
		_, err = r.c.Reviews().RequestChanges(ctx, &agentv1.RequestChangesRequest{Id: v.Id, Feedback: feedback})
		r.say("Sent back with your feedback: the job goes on.")
	case "r", "reject":
		_, err = r.c.Reviews().RejectReview(ctx, &agentv1.RejectReviewRequest{Id: v.Id, Reason: "rejected from the command line"})
	default:
		return usageError{fmt.Errorf("%q is not a choice: a, c or r (the review waits: thefold jobs watch %s)", choice, job)}
	}
	return err
}
