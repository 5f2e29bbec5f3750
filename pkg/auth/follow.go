package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
)

// Reconnection delays of FollowRevocations: short, because a revocation made while a
// verifier is not following reaches it only when it is back (the stream then resumes
// where it left off).
const (
	followMinBackoff = 100 * time.Millisecond
	followMaxBackoff = 2 * time.Second
)

// FollowRevocations applies the gateway's revocations (IdentityService.WatchRevocations) to
// v until ctx ends: those in force when it starts, then each new one as it is made.
// A broken stream is resumed after the last event seen, within seconds; a cursor the
// gateway no longer holds starts over with the revocations in force. It returns nil when
// ctx ends.
//
// The stream is service-only: ctx must carry the service's own identity (AsService). Each
// stream is set up with a token minted for it, so a reconnect hours later (service tokens
// live minutes) still authenticates; a stream keeps running past its token's expiry.
func FollowRevocations(ctx context.Context, client gatewayv1.IdentityServiceClient, v *Verifier, log *slog.Logger) error {
	var after int64
	backoff := followMinBackoff
	failures := 0
	for {
		got, err := followOnce(ctx, client, v, &after)
		if ctx.Err() != nil {
			return nil
		}
		if got {
			backoff, failures = followMinBackoff, 0
		}
		failures++
		if status.Code(err) == codes.OutOfRange {
			after = 0
		}
		// The gateway may simply not be up yet (services start before it): say so once,
		// then only when it keeps failing.
		if failures == 1 || failures%30 == 0 {
			log.Warn("following token revocations: stream ended; reconnecting", "err", err, "failures", failures)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, followMaxBackoff)
	}
}

// followOnce runs one stream; got reports whether it delivered anything.
func followOnce(ctx context.Context, client gatewayv1.IdentityServiceClient, v *Verifier, after *int64) (got bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The token goes on here, not only in a client interceptor, so any connection will do.
	if ctx, err = outgoing(ctx); err != nil {
		return false, err
	}
	stream, err := client.WatchRevocations(ctx, &gatewayv1.WatchRevocationsRequest{AfterId: *after})
	if err != nil {
		return false, err
	}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return got, errors.New("the gateway ended the stream")
		}
		if err != nil {
			return got, err
		}
		got = true
		if msg.GetId() == 0 {
			continue // heartbeat
		}
		if r := msg.GetRevocation(); r != nil {
			v.Revoke(Revocation{
				Type:      RevocationType(msg.GetType()),
				Subject:   r.GetSubject(),
				NotBefore: r.GetNotBefore().AsTime(),
				Expire:    r.GetExpireTime().AsTime(),
			})
		}
		*after = msg.GetId()
	}
}

// keyFilePoll is how often WatchFile looks at a key file.
const keyFilePoll = 2 * time.Second

// WatchKeyFile re-reads the public key file at path into v whenever it changes (a key
// rotation, `thefold rotate-key`), until ctx ends. A file that cannot be read or parsed
// leaves v's keys as they were.
func WatchKeyFile(ctx context.Context, path string, v *Verifier, log *slog.Logger) error {
	return WatchFile(ctx, path, func() error {
		keys, err := LoadVerifyKeys(path)
		if err != nil {
			return err
		}
		v.SetKeys(keys)
		log.Info("public keys reloaded", "path", path, "keys", len(keys), "current", KeyID(keys[0].Key))
		return nil
	}, log)
}

// WatchFile calls reload whenever the file at path changes (its modification time or
// size), until ctx ends. A reload that fails is logged and tried again at the next change
// or poll; the caller keeps what it had.
func WatchFile(ctx context.Context, path string, reload func() error, log *slog.Logger) error {
	stamp := func() string {
		fi, err := os.Stat(path)
		if err != nil {
			return ""
		}
		return fmt.Sprint(fi.ModTime().UnixNano(), fi.Size())
	}
	last := stamp()
	t := time.NewTicker(keyFilePoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now := stamp()
		if now == last || now == "" {
			continue
		}
		if err := reload(); err != nil {
			log.Warn("key file changed but does not load; keeping the keys in use", "path", path, "err", err)
			continue
		}
		last = now
	}
}
