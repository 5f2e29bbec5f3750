package auth

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// scriptedIdentity is an IdentityService whose n-th WatchRevocations call (from 0) runs
// script[n]; calls past the script wait for the caller to go away.
type scriptedIdentity struct {
	gatewayv1.UnimplementedIdentityServiceServer
	afterIDs chan int64
	script   []func(stream grpc.ServerStreamingServer[gatewayv1.WatchRevocationsResponse]) error
	calls    atomic.Int32
}

func (s *scriptedIdentity) WatchRevocations(req *gatewayv1.WatchRevocationsRequest, stream grpc.ServerStreamingServer[gatewayv1.WatchRevocationsResponse]) error {
	s.afterIDs <- req.GetAfterId()
	if n := int(s.calls.Add(1)) - 1; n < len(s.script) {
		return s.script[n](stream)
	}
	<-stream.Context().Done()
	return stream.Context().Err()
}

func startIdentity(t *testing.T, srv gatewayv1.IdentityServiceServer) gatewayv1.IdentityServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	gatewayv1.RegisterIdentityServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return gatewayv1.NewIdentityServiceClient(conn)
}

func revocationMsg(id int64, typ gatewayv1.RevocationType, subject string, notBefore, expire time.Time) *gatewayv1.WatchRevocationsResponse {
	r := &gatewayv1.Revocation{Subject: subject, ExpireTime: timestamppb.New(expire)}
	if !notBefore.IsZero() {
		r.NotBefore = timestamppb.New(notBefore)
	}
	return &gatewayv1.WatchRevocationsResponse{Id: id, Time: timestamppb.Now(), Type: typ,
		Payload: &gatewayv1.WatchRevocationsResponse_Revocation{Revocation: r}}
}

func sendAll(stream grpc.ServerStreamingServer[gatewayv1.WatchRevocationsResponse], msgs ...*gatewayv1.WatchRevocationsResponse) error {
	for _, m := range msgs {
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	return nil
}

func TestFollowRevocations(t *testing.T) {
	t.Parallel()
	pub, priv := newKeys(t)
	v := NewVerifier(pub)
	s := NewSigner(priv)
	later := time.Now().Add(time.Hour)
	byToken, tp, _ := s.Issue("u1", nil, time.Hour)
	bySession, _, _ := s.IssueExtra("u1", nil, time.Hour, Extra{SessionID: "s1"})
	byKey, _, _ := s.IssueExtra("u1", nil, time.Hour, Extra{APIKeyID: "k1"})
	byUser, _, _ := s.Issue("u9", nil, time.Hour)
	untouched, _, _ := s.Issue("u2", nil, time.Hour)
	for _, tok := range []string{byToken, bySession, byKey, byUser, untouched} {
		wantValid(t, v, tok) // cached: revocations must reach cached tokens too
	}
	heartbeat := &gatewayv1.WatchRevocationsResponse{Time: timestamppb.Now(),
		Payload: &gatewayv1.WatchRevocationsResponse_Heartbeat{Heartbeat: &typev1.Heartbeat{Cursor: 99}}}

	applied := make(chan int, 8) // v.Revocations() seen by the server at each new stream
	id := &scriptedIdentity{afterIDs: make(chan int64, 16)}
	id.script = []func(grpc.ServerStreamingServer[gatewayv1.WatchRevocationsResponse]) error{
		// The revocations in force, a heartbeat (which moves no cursor), then a broken stream.
		func(st grpc.ServerStreamingServer[gatewayv1.WatchRevocationsResponse]) error {
			applied <- v.Revocations()
			if err := sendAll(st,
				revocationMsg(1, gatewayv1.RevocationType_REVOCATION_TYPE_TOKEN, tp.TokenID, time.Time{}, later),
				revocationMsg(2, gatewayv1.RevocationType_REVOCATION_TYPE_SESSION, "s1", time.Time{}, later),
				heartbeat); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "gateway restarting")
		},
		// Resumed after 2: a new revocation, one already expired (skipped, but the cursor
		// moves past it), then the gateway ends the stream.
		func(st grpc.ServerStreamingServer[gatewayv1.WatchRevocationsResponse]) error {
			applied <- v.Revocations()
			return sendAll(st,
				revocationMsg(3, gatewayv1.RevocationType_REVOCATION_TYPE_API_KEY, "k1", time.Time{}, later),
				revocationMsg(4, gatewayv1.RevocationType_REVOCATION_TYPE_TOKEN, "gone", time.Time{}, time.Now().Add(-time.Minute)))
		},
		// Resumed after 4, which the gateway no longer holds.
		func(grpc.ServerStreamingServer[gatewayv1.WatchRevocationsResponse]) error {
			applied <- v.Revocations()
			return status.Error(codes.OutOfRange, "after_id 4: older than the retained history")
		},
		// Started over from 0: everything in force again, and a user revocation; then the
		// stream stays open.
		func(st grpc.ServerStreamingServer[gatewayv1.WatchRevocationsResponse]) error {
			applied <- v.Revocations()
			if err := sendAll(st,
				revocationMsg(1, gatewayv1.RevocationType_REVOCATION_TYPE_TOKEN, tp.TokenID, time.Time{}, later),
				revocationMsg(2, gatewayv1.RevocationType_REVOCATION_TYPE_SESSION, "s1", time.Time{}, later),
				revocationMsg(3, gatewayv1.RevocationType_REVOCATION_TYPE_API_KEY, "k1", time.Time{}, later),
				revocationMsg(9, gatewayv1.RevocationType_REVOCATION_TYPE_USER, "u9", time.Now().Add(time.Second), later)); err != nil {
				return err
			}
			<-st.Context().Done()
			return nil
		},
	}
	client := startIdentity(t, id)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- FollowRevocations(ctx, client, v, slog.New(slog.DiscardHandler)) }()

	// after_id of each stream, and how many revocations v held when it started.
	want := []struct {
		after   int64
		applied int
	}{{0, 0}, {2, 2}, {4, 3}, {0, 3}}
	for i, w := range want {
		select {
		case got := <-id.afterIDs:
			n := <-applied
			if got != w.after || n != w.applied {
				t.Fatalf("stream %d: after_id %d with %d revocations applied, want after_id %d with %d", i, got, n, w.after, w.applied)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("stream %d was never opened", i)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for v.Revocations() != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("Revocations() = %d, want 4", v.Revocations())
		}
		time.Sleep(10 * time.Millisecond)
	}
	wantRevoked(t, v, byToken, "token revoked")
	wantRevoked(t, v, bySession, "session ended")
	wantRevoked(t, v, byKey, "API key revoked")
	wantRevoked(t, v, byUser, "issued before")
	wantValid(t, v, untouched)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("FollowRevocations = %v, want nil when its context ends", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("FollowRevocations did not return when its context ended")
	}
	select {
	case got := <-id.afterIDs:
		t.Fatalf("a stream after the end (after_id %d)", got)
	default:
	}
}

// The gateway may not be up when a service starts: the follower keeps trying.
func TestFollowRevocationsWaitsForTheGateway(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pub, priv := newKeys(t)
	v := NewVerifier(pub)
	tok, p, _ := NewSigner(priv).Issue("u1", nil, time.Hour)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- FollowRevocations(ctx, gatewayv1.NewIdentityServiceClient(conn), v, slog.New(slog.DiscardHandler))
	}()
	time.Sleep(500 * time.Millisecond) // a few failed attempts

	id := &scriptedIdentity{afterIDs: make(chan int64, 16)}
	id.script = []func(grpc.ServerStreamingServer[gatewayv1.WatchRevocationsResponse]) error{
		func(st grpc.ServerStreamingServer[gatewayv1.WatchRevocationsResponse]) error {
			if err := st.Send(revocationMsg(5, gatewayv1.RevocationType_REVOCATION_TYPE_TOKEN, p.TokenID, time.Time{}, time.Now().Add(time.Hour))); err != nil {
				return err
			}
			<-st.Context().Done()
			return nil
		},
	}
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	gs := grpc.NewServer()
	gatewayv1.RegisterIdentityServiceServer(gs, id)
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()

	select {
	case after := <-id.afterIDs:
		if after != 0 {
			t.Fatalf("first stream after_id = %d, want 0", after)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the follower never reached the gateway once it was up")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := v.Verify(tok); err != nil {
			wantRevoked(t, v, tok, "token revoked")
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the revocation was not applied")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
