package authsvc

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/services/gateway/internal/store"
)

// The launcher issues the admin token offline, with the signing key, and cannot reach the
// gateway's database; when it replaces the token (`thefold token`, or `thefold up` near
// its expiry) it lists the old one's id and expiry in a file
// (THEFOLD_AUTH_REPLACED_ADMIN_TOKENS_FILE, auth.ReplacedTokensFile). The gateway turns
// each entry into an ordinary token revocation — stored, streamed to every service's
// verifier — at start and whenever the file changes, as it follows its signing key file.
// That keeps one revocation mechanism, works whether or not the stack is running when the
// token is replaced, and needs no credential beyond the file system the key already
// lives on.

// RevokeReplacedAdminTokens revokes the tokens the file lists (once each; expired ones
// need nothing). A missing file lists none.
func (c *Core) RevokeReplacedAdminTokens(ctx context.Context) error {
	path := c.cfg.ReplacedAdminTokensFile
	if path == "" {
		return nil
	}
	list, err := auth.ReadReplacedTokens(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("replaced admin tokens (thefold init creates the file): %w", err)
	}
	now := c.now()
	for _, t := range list {
		if !t.Expire.After(now) {
			continue
		}
		recorded, err := c.store.RevokeTokenOnce(ctx, t.ID, store.Revocation{Expire: t.Expire})
		if err != nil {
			return fmt.Errorf("replaced admin tokens: revoking %s: %w", t.ID, err)
		}
		if recorded {
			c.log.Info("replaced admin token revoked", "token_id", t.ID, "until", t.Expire)
		}
	}
	return nil
}

// FollowReplacedAdminTokens revokes the listed tokens whenever the file changes, until ctx
// ends (the gateway calls RevokeReplacedAdminTokens once before it serves).
func (c *Core) FollowReplacedAdminTokens(ctx context.Context) error {
	if c.cfg.ReplacedAdminTokensFile == "" {
		return nil
	}
	return auth.WatchFile(ctx, c.cfg.ReplacedAdminTokensFile, func() error { return c.RevokeReplacedAdminTokens(ctx) }, c.log)
}
