package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/errs"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
	"github.com/thefold/thefold/services/sandbox/internal/store"
	sbvalidate "github.com/thefold/thefold/services/sandbox/internal/validate"
	"github.com/thefold/thefold/services/sandbox/internal/workspace"
)

const (
	maxArgs     = 256
	maxArgBytes = 1 << 20
	maxEnv      = 100
	maxEnvBytes = 64 << 10
	// logTail is how much of a command's output the command log keeps.
	logTail = 4 << 10
	// maxIncrementalPaths bounds ValidateIncremental ("one or a few files").
	maxIncrementalPaths = 50
)

// commonPrograms may run in every sandbox: inspection, files, version control, make.
var commonPrograms = []string{"git", "make", "ls", "cat", "find", "grep", "head", "tail", "wc", "echo", "true",
	"false", "test", "mkdir", "rm", "cp", "mv", "touch", "sed", "awk", "sort", "uniq", "diff", "pwd", "tr", "cut"}

// languagePrograms are the toolchains of each language.
var languagePrograms = map[string][]string{
	"go":         {"go", "gofmt", vulnCheck},
	"typescript": {"node", "npm", "npx", "tsc", "eslint", "prettier", "jest", "vitest"},
	"javascript": {"node", "npm", "npx", "eslint", "prettier", "jest", "vitest"},
	"python":     {"python3", "python", "pytest", "pip", "pip3", "ruff", "mypy"},
}

// installers are the programs a NETWORK_POLICY_PACKAGES command may be, by package source.
var installers = map[string][]string{"go": {"go"}, "npm": {"npm", "npx"}, "pip": {"pip", "pip3", "python3", "python"}}

// vulnCheck reads the Go vulnerability database (THEFOLD_SANDBOX_GOVULNDB) when run with
// NETWORK_POLICY_PACKAGES; it is in a sandbox only where its image has it.
const vulnCheck = "govulncheck"

// packagesCommand is the argv, environment and egress allowlist of a command run with
// NETWORK_POLICY_PACKAGES, or an error saying why it may not run so. govulncheck gets the
// server's vulnerability database as its -db (a caller's own is refused: the database is
// a source the server chose) and the Go package source, for the modules it loads.
func (s *Server) packagesCommand(argv []string) ([]string, map[string]string, []string, error) {
	if argv[0] != vulnCheck {
		env, allow, err := s.packagesEnv(argv[0])
		return argv, env, allow, err
	}
	if s.cfg.GoVulnDB == "" {
		return nil, nil, nil, errs.Invalid("network", "NETWORK_POLICY_PACKAGES for %s needs a vulnerability database configured on the server (THEFOLD_SANDBOX_GOVULNDB); none is", vulnCheck)
	}
	for _, a := range argv[1:] {
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") && name == "db" {
			return nil, nil, nil, errs.Invalid("command", "%s's -db is the server's vulnerability database (THEFOLD_SANDBOX_GOVULNDB); leave it out", vulnCheck)
		}
	}
	db, err := url.Parse(s.cfg.GoVulnDB)
	if err != nil || (db.Scheme != "http" && db.Scheme != "https") || db.Host == "" {
		return nil, nil, nil, errs.Public(codes.FailedPrecondition, "the server's vulnerability database is not an http(s) URL; its operator must fix it")
	}
	env, allow := map[string]string{}, []string(nil)
	if s.cfg.GoProxy != "" {
		if env, allow, err = s.packagesEnv("go"); err != nil {
			return nil, nil, nil, err
		}
	}
	allow = append(allow, db.Scheme+"://"+db.Host)
	return append([]string{vulnCheck, "-db", s.cfg.GoVulnDB}, argv[1:]...), env, allow, nil
}

// allowed lists the programs RunCommand runs in a sandbox of the given languages: the
// configured list when set, else the common programs plus each language's toolchain (every
// toolchain when no language is known yet, so an empty workspace can be initialised).
func (s *Server) allowed(langs []string) []string {
	list := slices.Clone(s.cfg.Allow)
	if len(list) == 0 {
		list = slices.Clone(commonPrograms)
		if len(langs) == 0 {
			langs = languages
		}
		for _, l := range langs {
			list = append(list, languagePrograms[l]...)
		}
	}
	list = append(list, s.cfg.AllowExtra...)
	slices.Sort(list)
	return slices.Compact(list)
}

// languagesOf is the sandbox's language plus those detected in its workspace now.
func languagesOf(sb *store.Sandbox, ws *workspace.Workspace) []string {
	var out []string
	if sb.Language != "" {
		out = append(out, sb.Language)
	}
	for _, l := range sbvalidate.Detect(ws.Root()) {
		if !slices.Contains(out, string(l)) {
			out = append(out, string(l))
		}
	}
	return out
}

// checkCommand validates argv, env and stdin before anything runs.
func (s *Server) checkCommand(req *sandboxv1.RunCommandRequest) error {
	argv := req.GetCommand()
	if len(argv) == 0 || argv[0] == "" {
		return errs.Invalid("command", "required: an argv list, command[0] the program (no shell string)")
	}
	if len(argv) > maxArgs {
		return errs.Invalid("command", "at most %d arguments", maxArgs)
	}
	total := 0
	for _, a := range argv {
		total += len(a)
	}
	if total > maxArgBytes {
		return errs.Invalid("command", "arguments total %d bytes; at most %d", total, maxArgBytes)
	}
	if !programName.MatchString(argv[0]) {
		return errs.Invalid("command", "command[0] %q must be a program name looked up on the sandbox's PATH (no path, no shell syntax)", validate.Truncate(argv[0], 60))
	}
	if len(req.GetEnv()) > maxEnv {
		return errs.Invalid("env", "at most %d variables", maxEnv)
	}
	envBytes := 0
	for k, v := range req.GetEnv() {
		envBytes += len(k) + len(v)
		if k == "" || strings.ContainsAny(k, "=\x00") || !validate.PrintableASCII(k, false) {
			return errs.Invalid("env", "variable name %q: want printable ASCII without '=' or spaces", validate.Truncate(k, 40))
		}
	}
	if envBytes > maxEnvBytes {
		return errs.Invalid("env", "%d bytes; at most %d", envBytes, maxEnvBytes)
	}
	if int64(len(req.GetStdin())) > s.cfg.MaxFileBytes {
		return errs.Invalid("stdin", "%d bytes; at most %d", len(req.GetStdin()), s.cfg.MaxFileBytes)
	}
	return validate.Enum("network", req.GetNetwork(), true)
}

// packagesEnv is the environment of a dependencies command that may use the network and the
// egress allowlist it runs with (its package source, nothing else), or an error saying why
// it may not.
func (s *Server) packagesEnv(program string) (map[string]string, []string, error) {
	sources := map[string]struct{ url, env string }{
		"go": {s.cfg.GoProxy, "GOPROXY"}, "npm": {s.cfg.NPMRegistry, "npm_config_registry"}, "pip": {s.cfg.PipIndex, "PIP_INDEX_URL"},
	}
	for _, src := range slices.Sorted(maps.Keys(installers)) {
		if !slices.Contains(installers[src], program) {
			continue
		}
		if sources[src].url == "" {
			return nil, nil, errs.Invalid("network", "NETWORK_POLICY_PACKAGES for %s needs a package source configured on the server (%s); none is", program,
				map[string]string{"go": "THEFOLD_SANDBOX_GOPROXY", "npm": "THEFOLD_SANDBOX_NPM_REGISTRY", "pip": "THEFOLD_SANDBOX_PIP_INDEX"}[src])
		}
		env := map[string]string{sources[src].env: sources[src].url}
		if src == "go" {
			env["GOFLAGS"] = "-mod=mod"
		}
		// The allowlist is the scheme and host of each source URL (never its credentials).
		// GOPROXY is a list ("https://a,https://b|direct"): direct and off name no host, a
		// file:// source needs no network.
		var allow []string
		for _, u := range strings.FieldsFunc(sources[src].url, func(r rune) bool { return src == "go" && (r == ',' || r == '|') }) {
			u = strings.TrimSpace(u)
			if src == "go" && (u == "direct" || u == "off" || strings.HasPrefix(u, "file://")) {
				continue
			}
			pu, err := url.Parse(u)
			if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
				return nil, nil, errs.Public(codes.FailedPrecondition, "the server's package source for %s is not an http(s) URL; its operator must fix it", program)
			}
			allow = append(allow, pu.Scheme+"://"+pu.Host)
			// PyPI serves its index from pypi.org and the files it lists from its CDN.
			if src == "pip" && strings.EqualFold(pu.Hostname(), "pypi.org") {
				allow = append(allow, "https://files.pythonhosted.org")
			}
		}
		return env, allow, nil
	}
	return nil, nil, errs.Invalid("network", "NETWORK_POLICY_PACKAGES is only for package installers (go, npm, npx, pip, python3) and %s, not %s", vulnCheck, program)
}

// RunCommand runs an argv in the workspace, streams its output and ends with its result.
func (s *Server) RunCommand(req *sandboxv1.RunCommandRequest, stream grpc.ServerStreamingServer[sandboxv1.RunCommandResponse]) error {
	ctx := stream.Context()
	if err := s.checkCommand(req); err != nil {
		return err
	}
	dir, err := checkPath("workdir", req.GetWorkdir(), false)
	if err != nil {
		return err
	}
	timeout, err := s.timeout("timeout", req.GetTimeout())
	if err != nil {
		return err
	}
	if err := validate.RequestID("request_id", req.GetRequestId()); err != nil {
		return err
	}
	sb, ws, done, err := s.use(ctx, "sandbox_id", req.GetSandboxId())
	if err != nil {
		return err
	}
	defer done()
	var key store.Command
	if req.GetRequestId() != "" {
		key.RequestID, key.RequestHash = req.GetRequestId(), commandFingerprint(req)
		replayed, err := s.replay(sb.Id, key, stream)
		if replayed || err != nil {
			return err
		}
		end, err := s.startRequest(sb.Id + "/" + key.RequestID)
		if err != nil {
			return err
		}
		defer end()
	}
	program := req.GetCommand()[0]
	if allowed := s.allowed(languagesOf(sb, ws)); !slices.Contains(allowed, program) {
		return errs.Invalid("command", "%q is not an allowed program in this sandbox (allowed: %s; THEFOLD_SANDBOX_ALLOW_EXTRA adds more)", program, strings.Join(allowed, ", "))
	}
	env := map[string]string{}
	for k, v := range req.GetEnv() {
		env[k] = v
	}
	network := req.GetNetwork() == sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES
	argv := req.GetCommand()
	var allow []string
	if network {
		var extra map[string]string
		if argv, extra, allow, err = s.packagesCommand(argv); err != nil {
			return err
		}
		for k, v := range extra {
			env[k] = v
		}
	}
	if timeout == 0 {
		timeout = timeoutOf(sb.Limits, s.cfg.Timeout)
	}
	var sendErr error
	spec := backend.Spec{Argv: argv, Dir: dir, Env: env, Timeout: timeout, Stdin: req.GetStdin(),
		MaxOutput: s.cfg.MaxOutput, Network: network, Allow: allow,
		Output: func(streamNo int, p []byte) {
			if sendErr != nil {
				return
			}
			out := sandboxv1.OutputStream_OUTPUT_STREAM_STDOUT
			if streamNo == 2 {
				out = sandboxv1.OutputStream_OUTPUT_STREAM_STDERR
			}
			sendErr = stream.Send(&sandboxv1.RunCommandResponse{Event: &sandboxv1.RunCommandResponse_Output{
				Output: &sandboxv1.OutputChunk{Stream: out, Data: slices.Clone(p)}}})
		}}
	res, id, err := s.run(ctx, sb, spec, key)
	if err != nil {
		return err
	}
	if sendErr != nil {
		return sendErr
	}
	return stream.Send(&sandboxv1.RunCommandResponse{Event: &sandboxv1.RunCommandResponse_Result{Result: &sandboxv1.CommandResult{
		CommandId: id, ExitCode: int32(res.ExitCode), Duration: durationpb.New(res.Duration), TimedOut: res.TimedOut,
		OutputTruncated: res.Truncated}}})
}

// commandFingerprint identifies what a RunCommand asked, without its request_id.
func commandFingerprint(req *sandboxv1.RunCommandRequest) []byte {
	c := proto.Clone(req).(*sandboxv1.RunCommandRequest)
	c.RequestId = ""
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	h := sha256.Sum256(b)
	return h[:]
}

// replay answers a retry of a RunCommand whose command finished: the logged output tail and
// result, and reports whether it did. The same key for another request is InvalidArgument.
func (s *Server) replay(sandboxID string, key store.Command, stream grpc.ServerStreamingServer[sandboxv1.RunCommandResponse]) (bool, error) {
	prev, err := s.store.CommandByRequest(stream.Context(), sandboxID, key.RequestID)
	if errors.Is(err, errs.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !bytes.Equal(prev.RequestHash, key.RequestHash) {
		return false, errs.Invalid("request_id", "was used for a different RunCommand in this sandbox")
	}
	if prev.OutputTail != "" {
		if err := stream.Send(&sandboxv1.RunCommandResponse{Event: &sandboxv1.RunCommandResponse_Output{
			Output: &sandboxv1.OutputChunk{Stream: sandboxv1.OutputStream_OUTPUT_STREAM_STDOUT, Data: []byte(prev.OutputTail)}}}); err != nil {
			return false, err
		}
	}
	return true, stream.Send(&sandboxv1.RunCommandResponse{Event: &sandboxv1.RunCommandResponse_Result{Result: &sandboxv1.CommandResult{
		CommandId: prev.ID, ExitCode: int32(prev.ExitCode), Duration: durationpb.New(prev.Duration), TimedOut: prev.TimedOut,
		OutputTruncated: prev.Truncated}}})
}

// startRequest marks a RunCommand request key as running until end is called, or is
// AlreadyExists while another call with it runs.
func (s *Server) startRequest(key string) (end func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[key] {
		return nil, fmt.Errorf("request_id: a RunCommand with this request_id is running in this sandbox: %w", errs.ErrAlreadyExists)
	}
	if s.running == nil {
		s.running = map[string]bool{}
	}
	s.running[key] = true
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.running, key)
	}, nil
}

// run runs one command through the sandbox's backend and records it in the command log
// (under key's request_id, when it has one).
func (s *Server) run(ctx context.Context, sb *store.Sandbox, spec backend.Spec, key store.Command) (*backend.Result, string, error) {
	b := s.backends[sb.Backend]
	if b == nil {
		return nil, "", errs.Public(codes.FailedPrecondition, "sandbox %s uses the %s backend, which this server no longer offers; destroy it", sb.Id, backendName(sb.Backend))
	}
	if id, ok := b.(identifier); ok {
		// After a restart of the service the backend knows the workspace but not whose it
		// is: the container its next command makes carries the sandbox's identity.
		id.Identify(sb.Workspace, s.identity(sb))
	}
	res, err := b.Run(ctx, sb.Workspace, spec, limitsOf(sb.Limits))
	if err != nil {
		if errors.Is(err, errs.ErrInvalid) {
			return nil, "", errs.Invalid("command", "%s", publicText(err))
		}
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		return nil, "", s.backendError(ctx, sb, "run "+spec.Argv[0], err)
	}
	out := append(slices.Clone(res.Stdout), res.Stderr...)
	if len(out) > logTail {
		out = out[len(out)-logTail:]
	}
	exit := res.ExitCode
	if res.Signal != "" {
		exit = -1
	}
	id, err := s.store.LogCommand(context.WithoutCancel(ctx), &store.Command{SandboxID: sb.Id, Argv: spec.Argv, Workdir: spec.Dir,
		ExitCode: exit, TimedOut: res.TimedOut, Truncated: res.Truncated, Duration: res.Duration, OutputTail: strings.ToValidUTF8(strings.ReplaceAll(string(out), "\x00", ""), "\uFFFD"),
		RequestID: key.RequestID, RequestHash: key.RequestHash})
	if err != nil {
		return nil, "", err
	}
	res.ExitCode = exit
	return res, id, nil
}

// runner is the validation pipeline's way to run a tool in the sandbox (whose workspace is
// at root on the host): through its backend, recorded in the command log. Where a Go
// module is (go env GOMOD) is asked once per state of its go.mod and go.work files.
func (s *Server) runner(sb *store.Sandbox, root string) sbvalidate.Runner {
	return func(ctx context.Context, dir string, argv []string) (int, []byte, []byte, error) {
		if dir == "." {
			dir = ""
		}
		var key string
		if isGoEnvGOMOD(argv) {
			key = s.gomod.key(sb.Id, root, dir)
			if answer, ok := s.gomod.get(key); ok {
				return 0, []byte(answer), nil, nil
			}
		}
		// Discard: validation checks the workspace and keeps nothing a tool writes there
		// (a test's files, a compiler's caches).
		res, _, err := s.run(ctx, sb, backend.Spec{Argv: argv, Dir: dir, Timeout: timeoutOf(sb.Limits, s.cfg.Timeout), MaxOutput: s.cfg.MaxOutput,
			Discard: true}, store.Command{})
		if err != nil {
			return 0, nil, nil, err
		}
		if res.TimedOut {
			return res.ExitCode, res.Stdout, res.Stderr, fmt.Errorf("%s timed out after %s", argv[0], timeoutOf(sb.Limits, s.cfg.Timeout))
		}
		if key != "" && goodGOMOD(res.ExitCode, res.Stdout) {
			s.gomod.put(key, string(res.Stdout))
		}
		return res.ExitCode, res.Stdout, res.Stderr, nil
	}
}

// Validate runs the validation pipeline of the workspace's toolchains.
func (s *Server) Validate(ctx context.Context, req *sandboxv1.ValidateRequest) (*sandboxv1.ValidateResponse, error) {
	for _, k := range req.GetSteps() {
		if err := validate.Enum("steps", k, false); err != nil {
			return nil, err
		}
	}
	sb, ws, done, err := s.use(ctx, "sandbox_id", req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	defer done()
	resp, err := sbvalidate.Validate(ctx, ws.Root(), s.runner(sb, ws.Root()), sbvalidate.Options{Steps: req.GetSteps(), FailFast: req.GetFailFast()})
	if err != nil {
		return nil, validationError(err)
	}
	return resp, nil
}

// ValidateIncremental runs the cheapest checks covering a few files.
func (s *Server) ValidateIncremental(ctx context.Context, req *sandboxv1.ValidateIncrementalRequest) (*sandboxv1.ValidateIncrementalResponse, error) {
	paths := req.GetPaths()
	if len(paths) == 0 {
		return nil, errs.Invalid("paths", "at least one file")
	}
	if len(paths) > maxIncrementalPaths {
		return nil, errs.Invalid("paths", "at most %d files (Validate checks the whole workspace)", maxIncrementalPaths)
	}
	clean := make([]string, len(paths))
	for i, p := range paths {
		c, err := checkPath(fmt.Sprintf("paths[%d]", i), p, true)
		if err != nil {
			return nil, err
		}
		clean[i] = c
	}
	sb, ws, done, err := s.use(ctx, "sandbox_id", req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	defer done()
	rep, err := sbvalidate.ValidateIncremental(ctx, ws.Root(), clean, s.runner(sb, ws.Root()))
	if err != nil {
		if errors.Is(err, errs.ErrInvalid) || errors.Is(err, errs.ErrNotFound) {
			return nil, errs.Invalid("paths", "%s", publicText(err))
		}
		return nil, validationError(err)
	}
	resp := rep.Response
	for _, d := range rep.Others {
		if d.GetSeverity() >= severityError {
			resp.DependentDiagnostics = append(resp.DependentDiagnostics, d)
		}
	}
	return resp, nil
}

// validationError keeps the pipeline's own precondition messages (nothing to validate) and
// masks the rest.
func validationError(err error) error {
	if errors.Is(err, errs.ErrFailedPrecondition) {
		return errs.Public(codes.FailedPrecondition, "%s", publicText(err)).Wrap(err)
	}
	return err
}

// severityError and above fail a check.
const severityError = typev1.Severity_SEVERITY_ERROR
