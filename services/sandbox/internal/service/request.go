package service

import (
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/errs"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	"github.com/thefold/thefold/pkg/validate"
)

// Checking a CreateSandbox request: the image, resource limits and timeouts.

func (s *Server) checkImage(req *sandboxv1.CreateSandboxRequest) error {
	img := req.GetImage()
	if img == "" {
		return nil
	}
	if err := validate.MaxLen("image", img, maxImage); err != nil {
		return err
	}
	if b := req.GetBackend(); b != sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER {
		return errs.Invalid("image", "only for the docker backend (backend is %s)", backendName(b))
	}
	allowed := slices.Clone(s.cfg.AllowedImages)
	for _, v := range s.cfg.Images {
		allowed = append(allowed, v)
	}
	if !slices.Contains(allowed, img) {
		return errs.Invalid("image", "%q is not one of the configured images (THEFOLD_SANDBOX_IMAGES, THEFOLD_SANDBOX_ALLOWED_IMAGES)", validate.Truncate(img, 80))
	}
	return nil
}

// limits checks a request's limits and fills the defaults: the sandbox's effective limits.
func (s *Server) limits(l *sandboxv1.ResourceLimits) (*sandboxv1.ResourceLimits, error) {
	out := &sandboxv1.ResourceLimits{MemoryBytes: s.cfg.Memory, Cpus: s.cfg.CPUs, Pids: s.cfg.Pids,
		Timeout: durationpb.New(s.cfg.Timeout)}
	if l == nil {
		return out, nil
	}
	if l.NetworkAllowed {
		return nil, errs.Invalid("limits.network_allowed", "a sandbox never has network; a dependencies command asks for NETWORK_POLICY_PACKAGES in RunCommand")
	}
	switch m := l.MemoryBytes; {
	case m < 0 || (m > 0 && m < 16<<20) || m > s.cfg.MaxMemory:
		return nil, errs.Invalid("limits.memory_bytes", "want 16 MiB to %d bytes, or 0 for the default", s.cfg.MaxMemory)
	case m > 0:
		out.MemoryBytes = m
	}
	switch c := l.Cpus; {
	case c < 0 || c > maxCPUs() || c != c:
		return nil, errs.Invalid("limits.cpus", "want 0 to %g cores", maxCPUs())
	case c > 0:
		out.Cpus = c
	}
	switch p := l.Pids; {
	case p < 0 || (p > 0 && p < 8) || p > s.cfg.MaxPids:
		return nil, errs.Invalid("limits.pids", "want 8 to %d, or 0 for the default", s.cfg.MaxPids)
	case p > 0:
		out.Pids = p
	}
	if l.Timeout != nil {
		d, err := s.timeout("limits.timeout", l.Timeout)
		if err != nil {
			return nil, err
		}
		if d > 0 {
			out.Timeout = durationpb.New(d)
		}
	}
	return out, nil
}

// timeout checks a caller's timeout: 0 (the default), or 1 s to the configured maximum.
func (s *Server) timeout(field string, d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, errs.Invalid(field, "%v", err)
	}
	v := d.AsDuration()
	if v < 0 || (v > 0 && v < time.Second) || v > s.cfg.MaxTimeout {
		return 0, errs.Invalid(field, "want 1s to %s, or 0 for the default", s.cfg.MaxTimeout)
	}
	return v, nil
}
