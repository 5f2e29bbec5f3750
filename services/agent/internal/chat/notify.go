package chat

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/thefold/thefold/pkg/events"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// Notifier brings the events of the jobs and projects a conversation started back into it
// as notices: started, a question (answerable in place), a person needed, the review ready,
// the pull request opened, done, failed. The conversation hears of each; the owner's
// integrations (Slack, Discord) of those their preferences' notifications leave on. It follows the agent's own events from a cursor
// kept in the database, so a restarted agent misses none; every replica may run one, as
// a notice is added once per event (keyed by it).
type Notifier struct {
	st  *store.Store
	hub *events.Hub
	log *slog.Logger
}

// NewNotifier returns a notifier over the agent's events.
func NewNotifier(st *store.Store, hub *events.Hub, log *slog.Logger) *Notifier {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Notifier{st: st, hub: hub, log: log}
}

var jsonIn = protojson.UnmarshalOptions{DiscardUnknown: true}

// Run follows the events until ctx ends.
func (n *Notifier) Run(ctx context.Context) error {
	after, err := n.st.NotifyCursor(ctx)
	if err != nil {
		return err
	}
	seen := 0
	return n.hub.Watch(ctx, after, events.Filter{}, func(e events.Event) error {
		var (
			m            *agentv1.ConversationMessage
			moment       store.Moment
			kind, target string
		)
		switch e.Stream {
		case store.EventStream:
			kind, target = "job", e.AggregateID
		case store.ProjectStream:
			kind, target = "project", e.AggregateID
		default:
			return nil
		}
		conv, err := n.st.LinkedConversation(ctx, kind, target)
		if err != nil {
			return err
		}
		if conv != "" {
			if kind == "job" {
				m, moment, err = n.jobNotice(ctx, e)
			} else {
				m, moment, err = n.projectNotice(e)
			}
			if err != nil {
				n.log.WarnContext(ctx, "chat: notice", "event", e.ID, "err", err)
				return nil
			}
		}
		if m != nil {
			if err := n.st.AddNoticeOnce(ctx, conv, noticeKey(m, e.ID), m, moment); err != nil {
				return err
			}
		}
		if seen++; m != nil || seen%200 == 0 {
			return n.st.SetNotifyCursor(ctx, e.ID)
		}
		return nil
	})
}

// jobNotice is the notice of job event e, nil when it is not one a person must see, and
// the moment it tells of (the owner's preferences say whether it goes to their
// integrations).
func (n *Notifier) jobNotice(ctx context.Context, e events.Event) (*agentv1.ConversationMessage, store.Moment, error) {
	ev := &agentv1.WatchJobResponse{}
	if err := jsonIn.Unmarshal(e.Payload, ev); err != nil {
		return nil, store.MomentNone, err
	}
	refs := &agentv1.NoticeRefs{JobId: e.AggregateID, Repo: e.Scope}
	if rec, err := n.st.Load(ctx, e.AggregateID); err == nil {
		refs.TaskId, refs.Repo = rec.Job.TaskId, rec.Job.Repo
	}
	job := "Job " + short(e.AggregateID)
	switch p := ev.Payload.(type) {
	case *agentv1.WatchJobResponse_StatusChange:
		switch p.StatusChange.Status {
		case agentv1.JobStatus_JOB_STATUS_RUNNING:
			if p.StatusChange.PreviousStatus != agentv1.JobStatus_JOB_STATUS_QUEUED {
				return nil, store.MomentNone, nil
			}
			return notice(agentv1.NoticeKind_NOTICE_KIND_JOB_STARTED, refs, job+" started on "+refs.Repo+"."), store.MomentNone, nil
		case agentv1.JobStatus_JOB_STATUS_HUMAN_NEEDED:
			return notice(agentv1.NoticeKind_NOTICE_KIND_HUMAN_NEEDED, refs, job+" needs a person: "+p.StatusChange.Reason), store.MomentJobFailed, nil
		case agentv1.JobStatus_JOB_STATUS_COMPLETED:
			return notice(agentv1.NoticeKind_NOTICE_KIND_DONE, refs, job+" is done."), store.MomentJobCompleted, nil
		case agentv1.JobStatus_JOB_STATUS_FAILED:
			return notice(agentv1.NoticeKind_NOTICE_KIND_FAILED, refs, job+" failed: "+p.StatusChange.Reason), store.MomentJobFailed, nil
		case agentv1.JobStatus_JOB_STATUS_REJECTED, agentv1.JobStatus_JOB_STATUS_CANCELLED:
			// An end without the work done: NotificationSettings.job_failed covers it.
			return notice(agentv1.NoticeKind_NOTICE_KIND_DONE, refs, job+" ended: "+store.StatusName(p.StatusChange.Status)+
				reasonSuffix(p.StatusChange.Reason)), store.MomentJobFailed, nil
		}
	case *agentv1.WatchJobResponse_ClarificationRequested:
		return notice(agentv1.NoticeKind_NOTICE_KIND_CLARIFICATION, refs, job+" asks: "+p.ClarificationRequested.Question+
			"\nAnswer here and TheFold passes it on."), store.MomentClarification, nil
	case *agentv1.WatchJobResponse_ReviewSubmitted:
		refs.ReviewId = p.ReviewSubmitted.ReviewId
		return notice(agentv1.NoticeKind_NOTICE_KIND_REVIEW_READY, refs, fmt.Sprintf("%s is ready for review (AI quality %d/10): review %s.",
			job, p.ReviewSubmitted.QualityScore, p.ReviewSubmitted.ReviewId)), store.MomentReviewReady, nil
	case *agentv1.WatchJobResponse_PullRequest:
		// The pull request is what completing a job means.
		refs.PullRequestUrl = p.PullRequest.Url
		return notice(agentv1.NoticeKind_NOTICE_KIND_PR_OPENED, refs, fmt.Sprintf("%s opened pull request #%d: %s", job, p.PullRequest.Number, p.PullRequest.Url)),
			store.MomentJobCompleted, nil
	}
	return nil, store.MomentNone, nil
}

// projectNotice is the notice of project event e, nil when it is not one a person must see,
// and its moment: a project's moments are its jobs' (review ready, completed, failed or in
// need of a person).
func (n *Notifier) projectNotice(e events.Event) (*agentv1.ConversationMessage, store.Moment, error) {
	ev := &agentv1.WatchProjectResponse{}
	if err := jsonIn.Unmarshal(e.Payload, ev); err != nil {
		return nil, store.MomentNone, err
	}
	refs := &agentv1.NoticeRefs{ProjectId: e.AggregateID}
	proj := "Project " + short(e.AggregateID)
	switch p := ev.Payload.(type) {
	case *agentv1.WatchProjectResponse_StatusChange:
		switch p.StatusChange.Status {
		case agentv1.ProjectStatus_PROJECT_STATUS_RUNNING:
			if p.StatusChange.PreviousStatus != agentv1.ProjectStatus_PROJECT_STATUS_PLANNED {
				return nil, store.MomentNone, nil
			}
			return notice(agentv1.NoticeKind_NOTICE_KIND_PROJECT_STARTED, refs, proj+" started."), store.MomentNone, nil
		case agentv1.ProjectStatus_PROJECT_STATUS_HUMAN_NEEDED:
			return notice(agentv1.NoticeKind_NOTICE_KIND_HUMAN_NEEDED, refs, proj+" needs a person: "+p.StatusChange.Reason), store.MomentJobFailed, nil
		case agentv1.ProjectStatus_PROJECT_STATUS_COMPLETED:
			return notice(agentv1.NoticeKind_NOTICE_KIND_DONE, refs, proj+" is done."), store.MomentJobCompleted, nil
		case agentv1.ProjectStatus_PROJECT_STATUS_FAILED:
			return notice(agentv1.NoticeKind_NOTICE_KIND_FAILED, refs, proj+" failed: "+p.StatusChange.Reason), store.MomentJobFailed, nil
		}
	case *agentv1.WatchProjectResponse_ReviewSubmitted:
		refs.ReviewId = p.ReviewSubmitted.ReviewId
		return notice(agentv1.NoticeKind_NOTICE_KIND_REVIEW_READY, refs, fmt.Sprintf("%s is ready for review (AI quality %d/10): review %s.",
			proj, p.ReviewSubmitted.QualityScore, p.ReviewSubmitted.ReviewId)), store.MomentReviewReady, nil
	}
	return nil, store.MomentNone, nil
}

// noticeKey keys notice m of event id: once per event, except a job's or project's start,
// which the tool that started it may have told of already (startedKey).
func noticeKey(m *agentv1.ConversationMessage, id int64) string {
	switch refs := m.GetNotice().GetRefs(); m.GetNotice().GetKind() {
	case agentv1.NoticeKind_NOTICE_KIND_JOB_STARTED:
		return startedKey("job", refs.GetJobId())
	case agentv1.NoticeKind_NOTICE_KIND_PROJECT_STARTED:
		return startedKey("project", refs.GetProjectId())
	}
	return "event:" + strconv.FormatInt(id, 10)
}

// startedKey keys the notice that a job or project (kind) started: the tool that starts it
// adds it at once (its first events may come before the conversation is linked to it), the
// notifier adds it when the tool did not.
func startedKey(kind, id string) string { return kind + ":" + id + ":started" }

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func reasonSuffix(r string) string {
	if r == "" {
		return "."
	}
	return " (" + r + ")."
}
