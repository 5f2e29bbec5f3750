package authsvc

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/services/gateway/internal/store"
)

// IdentityService is internal to the mesh: verifiers follow revocations and exchange API
// keys through it.
type IdentityServer struct {
	gatewayv1.UnimplementedIdentityServiceServer
	*Core
}

// revocationHeartbeat keeps an idle revocation stream visibly alive.
const revocationHeartbeat = 30 * time.Second

var revocationTypes = map[string]gatewayv1.RevocationType{
	store.RevokeToken:        gatewayv1.RevocationType_REVOCATION_TYPE_TOKEN,
	store.RevokeSession:      gatewayv1.RevocationType_REVOCATION_TYPE_SESSION,
	store.RevokeUser:         gatewayv1.RevocationType_REVOCATION_TYPE_USER,
	store.RevokeAPIKey:       gatewayv1.RevocationType_REVOCATION_TYPE_API_KEY,
	store.RevokeUserDisabled: gatewayv1.RevocationType_REVOCATION_TYPE_USER_DISABLED,
	store.RevokeUserEnabled:  gatewayv1.RevocationType_REVOCATION_TYPE_USER_ENABLED,
}

func revocationProto(r store.Revocation) *gatewayv1.WatchRevocationsResponse {
	rev := &gatewayv1.Revocation{Subject: r.Subject, ExpireTime: timestamppb.New(r.Expire)}
	if !r.NotBefore.IsZero() {
		rev.NotBefore = timestamppb.New(r.NotBefore)
	}
	return &gatewayv1.WatchRevocationsResponse{Id: r.EventID, Time: timestamppb.New(r.Time), Type: revocationTypes[r.Type],
		Payload: &gatewayv1.WatchRevocationsResponse_Revocation{Revocation: rev}}
}

// WatchRevocations streams the revocations in force, then the new ones, to a service
// speaking for itself: they name the tokens, sessions, keys and users that no longer
// count, which is nobody else's business. Each service has its own few slots (its
// replicas), under the server's cap, so none can take another's.
func (s *IdentityServer) WatchRevocations(req *gatewayv1.WatchRevocationsRequest, stream grpc.ServerStreamingServer[gatewayv1.WatchRevocationsResponse]) error {
	ctx := stream.Context()
	caller, err := auth.RequireService(ctx)
	if err != nil {
		return err
	}
	if req.GetAfterId() < 0 {
		return errs.Invalid("after_id", "must not be negative")
	}
	leave, err := s.watches.EnterAs(auth.CallerKey(caller))
	if err != nil {
		return err
	}
	defer leave()
	after := req.GetAfterId()
	switch {
	case req.GetFromNow():
		if after, err = s.store.LatestEventID(ctx); err != nil {
			return err
		}
	case after == 0:
		inForce, cursor, err := s.store.RevocationsInForce(ctx)
		if err != nil {
			return err
		}
		for _, r := range inForce {
			if err := stream.Send(revocationProto(r)); err != nil {
				return events.StreamEnd(ctx, err)
			}
		}
		after = cursor
	default:
		if err := s.store.CheckCursor(ctx, after); err != nil {
			if errors.Is(err, events.ErrCursorExpired) {
				return status.Errorf(codes.OutOfRange, "after_id %d: older than the retained history; start again from 0", after)
			}
			return err
		}
	}
	heartbeat := func(cursor int64) error {
		return stream.Send(&gatewayv1.WatchRevocationsResponse{Time: timestamppb.Now(),
			Payload: &gatewayv1.WatchRevocationsResponse_Heartbeat{Heartbeat: &typev1.Heartbeat{Cursor: cursor, Time: timestamppb.Now()}}})
	}
	err = s.hub.Watch(ctx, after, store.RevocationFilter, func(e events.Event) error {
		r, ok := store.RevocationFromEvent(e)
		if !ok {
			return nil
		}
		return stream.Send(revocationProto(r))
	}, events.WithHeartbeat(revocationHeartbeat, heartbeat))
	if errors.Is(err, events.ErrCursorExpired) {
		err = status.Errorf(codes.OutOfRange, "after_id %d: older than the retained history; start again from 0", after)
	}
	return events.StreamEnd(ctx, err)
}

// ExchangeAPIKey returns an access token for an API key.
func (s *IdentityServer) ExchangeAPIKey(ctx context.Context, req *gatewayv1.ExchangeAPIKeyRequest) (*gatewayv1.ExchangeAPIKeyResponse, error) {
	if req.GetApiKey() == "" {
		return nil, errs.Invalid("api_key", "required")
	}
	tok, exp, err := s.exchange(ctx, req.GetApiKey())
	if err != nil {
		return nil, err
	}
	return &gatewayv1.ExchangeAPIKeyResponse{AccessToken: tok, ExpireTime: timestamppb.New(exp)}, nil
}
