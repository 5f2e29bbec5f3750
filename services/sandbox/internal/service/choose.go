package service

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
)

// Choosing a sandbox's backend: the isolation policy (see backends.go).

// chooseBackend picks the backend of a new sandbox. The server's default serves a request
// that names none; a request may name only a backend at least as isolated as the default
// (kubernetes = docker > bwrap > local), and local only an admin, when the operator offers
// it at all.
// Nothing falls back silently to less isolation: when the default docker backend has no
// image for the language, bwrap serves it (said in the warnings), else the request fails.
func (s *Server) chooseBackend(ctx context.Context, want sandboxv1.SandboxBackend, language string) (sandboxv1.SandboxBackend, []string, error) {
	var warnings []string
	local := sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL
	if want == sandboxv1.SandboxBackend_SANDBOX_BACKEND_UNSPECIFIED {
		want = s.def
		// The default docker backend may lack an image for a language: the next isolating
		// backend serves it, saying so; never local.
		if want == sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER && s.cfg.Images[imageLanguage(language)] == "" {
			if _, ok := s.backends[sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP]; !ok {
				return 0, nil, errs.Public(codes.FailedPrecondition, "the docker backend has no image for language %q and no other isolating backend is available: configure one in THEFOLD_SANDBOX_IMAGES (%s=<image>), or install bubblewrap", language, imageLanguage(language))
			}
			warnings = append(warnings, fmt.Sprintf("docker: no image for language %q (THEFOLD_SANDBOX_IMAGES): this sandbox uses bwrap", language))
			want = sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP
		}
		if want == s.def && want != sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER {
			warnings = append(warnings, s.reasons...)
		}
	} else {
		if want == local && want != s.def && !isAdmin(ctx) {
			return 0, nil, errs.Public(codes.PermissionDenied, "backend: LOCAL runs commands on the host without isolation; only an admin may ask for it, and only where the operator set THEFOLD_SANDBOX_ALLOW_LOCAL=true")
		}
		if isolation[want] < isolation[s.def] && !isAdmin(ctx) {
			return 0, nil, errs.Public(codes.PermissionDenied, "backend: %s is less isolated than this server's default (%s); ask for %s or leave backend unset", backendName(want), backendName(s.def), s.atLeast(s.def))
		}
	}
	if _, ok := s.backends[want]; !ok {
		if want == local {
			return 0, nil, errs.Public(codes.FailedPrecondition, "backend: the local backend is off on this server (THEFOLD_SANDBOX_ALLOW_LOCAL is not set; available: %v)", s.available())
		}
		return 0, nil, errs.Public(codes.FailedPrecondition, "backend: the %s backend is not available on this server (available: %v)", backendName(want), s.available())
	}
	if want == sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER && s.cfg.Images[imageLanguage(language)] == "" {
		return 0, nil, errs.Public(codes.FailedPrecondition, "backend: the docker backend has no image for language %q (THEFOLD_SANDBOX_IMAGES)", language)
	}
	if want == local {
		warnings = append(warnings, localWarning)
	}
	return want, warnings, nil
}

// atLeast lists the offered backends at least as isolated as k.
func (s *Server) atLeast(k sandboxv1.SandboxBackend) string {
	var out []string
	for _, b := range byIsolation {
		if _, ok := s.backends[b]; ok && isolation[b] >= isolation[k] {
			out = append(out, strings.ToUpper(backendName(b)))
		}
	}
	return strings.Join(out, " or ")
}

// isAdmin says whether the caller is an admin (a service acting for a user never is).
func isAdmin(ctx context.Context) bool {
	p, ok := auth.FromContext(ctx)
	return ok && p.HasRole(auth.RoleAdmin)
}

// imageLanguage is the key of a language's docker image; an undetected language takes Go's
// (the image a workspace gets when nothing says otherwise).
func imageLanguage(l string) string {
	if l == "" {
		return "go"
	}
	return l
}

func (s *Server) available() []string {
	var out []string
	for _, k := range byIsolation {
		if _, ok := s.backends[k]; ok {
			out = append(out, backendName(k))
		}
	}
	return out
}
