package project

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// A crew's merge groups. Pull requests merge one at a time, each checked on its head merged
// into the base the one before it moved; checked alone, that puts a sandbox check between
// every two merges. When the repository's own check runs in a sandbox (the forge has no
// checks of its own) and more pull requests wait behind the front of the merge queue, the
// forge writes one commit of the base with all of them merged in, in queue order
// (CreateMergeGroup), and one check runs on it. When it passes, each is brought up to date
// and merged in turn: the trees those merges make are the group's, so each was checked.
// When it fails, the front is checked alone; the others' turns come after it.

// startGroup starts a check of the merge group whose front is task front: the queue's first
// pull requests merged together. It reports false, and changes nothing, when no group of
// two or more can be made: fewer queued, the front is to be checked alone, or the forge makes
// no groups.
func (x *run) startGroup(ctx context.Context, front *agentv1.ProjectTask) (bool, error) {
	st, p := &x.rec.State, x.p()
	if x.noGroups || st.AloneFirst == front.Id || len(st.MergeQueue) < 2 || st.MergeQueue[0] != front.Id {
		return false, nil
	}
	byID := index(Tasks(p.Phases))
	var tasks []*agentv1.ProjectTask
	var numbers []int32
	for _, id := range st.MergeQueue[:min(len(st.MergeQueue), maxGroup)] {
		t := byID[id]
		tasks, numbers = append(tasks, t), append(numbers, t.PullRequest.GetNumber())
	}
	resp, err := x.e.c.Repos.CreateMergeGroup(ctx, &githubv1.CreateMergeGroupRequest{Repo: p.Repo, Base: p.BaseBranch, Numbers: numbers})
	switch status.Code(err) {
	case codes.OK:
	case codes.Unimplemented:
		x.noGroups = true
		return false, nil
	case codes.FailedPrecondition, codes.NotFound:
		// A pull request the forge will not group (closed or moved meanwhile): each in turn.
		x.e.log.InfoContext(ctx, "crew: no merge group", "project", p.Id, "error", err)
		return false, nil
	default:
		return false, err
	}
	if len(resp.GetMembers()) < 2 {
		return false, nil // the second conflicts with the first: its own turn finds out
	}
	g := &store.MergeGroup{Sha: resp.GetSha()}
	for i, m := range resp.GetMembers() {
		g.Members = append(g.Members, store.GroupMember{Task: tasks[i].Id, Number: m.GetNumber(), Head: m.GetHeadSha()})
	}
	st.Group = g
	x.startCheck(ctx, groupCheck, g.Sha, g.Sha)
	front.StatusReason = fmt.Sprintf("checking %s together on %s", groupNumbers(g), shortSHA(g.Sha))
	return true, nil
}

// groupChecked acts on the end of the merge group's check: passed, each member in turn is
// brought up to date and merged; failed, the front is checked alone next.
func (x *run) groupChecked(ctx context.Context) (bool, error) {
	st, p := &x.rec.State, x.p()
	g := st.Group
	st.Group = nil
	rc := x.checking[groupCheck]
	delete(x.checking, groupCheck)
	front := x.mergeFront()
	if rc == nil || front == nil || front.Id != g.Members[0].Task {
		// Started by a run that ended, or the queue changed: the group is made again.
		return true, nil
	}
	if rc.err != nil || !rc.passed {
		st.AloneFirst = front.Id
		why := "failed"
		if rc.err != nil {
			why = "could not run: " + truncate(rc.err.Error(), 300)
		}
		front.StatusReason = fmt.Sprintf("the checks of %s together on %s %s; checking #%d alone", groupNumbers(g), shortSHA(g.Sha), why, front.PullRequest.GetNumber())
		if c := st.Checks[front.Id]; c != nil {
			c.Next = time.Time{} // at once
		}
		x.e.log.InfoContext(ctx, "crew: merge group failed its checks", "project", p.Id, "group", g.Sha, "members", groupNumbers(g))
		return true, nil
	}
	byID := index(Tasks(p.Phases))
	for _, m := range g.Members {
		t := byID[m.Task]
		if t == nil || t != x.mergeFront() || t.PullRequest.GetNumber() != m.Number {
			break
		}
		merged, err := x.mergeMember(ctx, t, m, g, rc.out)
		if err != nil {
			return true, err
		}
		if !merged {
			break // its turn alone sorts it out; the rest follow it
		}
	}
	return true, nil
}

// mergeMember merges task t, member m of passed merge group g: brought up to date with the
// base (the members before it merged), then merged at that head. merged is false when the
// forge refused (the head moved, or it no longer merges): its own turn comes next.
func (x *run) mergeMember(ctx context.Context, t *agentv1.ProjectTask, m store.GroupMember, g *store.MergeGroup, out string) (merged bool, err error) {
	p := x.p()
	ph := phaseOf(p, t)
	up, err := x.e.c.Repos.MergeBaseIntoPullRequest(ctx, &githubv1.MergeBaseIntoPullRequestRequest{Repo: p.Repo, Number: m.Number, ExpectedHeadSha: m.Head})
	if c := status.Code(err); c == codes.Aborted || c == codes.FailedPrecondition {
		x.e.log.InfoContext(ctx, "crew: a merge group's member changed; its turn comes alone", "project", p.Id, "pull_request", m.Number, "error", err)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	head := up.GetPullRequest().GetHeadSha()
	if up.GetUpdated() {
		t.StatusReason = fmt.Sprintf("took in %s (head %s)", p.BaseBranch, shortSHA(head))
		x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_BRANCH_UPDATED, t, ph))
	}
	summary := truncate(fmt.Sprintf("checked together with %s on %s\n%s", groupNumbers(g), shortSHA(g.Sha), out), maxChecksText)
	st := &x.rec.State
	if st.Checks == nil {
		st.Checks = map[string]*store.CrewCheck{}
	}
	// Kept as this head's result: should the merge be refused, its own turn merges it
	// without checking again.
	st.Checks[t.Id] = &store.CrewCheck{Head: head, State: store.CheckPassed, Summary: summary, Reported: true}
	t.Checks = summary
	t.StatusReason = fmt.Sprintf("checks passed on %s, together with %s", shortSHA(g.Sha), groupNumbers(g))
	x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_CHECKS_PASSED, t, ph))
	res, err := x.e.c.Repos.MergePullRequest(ctx, &githubv1.MergePullRequestRequest{Repo: p.Repo, Number: m.Number, ExpectedHeadSha: head,
		Method: githubv1.MergeMethod_MERGE_METHOD_SQUASH})
	switch status.Code(err) {
	case codes.OK:
		return true, x.crewMerged(ctx, t, res.GetPullRequest())
	case codes.Aborted, codes.FailedPrecondition:
		x.e.log.InfoContext(ctx, "crew: merge refused; its turn comes alone", "project", p.Id, "pull_request", m.Number, "error", err)
		return false, nil
	}
	return false, err
}

// groupNumbers names a group's pull requests: "#3, #5 and #7".
func groupNumbers(g *store.MergeGroup) string {
	var ns []string
	for _, m := range g.Members {
		ns = append(ns, fmt.Sprintf("#%d", m.Number))
	}
	if len(ns) < 2 {
		return strings.Join(ns, "")
	}
	return strings.Join(ns[:len(ns)-1], ", ") + " and " + ns[len(ns)-1]
}

// MergeQueue is crew project rec's merge queue as GetProjectPool shows it: its open pull
// requests in the order they merge, those sent back to a worker left out.
func MergeQueue(rec *store.ProjectRecord) []*agentv1.MergeQueueEntry {
	st := &rec.State
	byID := index(Tasks(rec.Project.Phases))
	grouped := map[string]bool{}
	if st.Group != nil {
		for _, m := range st.Group.Members {
			grouped[m.Task] = true
		}
	}
	ids := queueOrder(st, rec.Project)
	var out []*agentv1.MergeQueueEntry
	for _, id := range ids {
		t := byID[id]
		out = append(out, &agentv1.MergeQueueEntry{ProjectTaskId: t.Id, Title: t.Title, IssueNumber: t.IssueNumber, PullRequest: t.PullRequest,
			StatusReason: t.StatusReason, InGroup: grouped[id]})
	}
	return out
}
