package monitor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/thefold/thefold/pkg/fence"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

var (
	kindBuild    = agentv1.RepoHealthFindingKind_REPO_HEALTH_FINDING_KIND_BUILD_FAILING
	kindTests    = agentv1.RepoHealthFindingKind_REPO_HEALTH_FINDING_KIND_TESTS_FAILING
	kindOutdated = agentv1.RepoHealthFindingKind_REPO_HEALTH_FINDING_KIND_OUTDATED_DEPENDENCY
	kindTodos    = agentv1.RepoHealthFindingKind_REPO_HEALTH_FINDING_KIND_TODOS_OVER_THRESHOLD
	kindVuln     = agentv1.RepoHealthFindingKind_REPO_HEALTH_FINDING_KIND_VULNERABILITY
)

// findings are what crossed a threshold in r, and the keys (a key ending in ':' stands for
// every key it starts) of the findings whose part ran to the end: an open finding among them
// that is not found again is gone. audited are the ecosystems whose dependency audit ran.
func findings(repo string, r *agentv1.RepoHealthReport, threshold int32, audited []string) ([]*agentv1.RepoHealthFinding, []string) {
	var (
		out []*agentv1.RepoHealthFinding
		ran []string
	)
	for _, c := range r.Checks {
		if c.Name == partDependencies {
			// Each ecosystem on its own: one whose audit could not run keeps its findings.
			for _, eco := range audited {
				ran = append(ran, "dependency:"+eco+":")
			}
			for _, d := range r.Outdated {
				if d.Direct && slices.Contains(audited, d.Ecosystem) {
					out = append(out, &agentv1.RepoHealthFinding{Key: "dependency:" + d.Ecosystem + ":" + d.Name, Kind: kindOutdated,
						Title:    fmt.Sprintf("Update %s from %s to %s in %s", d.Name, d.Version, d.Latest, repo),
						Evidence: fmt.Sprintf("%s %s is required directly (%s); its newest release is %s.", d.Name, d.Version, d.Ecosystem, d.Latest)})
				}
			}
			continue
		}
		if c.Status != passed && c.Status != failed {
			continue
		}
		switch c.Name {
		case partBuild:
			ran = append(ran, "build")
			if c.Status == failed {
				out = append(out, &agentv1.RepoHealthFinding{Key: "build", Kind: kindBuild, Title: "Fix the failing build of " + repo,
					Evidence: checkEvidence(c)})
			}
		case partTest:
			ran = append(ran, "tests")
			if c.Status == failed {
				out = append(out, &agentv1.RepoHealthFinding{Key: "tests", Kind: kindTests, Title: "Fix the failing tests of " + repo,
					Evidence: checkEvidence(c)})
			}
		case partVulns:
			// Only a vulnerability the code calls is a finding; one it only requires is in
			// the report.
			ran = append(ran, "vulnerability:")
			for _, v := range r.Vulnerabilities {
				if v.Called {
					out = append(out, &agentv1.RepoHealthFinding{Key: "vulnerability:" + v.Id, Kind: kindVuln, Title: vulnTitle(repo, v),
						Evidence: vulnEvidence(v)})
				}
			}
		case partTodos:
			ran = append(ran, "todos")
			if c.Status == failed {
				out = append(out, &agentv1.RepoHealthFinding{Key: "todos", Kind: kindTodos,
					Title:    fmt.Sprintf("Resolve TODO and FIXME markers in %s (%d, over %d)", repo, r.TodoCount, threshold),
					Evidence: todoEvidence(r)})
			}
		}
	}
	return out, ran
}

// vulnTitle is a called vulnerability's task title: the update that fixes it, where one
// exists.
func vulnTitle(repo string, v *agentv1.Vulnerability) string {
	if v.FixedVersion == "" {
		return fmt.Sprintf("Stop calling %s, vulnerable (%s, no fixed version), in %s", v.Function, v.Id, repo)
	}
	return fmt.Sprintf("Fix %s in %s: update %s from %s to %s", v.Id, repo, v.Module, v.Version, v.FixedVersion)
}

// vulnEvidence is what the database and govulncheck say of a vulnerability.
func vulnEvidence(v *agentv1.Vulnerability) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", v.Id)
	if len(v.Aliases) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(v.Aliases, ", "))
	}
	fmt.Fprintf(&b, ": %s\n", v.Summary)
	fixed := "no fixed version yet"
	if v.FixedVersion != "" {
		fixed = "fixed in " + v.FixedVersion
	}
	fmt.Fprintf(&b, "Module: %s %s (%s).\n", v.Module, v.Version, fixed)
	fmt.Fprintf(&b, "The code calls the vulnerable %s", v.Function)
	if v.Position != "" {
		fmt.Fprintf(&b, " (reached from %s)", v.Position)
	}
	b.WriteString(".\n")
	if v.Url != "" {
		fmt.Fprintf(&b, "%s\n", v.Url)
	}
	return b.String()
}

// checkEvidence is a failed part's summary, commands and output.
func checkEvidence(c *agentv1.RepoHealthCheck) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", c.Name, c.Summary)
	for _, cmd := range c.Commands {
		fmt.Fprintf(&b, "$ %s\n", cmd)
	}
	b.WriteString(c.Output)
	return b.String()
}

// todoEvidence is the count and the first markers.
func todoEvidence(r *agentv1.RepoHealthReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d markers, %d of them stale. The first:\n", r.TodoCount, r.StaleTodoCount)
	for _, t := range r.Todos[:min(len(r.Todos), 20)] {
		fmt.Fprintf(&b, "%s:%d: %s\n", t.Path, t.Line, t.Text)
	}
	return b.String()
}

// taskDescription tells the healing task what the monitor saw, the repository's output
// fenced as data.
func taskDescription(r *agentv1.RepoHealthReport, f *agentv1.RepoHealthFinding) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The repository monitor's health check of %s", r.Repo)
	if r.Commit != "" {
		fmt.Fprintf(&b, " at %s", r.Commit)
	}
	b.WriteString(" found this.\n\n")
	switch f.Kind {
	case kindBuild:
		b.WriteString("The build of the default branch fails. Make it build again without changing what the code is meant to do.\n\n")
	case kindTests:
		b.WriteString("Tests fail on the default branch. Find the cause and fix the code (or a test that is wrong), keeping every other test passing.\n\n")
	case kindOutdated:
		b.WriteString("A dependency has a newer release. Update it, adapt the code to any change in its API, and keep the build and tests passing.\n\n")
	case kindVuln:
		b.WriteString("The code calls a function with a known vulnerability. Update the module to the fixed version (where there is none, " +
			"stop calling the vulnerable function), adapt the code to any change in its API, and keep the build and tests passing.\n\n")
	case kindTodos:
		b.WriteString("The repository has more TODO and FIXME markers than its owner allows. Resolve the oldest ones that can be resolved safely, " +
			"or turn them into issues; do not just delete them.\n\n")
	}
	b.WriteString(fence.Fence("health_evidence", [][2]string{{"finding", f.Key}}, f.Evidence, 6000))
	b.WriteString("\n")
	return b.String()
}

// priority ranks a finding's task: a broken build or failing tests first.
func priority(k agentv1.RepoHealthFindingKind) typev1.Priority {
	switch k {
	case kindBuild, kindTests, kindVuln:
		return typev1.Priority_PRIORITY_HIGH
	case kindOutdated:
		return typev1.Priority_PRIORITY_MEDIUM
	}
	return typev1.Priority_PRIORITY_LOW
}
