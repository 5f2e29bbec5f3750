package service

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/validate"
)

// The monitor's settings: defaults and bounds.
const (
	defaultHealthInterval = 24 * time.Hour
	minHealthInterval     = time.Hour
	maxHealthInterval     = 30 * 24 * time.Hour
	defaultTodoThreshold  = 200
	maxTodoThreshold      = 1_000_000
)

// healthSettings checks the monitor settings h (nil: off) and fills in their defaults.
func healthSettings(field string, h *agentv1.RepoHealthSettings) (*agentv1.RepoHealthSettings, error) {
	out := &agentv1.RepoHealthSettings{Enabled: h.GetEnabled(), AutoStart: h.GetAutoStart(), TodoThreshold: h.GetTodoThreshold()}
	interval := defaultHealthInterval
	if d := h.GetInterval(); d != nil {
		if err := d.CheckValid(); err != nil {
			return nil, errs.Invalid(field+".interval", "not a duration: %v", err)
		}
		if d.AsDuration() != 0 {
			interval = d.AsDuration().Round(time.Second)
		}
	}
	if interval < minHealthInterval || interval > maxHealthInterval {
		return nil, errs.Invalid(field+".interval", "between %s and %s (0 takes %s), got %s", minHealthInterval, maxHealthInterval, defaultHealthInterval, interval)
	}
	out.Interval = durationpb.New(interval)
	switch {
	case out.TodoThreshold < 0 || out.TodoThreshold > maxTodoThreshold:
		return nil, errs.Invalid(field+".todo_threshold", "between 0 and %d (0 takes %d), got %d", maxTodoThreshold, defaultTodoThreshold, out.TodoThreshold)
	case out.TodoThreshold == 0:
		out.TodoThreshold = defaultTodoThreshold
	}
	return out, nil
}

// repoHealth is the RepoHealthService side of the server.
type repoHealth struct {
	agentv1.UnimplementedRepoHealthServiceServer
	s *Server
}

// RepoHealth is the RepoHealthService side of the server.
func (s *Server) RepoHealth() agentv1.RepoHealthServiceServer { return &repoHealth{s: s} }

// CheckRepoHealth queues a check of one of the caller's connections.
func (h *repoHealth) CheckRepoHealth(ctx context.Context, req *agentv1.CheckRepoHealthRequest) (*agentv1.CheckRepoHealthResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if req.RequestId != "" {
		if err := validate.RequestID("request_id", req.RequestId); err != nil {
			return nil, err
		}
	}
	id, err := validate.UUID("connection_id", req.ConnectionId, true)
	if err != nil {
		return nil, err
	}
	if _, err := h.s.store.GetConnection(ctx, owner, id); err != nil {
		return nil, err
	}
	r, _, err := h.s.store.QueueHealthCheck(ctx, id, req.RequestId)
	if err != nil {
		return nil, err
	}
	return &agentv1.CheckRepoHealthResponse{Report: r}, nil
}

// GetRepoHealth returns the latest report of one of the caller's connections, its trend and
// its open findings.
func (h *repoHealth) GetRepoHealth(ctx context.Context, req *agentv1.GetRepoHealthRequest) (*agentv1.GetRepoHealthResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("connection_id", req.ConnectionId, true)
	if err != nil {
		return nil, err
	}
	size, err := validate.PageSize(req.TrendSize, 30, 100)
	if err != nil {
		return nil, errs.Invalid("trend_size", "1–100 (0 takes 30), got %d", req.TrendSize)
	}
	c, err := h.s.store.GetConnection(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	latest, err := h.s.store.LatestHealthReport(ctx, id)
	if err != nil {
		return nil, err
	}
	trend, err := h.s.store.HealthTrend(ctx, id, size)
	if err != nil {
		return nil, err
	}
	open, err := h.s.store.OpenFindings(ctx, id)
	if err != nil {
		return nil, err
	}
	return &agentv1.GetRepoHealthResponse{ConnectionId: id, Repo: c.Repo, Settings: c.GetHealth(), Latest: latest, Trend: trend, OpenFindings: open}, nil
}
