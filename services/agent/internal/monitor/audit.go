package monitor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/fence"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	"github.com/thefold/thefold/pkg/sandboxrun"
)

// auditDir is where the pip audit installs a repository's requirements, inside the
// workspace (the sandbox's only writable tree); its markers are not the repository's.
const auditDir = ".thefold-audit"

// audit is how the outdated dependencies of one ecosystem are found: where its manifest is,
// the commands that run (with the sandbox's package source), and how the last one's output
// reads.
type audit struct {
	ecosystem string
	// manifest is the file at the workspace root that says the ecosystem is there.
	manifest string
	// commands run in order, each with NETWORK_POLICY_PACKAGES and env.
	commands [][]string
	env      map[string]string
	// exitOK says whether the last command's exit code is an answer (npm outdated exits 1
	// when something is outdated); the others must exit 0.
	exitOK func(code int32) bool
	// parse reads the last command's stdout, with the manifest's content: the outdated
	// dependencies and how many were looked at.
	parse func(stdout, manifest []byte) ([]*agentv1.OutdatedDependency, int, error)
}

// audits are the ecosystems audited, in this order.
var audits = []audit{
	{
		// The module cache is filled first, so that the build and the tests that run next
		// find the modules (the sandbox is offline but for these commands). go list -m reads
		// versions and go.mod files and builds nothing; the checksum database is not among
		// the package sources a sandbox may reach, and go.sum still checks what it lists.
		ecosystem: "go", manifest: "go.mod",
		commands: [][]string{{"go", "mod", "download"}, {"go", "list", "-m", "-u", "-json", "all"}},
		env:      map[string]string{"GOSUMDB": "off", "GOWORK": "off"},
		exitOK:   func(code int32) bool { return code == 0 },
		parse:    parseGoModules,
	},
	{
		// Installed without their scripts (the audit needs the tree, not a build); npm
		// outdated lists the package's own dependencies.
		ecosystem: "npm", manifest: "package.json",
		commands: [][]string{{"npm", "install", "--ignore-scripts", "--no-audit", "--no-fund"}, {"npm", "outdated", "--json"}},
		exitOK:   func(code int32) bool { return code == 0 || code == 1 },
		parse:    parseNPMOutdated,
	},
	{
		// The requirements go into a directory of their own, whose distributions pip then
		// compares with the index.
		ecosystem: "pip", manifest: "requirements.txt",
		commands: [][]string{{"pip", "install", "--quiet", "--disable-pip-version-check", "--target", auditDir, "-r", "requirements.txt"},
			{"pip", "list", "--outdated", "--format=json", "--disable-pip-version-check", "--path", auditDir}},
		exitOK: func(code int32) bool { return code == 0 },
		parse:  parsePipOutdated,
	},
}

// dependencies runs the audit of each ecosystem whose manifest is at the workspace root and
// lists the dependencies that have a newer release, direct ones first.
func (x *checkRun) dependencies(ctx context.Context) (*agentv1.RepoHealthCheck, error) {
	c := &agentv1.RepoHealthCheck{Name: partDependencies}
	var (
		summaries          []string
		ran, erred, direct int
		outputs            []string
	)
	for _, a := range audits {
		manifest, err := x.m.c.Sandbox.ReadFile(ctx, &sandboxv1.ReadFileRequest{SandboxId: x.sandbox, Path: a.manifest})
		if status.Code(err) == codes.NotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		res, err := x.audit(ctx, a, c, manifest.GetContent())
		if err != nil {
			return nil, err
		}
		summaries = append(summaries, a.ecosystem+": "+res.summary)
		switch {
		case res.skipped:
		case res.output != "":
			erred++
			outputs = append(outputs, res.output)
		default:
			ran++
			x.audited = append(x.audited, a.ecosystem)
			for _, d := range res.outdated {
				if d.Direct {
					direct++
				}
			}
			x.report.Outdated = append(x.report.Outdated, res.outdated...)
		}
	}
	slices.SortStableFunc(x.report.Outdated, func(a, b *agentv1.OutdatedDependency) int {
		if a.Direct != b.Direct {
			if a.Direct {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Ecosystem+" "+a.Name, b.Ecosystem+" "+b.Name)
	})
	c.Summary, c.Output = strings.Join(summaries, "; "), strings.Join(outputs, "\n")
	switch {
	case len(summaries) == 0:
		c.Status, c.Summary = skipped, "no go.mod, package.json or requirements.txt at the repository's root"
	case direct > 0:
		c.Status = failed
	case erred > 0:
		c.Status = errored
	case ran > 0:
		c.Status = passed
	default:
		c.Status = skipped
	}
	return c, nil
}

// auditResult is how one ecosystem's audit went: skipped (summary says why), errored
// (output set), or its outdated dependencies.
type auditResult struct {
	summary  string
	skipped  bool
	output   string
	outdated []*agentv1.OutdatedDependency
}

// audit runs one ecosystem's commands and reads the answer.
func (x *checkRun) audit(ctx context.Context, a audit, c *agentv1.RepoHealthCheck, manifest []byte) (*auditResult, error) {
	var last *sandboxrun.Result
	for i, argv := range a.commands {
		c.Commands = append(c.Commands, strings.Join(argv, " "))
		res, err := sandboxrun.Run(ctx, x.m.c.Sandbox, &sandboxv1.RunCommandRequest{SandboxId: x.sandbox, Command: argv,
			Network: sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES, Env: a.env, Timeout: durationpb.New(x.m.cfg.CommandTimeout)}, maxOutput)
		if field, ok := badField(err); ok && (field == "network" || field == "command") {
			// No package source for the ecosystem, or its tool is not allowed here.
			return &auditResult{summary: "skipped: " + status.Convert(err).Message(), skipped: true}, nil
		}
		if err != nil {
			return nil, err
		}
		lastCmd := i == len(a.commands)-1
		ok := res.Passed()
		if lastCmd {
			ok = !res.GetTimedOut() && a.exitOK(res.GetExitCode())
		}
		if summary, output, skip, bad := unusable(strings.Join(argv[:min(3, len(argv))], " "), argv[0], res, ok, lastCmd); bad {
			return &auditResult{summary: summary, output: output, skipped: skip}, nil
		}
		last = res
	}
	outdated, total, err := a.parse(last.Stdout, manifest)
	if err != nil {
		return &auditResult{summary: "its answer is unreadable: " + err.Error(), output: fence.TruncateMiddle(string(last.Stdout), maxShownOutput)}, nil
	}
	direct := 0
	for _, d := range outdated {
		d.Ecosystem = a.ecosystem
		if d.Direct {
			direct++
		}
	}
	summary := fmt.Sprintf("%d dependencies, every direct one at its newest release", total)
	switch {
	case direct > 0:
		summary = fmt.Sprintf("%d of %d dependencies have a newer release, %d of them required directly", len(outdated), total, direct)
	case len(outdated) > 0:
		summary = fmt.Sprintf("%d dependencies, the direct ones at their newest release; %d indirect ones have a newer one", total, len(outdated))
	}
	return &auditResult{summary: summary, outdated: outdated}, nil
}

// unusable says why the result of a command (name, for the summary, running program)
// cannot be read, if it cannot: it timed out, its
// program is not installed (skip), it failed (ok false), or, when its output is the answer
// (answer), the output was cut short. summary is the part's line, output what it shows.
func unusable(name, program string, res *sandboxrun.Result, ok, answer bool) (summary, output string, skip, bad bool) {
	out := fence.TruncateMiddle(string(res.Output), maxShownOutput)
	switch {
	case res.GetTimedOut():
		return name + " timed out", out, false, true
	case res.GetExitCode() == 127:
		return "skipped: " + program + " is not installed in the sandbox", "", true, true
	case !ok:
		return fmt.Sprintf("%s exited %d", name, res.GetExitCode()), out, false, true
	case res.Dropped && answer:
		return name + " wrote more than the monitor reads", out, false, true
	}
	return "", "", false, false
}

// goModule is an entry of `go list -m -u -json`.
type goModule struct {
	Path     string
	Version  string
	Main     bool
	Indirect bool
	Update   *struct{ Version string }
}

// parseGoModules reads the stream of JSON objects `go list -m -u -json all` writes.
func parseGoModules(out, _ []byte) ([]*agentv1.OutdatedDependency, int, error) {
	var (
		outdated []*agentv1.OutdatedDependency
		total    int
	)
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var m goModule
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return outdated, total, nil
		}
		if err != nil {
			return nil, 0, err
		}
		if m.Path == "" {
			return nil, 0, fmt.Errorf("a module without a path")
		}
		if m.Main {
			continue
		}
		total++
		if m.Update != nil && m.Update.Version != "" {
			outdated = append(outdated, &agentv1.OutdatedDependency{Name: m.Path, Version: m.Version, Latest: m.Update.Version, Direct: !m.Indirect})
		}
	}
}

// parseNPMOutdated reads `npm outdated --json`: by package, its current, wanted and latest
// versions. It lists the package's own dependencies (package.json's), which are direct.
func parseNPMOutdated(out, manifest []byte) ([]*agentv1.OutdatedDependency, int, error) {
	var pkg struct {
		Dependencies, DevDependencies, OptionalDependencies map[string]string
	}
	if err := json.Unmarshal(manifest, &pkg); err != nil {
		return nil, 0, fmt.Errorf("package.json: %w", err)
	}
	total := len(pkg.Dependencies) + len(pkg.DevDependencies) + len(pkg.OptionalDependencies)
	if len(bytes.TrimSpace(out)) == 0 {
		return nil, total, nil
	}
	var entries map[string]struct {
		Current, Wanted, Latest string
	}
	if err := json.Unmarshal(out, &entries); err != nil {
		return nil, 0, err
	}
	var outdated []*agentv1.OutdatedDependency
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		e := entries[name]
		if e.Latest == "" || e.Latest == e.Current {
			continue
		}
		outdated = append(outdated, &agentv1.OutdatedDependency{Name: name, Version: e.Current, Latest: e.Latest, Direct: true})
	}
	return outdated, total, nil
}

// requirementName is the project name at the start of a requirements.txt line.
var requirementName = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*)`)

// parsePipOutdated reads `pip list --outdated --format=json` over the requirements'
// installation: the names requirements.txt lists are direct, the rest came with them.
func parsePipOutdated(out, manifest []byte) ([]*agentv1.OutdatedDependency, int, error) {
	direct := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(manifest))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "-") {
			continue
		}
		if m := requirementName.FindStringSubmatch(line); m != nil {
			direct[pipName(m[1])] = true
		}
	}
	var entries []struct {
		Name          string `json:"name"`
		Version       string `json:"version"`
		LatestVersion string `json:"latest_version"`
	}
	if err := json.Unmarshal(out, &entries); err != nil {
		return nil, 0, err
	}
	var outdated []*agentv1.OutdatedDependency
	for _, e := range entries {
		if e.Name == "" || e.LatestVersion == "" {
			return nil, 0, fmt.Errorf("an entry without a name or latest_version")
		}
		outdated = append(outdated, &agentv1.OutdatedDependency{Name: e.Name, Version: e.Version, Latest: e.LatestVersion, Direct: direct[pipName(e.Name)]})
	}
	return outdated, len(direct), nil
}

// pipName is a project name normalised as PEP 503 compares them.
func pipName(s string) string {
	return strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace(s))
}
