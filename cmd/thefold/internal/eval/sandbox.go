package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

const (
	// testTimeout bounds one hidden-test command (a cold Go build cache takes a while).
	testTimeout = 10 * time.Minute
	// createTimeout bounds making the sandbox, longer than a call's default deadline: a
	// checkout and a container on a cold machine take a while (the agent allows as long).
	createTimeout = 10 * time.Minute
	// tailLines and tailBytes bound the output kept of the hidden tests.
	tailLines = 40
	tailBytes = 4 << 10
)

// hiddenTests runs t's hidden tests in a fresh sandbox on repo's main branch with the
// review's files written over it: the review's changes applied, the hidden test files added,
// then t.Test's commands in order. It reports whether every command exited 0 and the tail of
// their output; an error is the harness's (the sandbox could not be made or written), not
// the task's.
func (r *Runner) hiddenTests(ctx context.Context, t *Task, repo string, review *agentv1.Review) (passed bool, tail string, err error) {
	sandboxes := r.Client.Sandbox()
	cctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	created, err := sandboxes.CreateSandbox(cctx, &sandboxv1.CreateSandboxRequest{
		Repo: repo, Ref: "main", Language: t.Language, Ttl: durationpb.New(30 * time.Minute)})
	if err != nil {
		return false, "", fmt.Errorf("create a sandbox on %s: %w", repo, err)
	}
	id := created.GetSandbox().GetId()
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_, _ = sandboxes.DestroySandbox(dctx, &sandboxv1.DestroySandboxRequest{Id: id})
	}()
	for _, f := range review.GetFiles() {
		d := f.GetDiff()
		switch {
		case d.GetAction() == typev1.FileAction_FILE_ACTION_DELETE:
			if _, err := sandboxes.DeleteFile(ctx, &sandboxv1.DeleteFileRequest{SandboxId: id, Path: d.GetPath()}); err != nil {
				return false, "", fmt.Errorf("delete %s: %w", d.GetPath(), err)
			}
		case d.GetBinary():
			return false, "", fmt.Errorf("%s: the review holds a binary file, whose content it does not show", d.GetPath())
		default:
			if _, err := sandboxes.WriteFile(ctx, &sandboxv1.WriteFileRequest{SandboxId: id, Path: d.GetPath(), Content: []byte(f.GetContent())}); err != nil {
				return false, "", fmt.Errorf("write %s: %w", d.GetPath(), err)
			}
		}
	}
	for _, f := range t.Hidden {
		if _, err := sandboxes.WriteFile(ctx, &sandboxv1.WriteFileRequest{SandboxId: id, Path: f.Path, Content: []byte(f.Content)}); err != nil {
			return false, "", fmt.Errorf("write the hidden test %s: %w", f.Path, err)
		}
	}
	var out strings.Builder
	for _, argv := range t.Test {
		fmt.Fprintf(&out, "$ %s\n", strings.Join(argv, " "))
		res, err := r.runCommand(ctx, id, argv, &out)
		if err != nil {
			return false, tailOf(out.String()), fmt.Errorf("run %s: %w", strings.Join(argv, " "), err)
		}
		switch {
		case res.GetTimedOut():
			fmt.Fprintf(&out, "[timed out after %s]\n", testTimeout)
			return false, tailOf(out.String()), nil
		case res.GetExitCode() != 0:
			fmt.Fprintf(&out, "[exit status %d]\n", res.GetExitCode())
			return false, tailOf(out.String()), nil
		}
	}
	return true, tailOf(out.String()), nil
}

// runCommand runs argv in the sandbox, appending its output to out.
func (r *Runner) runCommand(ctx context.Context, id string, argv []string, out *strings.Builder) (*sandboxv1.CommandResult, error) {
	stream, err := r.Client.Sandbox().RunCommand(ctx, &sandboxv1.RunCommandRequest{SandboxId: id, Command: argv, Timeout: durationpb.New(testTimeout)})
	if err != nil {
		return nil, err
	}
	var result *sandboxv1.CommandResult
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		out.Write(m.GetOutput().GetData())
		if res := m.GetResult(); res != nil {
			result = res
		}
	}
	if result == nil {
		return nil, errors.New("the command's stream ended without its result")
	}
	return result, nil
}

// tailOf keeps the last tailLines lines of s, at most tailBytes.
func tailOf(s string) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	cut := len(lines) > tailLines
	if cut {
		lines = lines[len(lines)-tailLines:]
	}
	s = strings.Join(lines, "\n")
	if len(s) > tailBytes {
		s = s[len(s)-tailBytes:]
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
		cut = true
	}
	if cut {
		s = "[… earlier output cut]\n" + s
	}
	return s
}
