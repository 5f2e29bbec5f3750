package auth

import "context"

// CallerKey names whose share of a per-caller limit (watch slots, request budgets) a call
// spends: a person by user id — their tokens, sessions and API keys alike — and a service
// acting with its own identity by service and owner ("service:agent/<owner>"), apart from
// the owner's own share, so a person using up their budget does not starve the jobs the
// agent or builder runs for them (nor do those jobs eat the person's budget). A service
// token without an owner is the service's alone ("service:gateway/").
func CallerKey(p Principal) string {
	if p.Service != "" {
		return "service:" + p.Service + "/" + p.UserID
	}
	return "user:" + p.UserID
}

// CallerKeyFromContext is CallerKey of ctx's principal; ok is false without one (a public
// method called without a token).
func CallerKeyFromContext(ctx context.Context) (key string, ok bool) {
	p, ok := FromContext(ctx)
	if !ok {
		return "", false
	}
	return CallerKey(p), true
}
