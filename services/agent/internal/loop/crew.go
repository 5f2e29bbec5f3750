package loop

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/fence"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
)

// A project's job is collect-only: it stops after validation and the project reviews all its
// tasks at once. A crew worker's job (Job.crew) belongs to a project too, but runs as a
// standalone job does: its own sandbox, review gate, branch and pull request.

// collectOnly reports whether j is a job of a project that collects its tasks' files.
func collectOnly(j *agentv1.Job) bool { return j.ProjectId != "" && !j.Crew }

// continuesPullRequest reports whether j continues an open pull request (a crew worker
// sent back to fix its checks, or a revision people asked for on the pull request): it
// starts from that branch and pushes to it.
func continuesPullRequest(j *agentv1.Job) bool {
	return (j.Crew || revises(j)) && j.Branch != "" && j.PullRequest.GetNumber() > 0
}

// revises reports whether j revises an earlier job's pull request after people asked for
// changes on it (Job.revises_job_id).
func revises(j *agentv1.Job) bool { return j.RevisesJobId != "" }

// messagesHeading introduces the person's messages to a job in what its model calls are
// told (the builder says the same to the build's).
const messagesHeading = "Messages from the person while the job ran (their words, to act on):"

// maxMessageBytes caps one message in a prompt.
const maxMessageBytes = 8 << 10

// messagesText is what people said to the job, fenced and labelled as theirs, or "" when
// nothing was said. Only crew workers are sent messages (PostProjectMessage).
func (r *run) messagesText(ctx context.Context) (string, int, error) {
	j := r.job()
	if !j.Crew {
		return "", 0, nil
	}
	ms, err := r.e.store.JobMessages(ctx, j.Id)
	if err != nil || len(ms) == 0 {
		return "", 0, err
	}
	var b strings.Builder
	b.WriteString(messagesHeading)
	for _, m := range ms {
		b.WriteString("\n" + fence.Fence("guidance", [][2]string{{"author", m.GetAuthorId()}}, m.GetText(), maxMessageBytes))
	}
	return b.String(), len(ms), nil
}

// task is the task as the job's model calls are told it: with what people said to the job
// since it began, last (so what comes before stays cached). key is what the call's request
// id gets for the messages it carries ("" for none): a call resumed after a message arrived
// is another request than the one recorded under the key without it.
func (r *run) task(ctx context.Context) (t *aiv1.TaskSpec, key string, err error) {
	t = r.rec.Context.Task
	msgs, n, err := r.messagesText(ctx)
	if err != nil || msgs == "" {
		return t, "", err
	}
	c := proto.CloneOf(t)
	c.Description = strings.TrimRight(c.Description, "\n") + "\n\n" + msgs
	return c, fmt.Sprintf("-m%d", n), nil
}

// shortSHA is a commit's sha as people read it.
func shortSHA(s string) string {
	if len(s) > 10 {
		return s[:10]
	}
	return s
}
