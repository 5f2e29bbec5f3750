package service

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/thefold/thefold/pkg/errs"

	"github.com/thefold/thefold/services/sandbox/internal/store"
)

// hostPath matches an absolute path in an error's text.
var hostPath = regexp.MustCompile(`(^|[\s"'(=])(/[^\s"':,)]+)`)

// publicCause is a backend error's text with every host path reduced to its last element,
// and sentinel suffixes dropped: it names the problem ("exec: bwrap: not found", "the
// docker engine does not answer") without telling a caller where this host keeps things.
func publicCause(err error) string {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return "program not found: " + filepath.Base(ee.Name)
	}
	msg := publicText(err)
	msg = hostPath.ReplaceAllStringFunc(msg, func(m string) string {
		i := strings.IndexByte(m, '/')
		return m[:i] + "…/" + filepath.Base(m[i:])
	})
	if len(msg) > 400 {
		msg = msg[:400] + "…"
	}
	return msg
}

// backendError is what a caller is told of a backend's failure, with its cause named and
// no host path; the whole error is logged with the sandbox id.
func (s *Server) backendError(ctx context.Context, sb *store.Sandbox, what string, err error) error {
	s.log.WarnContext(ctx, "sandbox: backend failure", "sandbox", sb.Id, "backend", backendName(sb.Backend), "what", what, "err", err)
	code := codes.Unavailable
	if errors.Is(err, errs.ErrFailedPrecondition) {
		code = codes.FailedPrecondition
	}
	return errs.Public(code, "the %s backend could not %s: %s", backendName(sb.Backend), what, publicCause(err)).Wrap(err)
}
