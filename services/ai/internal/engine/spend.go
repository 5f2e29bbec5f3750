package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
)

// ReasonSpendLimit is the ErrorInfo reason of a call refused by the per-user daily spend
// limit. The agent reads it: retrying the step before the next UTC day cannot succeed.
const ReasonSpendLimit = "DAILY_SPEND_LIMIT_EXCEEDED"

// Owners tells whether a user is an administrator. Calls a service makes for a user (the
// agent's and builder's service tokens) carry no roles, so the spend limit's exemption of
// admins asks here; only a call over the limit does.
type Owners interface {
	IsAdmin(ctx context.Context, userID string) (bool, error)
}

// checkSpend refuses a call when the caller's owner has spent the day's limit (UTC day):
// RESOURCE_EXHAUSTED with a RetryInfo saying when the next day starts. It is one indexed sum
// over today's ledger entries of the user; recorded answers (a retried request_id) and the
// local embedder cost nothing and are not checked.
func (e *Engine) checkSpend(ctx context.Context) error {
	limit := e.cfg.DailySpendLimitMicros
	if limit <= 0 {
		return nil
	}
	if p, ok := auth.FromContext(ctx); ok && p.Service != "" && p.UserID == "" {
		return nil // a service's own work (Call.AsService): no owner's day to count against
	}
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return err
	}
	exempt := e.cfg.SpendLimitExemptAdmins
	if exempt && p.Service == "" && p.HasRole(auth.RoleAdmin) {
		return nil
	}
	now := e.now().UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	spent, err := e.st.SpentSince(ctx, p.UserID, day)
	if err != nil {
		return err
	}
	if spent < limit {
		return nil
	}
	if exempt && p.Service != "" && e.owners != nil {
		admin, err := e.owners.IsAdmin(ctx, p.UserID)
		if err != nil {
			e.log.WarnContext(ctx, "spend limit: could not tell whether the owner is an admin; the limit applies",
				"user", p.UserID, "service", p.Service, "err", err)
		}
		if admin {
			return nil
		}
	}
	next := day.Add(24 * time.Hour)
	err = errs.ResourceExhausted(next.Sub(now).Round(time.Second),
		"daily AI spend limit reached: %s spent today (UTC) of the %s allowed per user; calls are accepted again at %s (THEFOLD_AI_DAILY_SPEND_LIMIT_MICROS)",
		dollars(spent), dollars(limit), next.Format(time.RFC3339))
	if st, derr := status.Convert(err).WithDetails(&errdetails.ErrorInfo{Reason: ReasonSpendLimit, Domain: errorDomain,
		Metadata: map[string]string{"limit_micros": fmt.Sprint(limit), "spent_micros": fmt.Sprint(spent)}}); derr == nil {
		err = st.Err()
	}
	return err
}

func dollars(micros int64) string { return fmt.Sprintf("$%.2f", float64(micros)/1e6) }

// cachedOwners remembers IsAdmin answers for a while: a member over the limit makes every
// call ask again, and the answer (a role) rarely changes.
type cachedOwners struct {
	next Owners
	ttl  time.Duration
	now  func() time.Time

	mu      sync.Mutex
	answers map[string]ownerAnswer
}

type ownerAnswer struct {
	admin bool
	at    time.Time
}

// CacheOwners returns o with its answers kept for ttl.
func CacheOwners(o Owners, ttl time.Duration) Owners {
	return &cachedOwners{next: o, ttl: ttl, now: time.Now, answers: map[string]ownerAnswer{}}
}

func (c *cachedOwners) IsAdmin(ctx context.Context, userID string) (bool, error) {
	c.mu.Lock()
	a, ok := c.answers[userID]
	c.mu.Unlock()
	if ok && c.now().Sub(a.at) < c.ttl {
		return a.admin, nil
	}
	admin, err := c.next.IsAdmin(ctx, userID)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	if len(c.answers) > 10_000 {
		clear(c.answers) // bounded: a cache, not a directory
	}
	c.answers[userID] = ownerAnswer{admin: admin, at: c.now()}
	c.mu.Unlock()
	return admin, nil
}
