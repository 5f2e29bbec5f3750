package auth

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// RevocationType is what a revocation names.
type RevocationType int

// Revocation types (the gateway's thefold.gateway.v1.RevocationType).
const (
	// RevokeToken names a token id (jti).
	RevokeToken RevocationType = iota + 1
	// RevokeSession names a login session (sid): all of its access tokens.
	RevokeSession
	// RevokeUser names a user: their tokens issued before NotBefore.
	RevokeUser
	// RevokeAPIKey names an API key: the tokens acting for it.
	RevokeAPIKey
	// RevokeUserDisabled names a user who was disabled: like RevokeUser for their own
	// tokens, and, until RevokeUserEnabled, every service token acting for them is refused
	// too (a job started earlier must not go on in their name). Services that run work for
	// owners stop it when they see one (Verifier.OnRevoke).
	RevokeUserDisabled
	// RevokeUserEnabled names a user enabled again: it lifts RevokeUserDisabled (their
	// tokens issued before it stay refused by the RevokeUser that came with it).
	RevokeUserEnabled
)

// String names t as the gateway stores it.
func (t RevocationType) String() string {
	switch t {
	case RevokeToken:
		return "token"
	case RevokeSession:
		return "session"
	case RevokeUser:
		return "user"
	case RevokeAPIKey:
		return "api_key"
	case RevokeUserDisabled:
		return "user_disabled"
	case RevokeUserEnabled:
		return "user_enabled"
	}
	return fmt.Sprintf("RevocationType(%d)", int(t))
}

// Revocation says a token, a session, a user's older tokens or an API key no longer
// count. After Expire no token it covers can still be valid, and it is forgotten.
type Revocation struct {
	Type      RevocationType
	Subject   string
	NotBefore time.Time // RevokeUser only
	Expire    time.Time
}

// revocations is a Verifier's set of revocations in force.
type revocations struct {
	mu        sync.RWMutex
	bySubject map[RevocationType]map[string]Revocation
	pruned    time.Time
	hooks     []func(Revocation)
}

// OnRevoke makes v call fn with every revocation it holds now and every one it applies
// later (Revoke): those in force when it starts following the gateway, then each new one,
// possibly more than once (a follower that starts over). fn runs on the caller's or the
// follower's goroutine, so it must not block: a service that stops work for a revocation
// (an owner disabled: OwnersDisabled) hands it to a worker and makes it idempotent.
func (v *Verifier) OnRevoke(fn func(Revocation)) {
	v.revs.mu.Lock()
	var now []Revocation
	for _, m := range v.revs.bySubject {
		for _, r := range m {
			now = append(now, r)
		}
	}
	v.revs.hooks = append(v.revs.hooks, fn)
	v.revs.mu.Unlock()
	for _, r := range now {
		fn(r)
	}
}

// OwnersDisabled runs until ctx ends, calling stop for each owner v learns was disabled
// (RevokeUserDisabled), one at a time: the agent cancels their jobs, the builder their
// builds. An owner disabled while stop runs for them is stopped again; a stop that fails
// is retried a few times, then logged (their service tokens are refused anyway, so
// their work cannot act, only linger).
func OwnersDisabled(ctx context.Context, v *Verifier, log *slog.Logger, stop func(ctx context.Context, owner string) error) error {
	var mu sync.Mutex
	pending := map[string]bool{}
	wake := make(chan struct{}, 1)
	v.OnRevoke(func(r Revocation) {
		if r.Type != RevokeUserDisabled {
			return
		}
		mu.Lock()
		pending[r.Subject] = true
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
		for {
			mu.Lock()
			var owner string
			for o := range pending {
				owner = o
				break
			}
			delete(pending, owner)
			mu.Unlock()
			if owner == "" {
				break
			}
			var err error
			for attempt := range ownerStopAttempts {
				if err = stop(ctx, owner); err == nil || ctx.Err() != nil {
					break
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(attempt+1) * time.Second):
				}
			}
			if err != nil && ctx.Err() == nil {
				log.Error("stopping the work of a disabled owner", "owner", owner, "err", err)
			}
		}
	}
}

const ownerStopAttempts = 3

const revocationPruneEvery = time.Minute

// Revoke adds r to the revocations v checks; a later revocation of the same subject
// replaces an earlier one when it reaches further (a later NotBefore or Expire).
func (v *Verifier) Revoke(r Revocation) {
	if !v.apply(r) {
		return
	}
	v.revs.mu.RLock()
	hooks := v.revs.hooks
	v.revs.mu.RUnlock()
	for _, fn := range hooks {
		fn(r)
	}
}

// apply records r and reports whether it still means anything.
func (v *Verifier) apply(r Revocation) bool {
	now := v.o.now()
	if r.Subject == "" {
		return false
	}
	v.revs.mu.Lock()
	defer v.revs.mu.Unlock()
	if r.Type == RevokeUserEnabled {
		delete(v.revs.bySubject[RevokeUserDisabled], r.Subject)
		return true
	}
	if !r.Expire.After(now) {
		return false // covers nothing any more
	}
	if v.revs.bySubject == nil {
		v.revs.bySubject = map[RevocationType]map[string]Revocation{}
	}
	if now.Sub(v.revs.pruned) > revocationPruneEvery {
		for _, m := range v.revs.bySubject {
			for k, old := range m {
				if !old.Expire.After(now) {
					delete(m, k)
				}
			}
		}
		v.revs.pruned = now
	}
	m := v.revs.bySubject[r.Type]
	if m == nil {
		m = map[string]Revocation{}
		v.revs.bySubject[r.Type] = m
	}
	if old, ok := m[r.Subject]; ok {
		if old.NotBefore.After(r.NotBefore) {
			r.NotBefore = old.NotBefore
		}
		if old.Expire.After(r.Expire) {
			r.Expire = old.Expire
		}
	}
	m[r.Subject] = r
	return true
}

// UserDisabled reports whether v knows user to be disabled (RevokeUserDisabled, not yet
// lifted by RevokeUserEnabled nor expired): what arrives for them by another way than a
// token of theirs (a Slack message forwarded by the gateway) must be refused too.
func (v *Verifier) UserDisabled(user string) bool {
	v.revs.mu.RLock()
	defer v.revs.mu.RUnlock()
	r, ok := v.revs.bySubject[RevokeUserDisabled][user]
	return ok && r.Expire.After(v.o.now())
}

// Revocations reports how many revocations v holds (metrics, tests).
func (v *Verifier) Revocations() int {
	v.revs.mu.RLock()
	defer v.revs.mu.RUnlock()
	n := 0
	for _, m := range v.revs.bySubject {
		n += len(m)
	}
	return n
}

// check returns why p is revoked, or "".
func (r *revocations) check(p Principal) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.bySubject) == 0 {
		return ""
	}
	if _, ok := r.bySubject[RevokeToken][p.TokenID]; ok && p.TokenID != "" {
		return "token revoked"
	}
	if _, ok := r.bySubject[RevokeSession][p.SessionID]; ok && p.SessionID != "" {
		return "session ended"
	}
	if _, ok := r.bySubject[RevokeAPIKey][p.APIKeyID]; ok && p.APIKeyID != "" {
		return "API key revoked"
	}
	if p.UserID == "" {
		return "" // a service as itself
	}
	// A disabled owner's work stops: no service may act for them, whenever its token was
	// issued.
	if _, ok := r.bySubject[RevokeUserDisabled][p.UserID]; ok && p.Service != "" {
		return "owner disabled"
	}
	// Otherwise a service token acting for the user is not covered by a cut of their
	// tokens (a role change): work the user started (a job) carries on with the service's
	// own identity, which is issued afresh for each call.
	for _, t := range []RevocationType{RevokeUser, RevokeUserDisabled} {
		if u, ok := r.bySubject[t][p.UserID]; ok && p.Service == "" && p.IssuedAt.Before(u.NotBefore) {
			return "token issued before the user's tokens were revoked"
		}
	}
	return ""
}
