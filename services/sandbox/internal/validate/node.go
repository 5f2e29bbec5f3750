package validate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// nodeProbe prints the working directory as node sees it and, on a second line,
// "typescript" when the sandbox provides the typescript package on NODE_PATH (the docker
// image's Debian node-typescript; its tsc is on PATH, where npx finds it offline).
const nodeProbe = `const fs = require("fs"), path = require("path");
process.stdout.write(process.cwd());
if ((process.env.NODE_PATH || "").split(path.delimiter).some((d) => d && fs.existsSync(path.join(d, "typescript", "package.json")))) process.stdout.write("\ntypescript");`

// nodeSteps plans the TypeScript/JavaScript pipeline: tsc --noEmit (typecheck) where a
// project has a tsconfig.json and typescript in node_modules (or the sandbox provides
// it), eslint (lint) where it is installed, npm test (test) where package.json has a test
// script. Nothing is installed: the pipeline validates with the tools the workspace or
// the sandbox brings, and a step whose tool is missing is SKIPPED with the reason, never
// failed.
func nodeSteps(ctx context.Context, root string, run Runner) []step {
	projects := nodeProjects(root)
	// The working directory as node sees it resolves eslint's absolute file names; the
	// same call tells whether node is there at all, and whether the sandbox has typescript.
	nodeMissing := ""
	sandboxTS := make([]bool, len(projects))
	for i := range projects {
		exit, stdout, _, err := run(ctx, projects[i].Rel, []string{"node", "-e", nodeProbe})
		if err != nil || exit == exitNotFound {
			nodeMissing = "node not installed"
			break
		}
		abs, tools, _ := strings.Cut(strings.TrimSpace(string(stdout)), "\n")
		projects[i].Abs, sandboxTS[i] = abs, tools == "typescript"
	}
	var tscDirs, eslintDirs, testDirs []ProjectDir
	hasTS := false
	for i, p := range projects {
		if exists(filepath.Join(root, p.Rel, "tsconfig.json")) {
			hasTS = true
			if nodeModule(root, p.Rel, "typescript") || sandboxTS[i] {
				tscDirs = append(tscDirs, p)
			}
		}
		if nodeModule(root, p.Rel, filepath.Join(".bin", "eslint")) {
			eslintDirs = append(eslintDirs, p)
		}
		if hasTestScript(filepath.Join(root, p.Rel, "package.json")) {
			testDirs = append(testDirs, p)
		}
	}
	var steps []step
	if hasTS {
		steps = append(steps, step{
			kind: sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK,
			name: "tsc", dirs: tscDirs,
			skip: firstNonEmpty(nodeMissing, emptyReason(tscDirs, "typescript is not installed in node_modules")),
			argv: func(ProjectDir) []string {
				return []string{"npx", "--no-install", "tsc", "--noEmit", "--pretty", "false"}
			},
			parse: func(d ProjectDir, _ int, stdout, stderr []byte) []*typev1.Diagnostic {
				return ParseTSC(concat(stdout, stderr), d)
			},
		})
	}
	steps = append(steps,
		step{
			kind: sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_LINT,
			name: "eslint", dirs: eslintDirs,
			skip: firstNonEmpty(nodeMissing, emptyReason(eslintDirs, "eslint is not installed in node_modules")),
			argv: func(ProjectDir) []string {
				return []string{"npx", "--no-install", "eslint", "--format", "json", "."}
			},
			parse: func(d ProjectDir, _ int, stdout, _ []byte) []*typev1.Diagnostic {
				diags, _ := ParseESLintJSON(stdout, d)
				return diags
			},
		},
		step{
			kind: sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TEST,
			name: "npm test", dirs: testDirs,
			skip: firstNonEmpty(nodeMissing, emptyReason(testDirs, "package.json has no test script")),
			argv: func(ProjectDir) []string { return []string{"npm", "test", "--if-present"} },
			// Test runners print in many formats; the exit code and the output tail are
			// what npm test reliably gives.
			parse: func(ProjectDir, int, []byte, []byte) []*typev1.Diagnostic { return nil },
		},
	)
	return steps
}

// nodeModule reports whether name is installed for the project in rel (its own
// node_modules or the workspace root's).
func nodeModule(root, rel, name string) bool {
	return exists(filepath.Join(root, rel, "node_modules", name)) || exists(filepath.Join(root, "node_modules", name))
}

func hasTestScript(packageJSON string) bool {
	b, err := os.ReadFile(packageJSON)
	if err != nil {
		return false
	}
	var pkg struct {
		Scripts map[string]string `json:"scripts"`
	}
	return json.Unmarshal(b, &pkg) == nil && strings.TrimSpace(pkg.Scripts["test"]) != ""
}

func emptyReason(dirs []ProjectDir, reason string) string {
	if len(dirs) == 0 {
		return reason
	}
	return ""
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// nodeIncrementalSteps narrows the Node pipeline to files (workspace-relative): tsc of the
// projects holding them and eslint of the files themselves; no tests.
func nodeIncrementalSteps(ctx context.Context, root string, run Runner, files []string) []step {
	var steps []step
	for _, s := range nodeSteps(ctx, root, run) {
		if s.name != "tsc" && s.name != "eslint" {
			continue
		}
		var dirs []ProjectDir
		for _, d := range s.dirs {
			if slices.ContainsFunc(files, func(f string) bool { return relTo(f, d.Rel) != "" }) {
				dirs = append(dirs, d)
			}
		}
		s.dirs = dirs
		if s.skip == "" && len(dirs) == 0 {
			s.skip = s.name + " is not installed for the projects of these files"
		}
		if s.name == "eslint" {
			s.argv = func(d ProjectDir) []string {
				argv := []string{"npx", "--no-install", "eslint", "--format", "json"}
				for _, f := range files {
					if rel := relTo(f, d.Rel); rel != "" {
						argv = append(argv, rel)
					}
				}
				return argv
			}
		}
		steps = append(steps, s)
	}
	return steps
}
