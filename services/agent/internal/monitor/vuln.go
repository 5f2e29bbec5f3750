package monitor

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/fence"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	"github.com/thefold/thefold/pkg/sandboxrun"
	"github.com/thefold/thefold/pkg/validate"
)

// vulnArgv audits a Go module's dependencies (and the standard library it builds with)
// against the Go vulnerability database. The sandbox adds the database it may read (-db);
// the module cache is filled by the dependency audit that runs before it.
var vulnArgv = []string{vulnCheck, "-format", "json", "./..."}

const vulnCheck = "govulncheck"

// vulnerabilities runs govulncheck where the workspace is a Go module, the sandbox has
// govulncheck and the server a vulnerability database: every known vulnerability of a
// module the code requires, and whether the code calls it.
func (x *checkRun) vulnerabilities(ctx context.Context) (*agentv1.RepoHealthCheck, error) {
	c := &agentv1.RepoHealthCheck{Name: partVulns, Status: skipped}
	_, err := x.m.c.Sandbox.ReadFile(ctx, &sandboxv1.ReadFileRequest{SandboxId: x.sandbox, Path: "go.mod"})
	if status.Code(err) == codes.NotFound {
		c.Summary = "no go.mod at the repository's root (only Go modules are audited for known vulnerabilities)"
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	c.Commands = []string{strings.Join(vulnArgv, " ")}
	res, err := sandboxrun.Run(ctx, x.m.c.Sandbox, &sandboxv1.RunCommandRequest{SandboxId: x.sandbox, Command: vulnArgv,
		Network: sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES, Env: map[string]string{"GOSUMDB": "off", "GOWORK": "off"},
		Timeout: durationpb.New(x.m.cfg.CommandTimeout)}, maxOutput)
	if field, ok := badField(err); ok && (field == "network" || field == "command") {
		// No vulnerability database on the server, or govulncheck not allowed here.
		c.Summary = "skipped: " + status.Convert(err).Message()
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	if summary, output, skip, bad := unusable(vulnCheck, vulnCheck, res, res.Passed(), true); bad {
		c.Summary, c.Output = summary, output
		if !skip {
			c.Status = errored
		}
		return c, nil
	}
	vulns, modules, err := parseGovulncheck(res.Stdout)
	if err != nil {
		c.Status, c.Summary, c.Output = errored, "its answer is unreadable: "+err.Error(), fence.TruncateMiddle(string(res.Stdout), maxShownOutput)
		return c, nil
	}
	x.report.Vulnerabilities = vulns
	called := 0
	for _, v := range vulns {
		if v.Called {
			called++
		}
	}
	required := count(modules, "module", "modules") + " the code requires"
	c.Status, c.Summary = passed, "no known vulnerability in the "+required
	switch {
	case called > 0:
		c.Status = failed
		c.Summary = fmt.Sprintf("%s in the %s, %d of them called by the code", count(len(vulns), "known vulnerability", "known vulnerabilities"), required, called)
	case len(vulns) > 0:
		c.Summary = fmt.Sprintf("%s in the %s, none called by the code", count(len(vulns), "known vulnerability", "known vulnerabilities"), required)
	}
	return c, nil
}

// count is n with the noun's singular or plural.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// govulncheckFrame is a frame of a finding's trace (govulncheck's JSON protocol v1).
type govulncheckFrame struct {
	Module, Version, Package, Function, Receiver string
	Position                                     *struct {
		Filename     string
		Line, Column int
	}
}

// govulncheckMessage is one message of govulncheck's JSON stream; the others (progress) are
// not read.
type govulncheckMessage struct {
	Config *struct {
		ProtocolVersion string `json:"protocol_version"`
	} `json:"config"`
	SBOM *struct {
		Modules []struct{ Path, Version string }
	} `json:"SBOM"`
	OSV *struct {
		ID               string `json:"id"`
		Aliases          []string
		Summary, Details string
		DatabaseSpecific *struct {
			URL string `json:"url"`
		} `json:"database_specific"`
	} `json:"osv"`
	Finding *struct {
		OSV          string `json:"osv"`
		FixedVersion string `json:"fixed_version"`
		Trace        []govulncheckFrame
	} `json:"finding"`
}

// parseGovulncheck reads `govulncheck -format json`: one Vulnerability per database entry a
// finding names (called ones first), and how many modules the code requires (the main
// module and the standard library left out).
func parseGovulncheck(out []byte) ([]*agentv1.Vulnerability, int, error) {
	var (
		config  bool
		modules int
		main    string
		entries = map[string]*agentv1.Vulnerability{}
		byID    = map[string]*agentv1.Vulnerability{}
	)
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var m govulncheckMessage
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, err
		}
		switch {
		case m.Config != nil:
			if !strings.HasPrefix(m.Config.ProtocolVersion, "v1.") {
				return nil, 0, fmt.Errorf("protocol %q, not v1", m.Config.ProtocolVersion)
			}
			config = true
		case m.SBOM != nil:
			for _, mod := range m.SBOM.Modules {
				switch {
				case mod.Version == "" && main == "":
					main = mod.Path
				case mod.Path != "stdlib" && mod.Version != "":
					modules++
				}
			}
		case m.OSV != nil:
			if m.OSV.ID == "" {
				return nil, 0, errors.New("a database entry without an id")
			}
			e := &agentv1.Vulnerability{Id: m.OSV.ID, Aliases: m.OSV.Aliases, Summary: oneLine(cmp.Or(m.OSV.Summary, m.OSV.Details))}
			if m.OSV.DatabaseSpecific != nil {
				e.Url = m.OSV.DatabaseSpecific.URL
			}
			entries[e.Id] = e
		case m.Finding != nil:
			f := m.Finding
			if f.OSV == "" || len(f.Trace) == 0 || f.Trace[0].Module == "" {
				return nil, 0, errors.New("a finding without its entry or module")
			}
			v := byID[f.OSV]
			if v == nil {
				v = &agentv1.Vulnerability{Id: f.OSV, Module: f.Trace[0].Module, Version: f.Trace[0].Version, FixedVersion: f.FixedVersion}
				byID[f.OSV] = v
			}
			if top := f.Trace[0]; top.Function != "" && !v.Called {
				v.Called, v.Function = true, symbol(top)
				v.Position = reachedAt(f.Trace, main)
			}
		}
	}
	if !config {
		return nil, 0, errors.New("no config message: not govulncheck's JSON")
	}
	vulns := make([]*agentv1.Vulnerability, 0, len(byID))
	for id, v := range byID {
		if e := entries[id]; e != nil {
			v.Aliases, v.Summary, v.Url = e.Aliases, e.Summary, e.Url
		}
		vulns = append(vulns, v)
	}
	slices.SortFunc(vulns, func(a, b *agentv1.Vulnerability) int {
		if a.Called != b.Called {
			if a.Called {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Id, b.Id)
	})
	return vulns, modules, nil
}

// symbol names a frame's function as the Go vulnerability database does:
// "example.com/m/pkg.Type.Method".
func symbol(f govulncheckFrame) string {
	name := f.Function
	if f.Receiver != "" {
		name = strings.TrimPrefix(f.Receiver, "*") + "." + name
	}
	return f.Package + "." + name
}

// reachedAt is where the main module's code is in the trace, nearest the vulnerable
// function: "path/file.go:line:column".
func reachedAt(trace []govulncheckFrame, main string) string {
	for _, f := range trace[1:] {
		if f.Position != nil && (f.Module == main || main == "") {
			return fmt.Sprintf("%s:%d:%d", f.Position.Filename, f.Position.Line, f.Position.Column)
		}
	}
	return ""
}

// oneLine is the first line of s, at most 200 characters.
func oneLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return validate.Truncate(s, 200)
}
