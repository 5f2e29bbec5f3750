package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/tasks/internal/store"
)

const (
	// maxOrderTasks is the most tasks one ai.PlanTaskOrder call takes (the ai service's limit).
	maxOrderTasks = 500
	// maxOrderDescription caps, in bytes, each description sent for ordering. The order
	// depends on titles, links and priorities far more than on a description's tail, and
	// 500 full descriptions (64 KiB each) would not fit in one gRPC message (4 MiB).
	maxOrderDescription = 4096
)

// WithAI sets the ai service client PlanTaskOrder orders tasks with. It should come from
// pkg/grpcclient, which forwards the caller's identity and marks the ai service's errors
// as downstream ones. Without it PlanTaskOrder answers FAILED_PRECONDITION.
func WithAI(c aiv1.AIServiceClient) Option {
	return func(s *Server) { s.ai = c }
}

// DefaultOrderTimeout bounds one ai PlanTaskOrder call when no timeout is given: a model
// ordering hundreds of tasks takes far longer than the 30 s a call between services gets
// by default, and the caller's own deadline still applies when it is sooner.
const DefaultOrderTimeout = 5 * time.Minute

// WithOrderTimeout bounds one ai PlanTaskOrder call; d <= 0 keeps DefaultOrderTimeout.
func WithOrderTimeout(d time.Duration) Option {
	return func(s *Server) {
		if d > 0 {
			s.orderTimeout = d
		}
	}
}

// PlanTaskOrder orders the caller's open tasks of a repository with the ai service and
// stores each one's position (planned_order). A retry with the same request_id returns the
// first answer; when the first call failed after the model answered, the retry's ai call
// is answered from the ai service's record and billed once.
func (s *Server) PlanTaskOrder(ctx context.Context, req *tasksv1.PlanTaskOrderRequest) (*tasksv1.PlanTaskOrderResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	repo := req.GetRepo()
	if err := validate.Repo("repo", repo, true); err != nil {
		return nil, err
	}
	r, err := request("request_id", req.GetRequestId(), "PlanTaskOrder", req)
	if err != nil {
		return nil, err
	}
	if s.ai == nil {
		return nil, errs.Precondition("the ai service is not configured: ordering tasks needs it (THEFOLD_AI_ADDR)")
	}
	if r != nil {
		if recorded, err := s.store.RecordedOrder(ctx, owner, r); err != nil || recorded != nil {
			return recorded, err
		}
	}
	open, err := s.store.OpenTasks(ctx, owner, repo, maxOrderTasks+1)
	if err != nil {
		return nil, err
	}
	if len(open) > maxOrderTasks {
		return nil, errs.Precondition("%s has more than %d open tasks (backlog, planned or blocked); ordering takes at most %d: finish or cancel some first",
			repo, maxOrderTasks, maxOrderTasks)
	}
	if len(open) == 0 && r == nil {
		return &tasksv1.PlanTaskOrderResponse{}, nil
	}
	var (
		items     []store.OrderItem
		reasoning string
	)
	if len(open) > 0 {
		aiReq := orderRequest(repo, open)
		if aiReq.RequestId, err = aiRequestID(owner, r, aiReq); err != nil {
			return nil, err
		}
		callCtx, cancel := context.WithTimeout(ctx, s.orderTimeout)
		answer, err := s.ai.PlanTaskOrder(callCtx, aiReq)
		cancel()
		if err != nil {
			return nil, s.aiError(ctx, err)
		}
		if err := checkOrder(aiReq.Tasks, answer.GetTasks()); err != nil {
			s.log.WarnContext(ctx, "ai order rejected", "repo", repo, "ai_request_id", aiReq.RequestId, "err", err)
			retry := "try again"
			if r != nil {
				retry = "try again with a new request_id (a retry with this one gets the same answer)"
			}
			return nil, errs.Public(codes.Unavailable, "the ai service answered an order that cannot be used (%v); nothing was stored: %s", err, retry).Wrap(err)
		}
		for _, o := range answer.GetTasks() {
			items = append(items, store.OrderItem{TaskID: o.TaskId, Complexity: o.Complexity, EstimatedTokens: o.EstimatedTokens, Reasoning: o.Reasoning})
		}
		reasoning = answer.GetReasoning()
	}
	// Without open tasks and with a request_id this records the empty answer: the id is spent.
	return s.store.SaveOrder(ctx, owner, repo, items, reasoning, r)
}

// orderRequest is the ai request ordering open, the open tasks of repo. blocked_by keeps
// only links among them: a blocker outside the set is closed, under way or in another
// repository, and puts no constraint on this order.
func orderRequest(repo string, open []*tasksv1.Task) *aiv1.PlanTaskOrderRequest {
	in := make(map[string]bool, len(open))
	for _, t := range open {
		in[t.Id] = true
	}
	req := &aiv1.PlanTaskOrderRequest{Attribution: &aiv1.Attribution{Repo: repo}}
	for _, t := range open {
		ot := &aiv1.OrderableTask{
			Id: t.Id, Title: t.Title, Description: capBytes(t.Description, maxOrderDescription),
			Priority: t.Priority, Labels: t.Labels, Complexity: t.Complexity,
		}
		for _, b := range t.BlockedBy {
			if in[b] {
				ot.BlockedBy = append(ot.BlockedBy, b)
			}
		}
		req.Tasks = append(req.Tasks, ot)
	}
	return req
}

// capBytes cuts s to at most n bytes on a character boundary, marking the cut.
func capBytes(s string, n int) string {
	const mark = "…"
	if len(s) <= n {
		return s
	}
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// aiRequestID derives the ai call's request_id from the caller's, so that a retry of this
// call is a retry of the ai call: the ai service answers it from its record and bills it
// once. The owner is part of it so two users' ids never meet. So is the ai request itself:
// when the open tasks changed between a call and its retry (the first answer was never
// stored), the retry asks another question, and the ai service would refuse a request_id
// reused for it. A retry after the answer was stored never gets here (RecordedOrder).
// Without a request_id from the caller there is no idempotency, here or there.
func aiRequestID(owner string, r *store.Request, aiReq *aiv1.PlanTaskOrderRequest) (string, error) {
	if r == nil {
		return "", nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(aiReq)
	if err != nil {
		return "", fmt.Errorf("fingerprint ai request: %w", err)
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(owner), {0}, []byte(r.ID), {0}, b} {
		h.Write(part)
	}
	return "tasks-order-" + hex.EncodeToString(h.Sum(nil))[:40], nil
}

// checkOrder checks the ai service's answer against what was asked, whatever its contract
// promises: a wrong order stored would send the agent at a task before its blocker.
func checkOrder(asked []*aiv1.OrderableTask, got []*aiv1.TaskOrder) error {
	askedIDs := make(map[string]bool, len(asked))
	for _, t := range asked {
		askedIDs[t.Id] = true
	}
	pos := make(map[string]int, len(got))
	for i, o := range got {
		id := o.GetTaskId()
		switch {
		case !askedIDs[id]:
			return fmt.Errorf("it lists task %q, which was not asked for", validate.Truncate(id, 64))
		case pos[id] != 0:
			return fmt.Errorf("it lists task %s twice", id)
		case o.GetOrder() != int32(i+1):
			return fmt.Errorf("task %s is at position %d of the list but says %d", id, i+1, o.GetOrder())
		case o.GetComplexity() < 0 || o.GetComplexity() > maxComplexity:
			return fmt.Errorf("task %s has complexity %d, outside 0–%d", id, o.GetComplexity(), maxComplexity)
		case o.GetEstimatedTokens() < 0:
			return fmt.Errorf("task %s has a negative token estimate", id)
		}
		pos[id] = i + 1
	}
	for _, t := range asked {
		if pos[t.Id] == 0 {
			return fmt.Errorf("task %s is missing", t.Id)
		}
	}
	for _, t := range asked {
		for _, b := range t.BlockedBy {
			if pos[b] > pos[t.Id] {
				return fmt.Errorf("task %s comes before %s, which blocks it", t.Id, b)
			}
		}
	}
	return nil
}

// aiError maps a failed ai call on purpose (conventions: a downstream status is never passed
// through as this service's own answer).
func (s *Server) aiError(ctx context.Context, err error) error {
	var d *errs.Downstream
	if !errors.As(err, &d) {
		return err // not the ai service's answer (the caller's context, say): mapped as usual
	}
	code := d.Status.Code()
	s.log.WarnContext(ctx, "ai PlanTaskOrder failed", "code", code.String(), "err", err)
	switch code {
	case codes.FailedPrecondition:
		// The ai service's FAILED_PRECONDITION text is its own public message (it maps and
		// masks its errors like this service does), and it names what to configure — no
		// provider, or a disabled model — so it is passed on, bounded, after our own words.
		return errs.Public(codes.FailedPrecondition,
			"ordering tasks needs an LLM provider: configure one for the ai service with THEFOLD_AI_PROVIDER (and its API key, or an OpenAI-compatible base URL such as a local Ollama); the ai service said: %s",
			validate.Truncate(d.Status.Message(), 300)).Wrap(err)
	case codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded:
		// Not the ai service's text: for UNAVAILABLE it is often the transport's, with
		// internal addresses in it.
		why := map[codes.Code]string{
			codes.Unavailable:       "it or its model provider is unavailable",
			codes.ResourceExhausted: "its model provider's rate limit was hit",
			codes.DeadlineExceeded:  "it did not answer in time",
		}[code]
		return errs.Public(codes.Unavailable, "the ai service could not order the tasks: %s (%s); try again later", why, code).Wrap(err)
	}
	return err
}
