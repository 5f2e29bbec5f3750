package auth

import (
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
)

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
}

const revocationPruneEvery = time.Minute

// Revoke adds r to the revocations v checks; a later revocation of the same subject
// replaces an earlier one when it reaches further (a later NotBefore or Expire).
func (v *Verifier) Revoke(r Revocation) {
	now := v.o.now()
	if !r.Expire.After(now) || r.Subject == "" {
		return // covers nothing any more
	}
	v.revs.mu.Lock()
	defer v.revs.mu.Unlock()
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
	// A service token acting for the user is not covered: work the user started (a job)
	// carries on with the service's own identity, which is issued afresh for each call.
	if u, ok := r.bySubject[RevokeUser][p.UserID]; ok && p.Service == "" && p.IssuedAt.Before(u.NotBefore) {
		return "token issued before the user's tokens were revoked"
	}
	return ""
}
