package validate

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/errs"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// IncrementalReport is ValidateIncremental's answer: the contract's response (step
// diagnostics limited to the files asked about, other_errors counting error diagnostics
// elsewhere) and the diagnostics elsewhere themselves, which the contract has no field for.
type IncrementalReport struct {
	Response *sandboxv1.ValidateIncrementalResponse
	// Others are the diagnostics in other files: mostly dependents that a change broke.
	Others []*typev1.Diagnostic
	// Dependents are the Go packages (import paths) built because they import, directly or
	// not, a package of the files.
	Dependents []string
}

// ValidateIncremental runs the cheapest checks that cover paths (workspace-relative files):
// for Go, gofmt on the files, go vet of their packages, and go build of their packages
// together with every package in the module that imports them; for Python, compiling the
// files; for TypeScript/JavaScript, tsc over the files' projects (tsc has no per-file mode
// that keeps the tsconfig) and eslint on the files, where installed. Files of other
// languages, and Go files outside a module, are not checked. A path that is absolute,
// leaves the workspace or names no regular file is errs.ErrInvalid / errs.ErrNotFound.
func ValidateIncremental(ctx context.Context, root string, paths []string, run Runner) (*IncrementalReport, error) {
	start := time.Now()
	if len(paths) == 0 {
		return nil, fmt.Errorf("paths: at least one file is required: %w", errs.ErrInvalid)
	}
	clean := make([]string, 0, len(paths))
	for _, p := range paths {
		c, err := checkPath(root, p)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(clean, c) {
			clean = append(clean, c)
		}
	}
	rep := &IncrementalReport{Response: &sandboxv1.ValidateIncrementalResponse{}}
	var langs []Language
	var steps []step
	byModule := map[string][]string{}
	var pyFiles, nodeFiles []string
	for _, p := range clean {
		switch path.Ext(p) {
		case ".go":
			if mod := moduleOf(root, p); mod != "" {
				byModule[mod] = append(byModule[mod], p)
			}
		case ".py":
			pyFiles = append(pyFiles, p)
		case ".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs":
			nodeFiles = append(nodeFiles, p)
		}
	}
	if len(byModule) > 0 {
		langs = append(langs, Go)
		for _, mod := range sortedKeys(byModule) {
			s, deps, err := goIncrementalSteps(ctx, run, mod, byModule[mod])
			if err != nil {
				return nil, err
			}
			steps = append(steps, s...)
			rep.Dependents = append(rep.Dependents, deps...)
		}
	}
	if len(pyFiles) > 0 {
		langs = append(langs, Python)
		for _, s := range pythonSteps(ctx, run, pyFiles) {
			if s.kind == sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK {
				steps = append(steps, s)
			}
		}
	}
	if len(nodeFiles) > 0 {
		lang := JavaScript
		if slices.ContainsFunc(nodeFiles, func(f string) bool { return strings.Contains(path.Ext(f), "ts") }) {
			lang = TypeScript
		}
		langs = append(langs, lang)
		steps = append(steps, nodeIncrementalSteps(ctx, root, run, nodeFiles)...)
	}
	resp := rep.Response
	resp.Toolchain = Toolchain(langs)
	resp.Passed = true
	for _, res := range runSteps(ctx, run, steps, Options{}) {
		var own []*typev1.Diagnostic
		others := 0
		for _, d := range res.Diagnostics {
			if slices.Contains(clean, d.Path) {
				own = append(own, d)
				continue
			}
			rep.Others = append(rep.Others, d)
			if d.Severity >= typev1.Severity_SEVERITY_ERROR {
				others++
			}
		}
		res.Diagnostics = own
		if others > 0 {
			res.Message = strings.TrimPrefix(res.Message+fmt.Sprintf("; %d error(s) in other files", others), "; ")
		}
		if hasErrors(own) || res.Status == sandboxv1.StepStatus_STEP_STATUS_ERROR {
			resp.Passed = false
		}
		resp.Steps = append(resp.Steps, res)
	}
	// Counted after dedupe: go build and go vet report the same type error in a dependent.
	rep.Others = dedupe(rep.Others)
	for _, d := range rep.Others {
		if d.Severity >= typev1.Severity_SEVERITY_ERROR {
			resp.OtherErrors++
		}
	}
	resp.Duration = durationpb.New(time.Since(start))
	return rep, nil
}

// checkPath validates a workspace-relative path and returns it cleaned.
func checkPath(root, p string) (string, error) {
	if p == "" || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path %q: empty or contains NUL: %w", p, errs.ErrInvalid)
	}
	c := path.Clean(strings.ReplaceAll(p, "\\", "/"))
	if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") || c == "." {
		return "", fmt.Errorf("path %q: must be relative and inside the workspace: %w", p, errs.ErrInvalid)
	}
	// Resolve symlinks so a link pointing outside the workspace is not followed.
	full, err := filepath.EvalSymlinks(filepath.Join(root, filepath.FromSlash(c)))
	if err != nil {
		if os.IsNotExist(err) {
			return "", fmt.Errorf("path %q: %w", p, errs.ErrNotFound)
		}
		return "", fmt.Errorf("path %q: %v: %w", p, err, errs.ErrInvalid)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("workspace root: %w", err)
	}
	if rel, err := filepath.Rel(realRoot, full); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q: escapes the workspace: %w", p, errs.ErrInvalid)
	}
	fi, err := os.Stat(full)
	if err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("path %q: not a regular file: %w", p, errs.ErrInvalid)
	}
	return c, nil
}

// moduleOf returns the workspace-relative directory of the nearest go.mod above file, or ""
// when there is none inside the workspace.
func moduleOf(root, file string) string {
	for dir := path.Dir(file); ; dir = path.Dir(dir) {
		if exists(filepath.Join(root, filepath.FromSlash(dir), "go.mod")) {
			return dir
		}
		if dir == "." {
			return ""
		}
	}
}
