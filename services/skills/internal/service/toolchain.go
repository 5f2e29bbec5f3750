package service

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/thefold/thefold/services/skills/internal/detect"
)

// toolchainDetector is the PRE_RUN detector that reads a repository's toolchain and
// conventions from its files and reports them as notes for the AI call (not findings).
const toolchainDetector = "toolchain"

var (
	requiresPython = regexp.MustCompile(`(?m)^\s*requires-python\s*=\s*"([^"]+)"`)
	tsStrict       = regexp.MustCompile(`"strict"\s*:\s*(true|false)`)
	// go.mod directives: module, go and toolchain lines.
	goModule    = regexp.MustCompile(`(?m)^module\s+"?([^\s"]+)"?`)
	goVersion   = regexp.MustCompile(`(?m)^go\s+(\S+)`)
	goToolchain = regexp.MustCompile(`(?m)^toolchain\s+(\S+)`)
)

// toolchain notes what a repository's files say about how it is built: the Go module and
// version, Node's version, package manager, module type, TypeScript and its strictness,
// Python's version, and tools whose presence changes how code is written (sqlc,
// golangci-lint, ESLint, Prettier). Files are matched by name in any directory; the
// shallowest of a name wins.
func toolchain(files []detect.File) []string {
	byName := map[string]detect.File{}
	for _, f := range files {
		name := path.Base(f.Path)
		if old, ok := byName[name]; !ok || strings.Count(f.Path, "/") < strings.Count(old.Path, "/") {
			byName[name] = f
		}
	}
	var notes []string
	if f, ok := byName["go.mod"]; ok {
		if m := goModule.FindStringSubmatch(f.Content); m != nil {
			note := "Go module " + m[1]
			if v := goVersion.FindStringSubmatch(f.Content); v != nil {
				note += ", go " + v[1]
			}
			if tc := goToolchain.FindStringSubmatch(f.Content); tc != nil {
				note += " (toolchain " + tc[1] + ")"
			}
			notes = append(notes, note+fmt.Sprintf(" (%s): write code for that version", f.Path))
		}
	}
	if f, ok := byName["package.json"]; ok {
		var pkg struct {
			Type            string            `json:"type"`
			PackageManager  string            `json:"packageManager"`
			Engines         map[string]string `json:"engines"`
			Scripts         map[string]string `json:"scripts"`
			Dependencies    map[string]string `json:"dependencies"`
			DevDependencies map[string]string `json:"devDependencies"`
		}
		if json.Unmarshal([]byte(f.Content), &pkg) == nil {
			var parts []string
			if v := pkg.Engines["node"]; v != "" {
				parts = append(parts, "Node "+v)
			}
			if pkg.PackageManager != "" {
				parts = append(parts, "package manager "+pkg.PackageManager)
			}
			if pkg.Type == "module" {
				parts = append(parts, "ES modules (type: module)")
			} else {
				parts = append(parts, "CommonJS modules")
			}
			if v := cmp.Or(pkg.DevDependencies["typescript"], pkg.Dependencies["typescript"]); v != "" {
				parts = append(parts, "TypeScript "+v)
			}
			if t := pkg.Scripts["test"]; t != "" {
				parts = append(parts, fmt.Sprintf("tests run with %q", t))
			}
			notes = append(notes, fmt.Sprintf("JavaScript project (%s): %s", f.Path, strings.Join(parts, ", ")))
		}
	}
	for _, name := range []string{".nvmrc", ".node-version"} {
		if f, ok := byName[name]; ok {
			if v := strings.TrimSpace(f.Content); v != "" && len(v) < 40 {
				notes = append(notes, fmt.Sprintf("Node version %s (%s)", v, f.Path))
			}
		}
	}
	if f, ok := byName["tsconfig.json"]; ok {
		var ts struct {
			CompilerOptions map[string]any `json:"compilerOptions"`
		}
		// tsconfig allows comments and trailing commas; when it does not parse as JSON,
		// look for the flag as text.
		strict := ""
		if json.Unmarshal([]byte(f.Content), &ts) == nil {
			if v, ok := ts.CompilerOptions["strict"].(bool); ok {
				strict = fmt.Sprint(v)
			}
		} else if m := tsStrict.FindStringSubmatch(f.Content); m != nil {
			strict = m[1]
		}
		switch strict {
		case "true":
			notes = append(notes, fmt.Sprintf("TypeScript strict mode is on (%s): no implicit any, strict null checks", f.Path))
		case "false":
			notes = append(notes, fmt.Sprintf("TypeScript strict mode is off (%s)", f.Path))
		}
	}
	if f, ok := byName["pyproject.toml"]; ok {
		if m := requiresPython.FindStringSubmatch(f.Content); m != nil {
			notes = append(notes, fmt.Sprintf("Python %s (%s)", m[1], f.Path))
		}
	}
	tools := []struct {
		names []string
		note  string
	}{
		{[]string{"sqlc.yaml", "sqlc.yml", "sqlc.json"}, "sqlc generates the database code: edit the SQL queries and regenerate, not the generated Go"},
		{[]string{".golangci.yml", ".golangci.yaml", ".golangci.toml"}, "golangci-lint is configured: keep the code clean under it"},
		{[]string{".eslintrc", ".eslintrc.js", ".eslintrc.json", ".eslintrc.cjs", "eslint.config.js", "eslint.config.mjs"}, "ESLint is configured: follow its rules"},
		{[]string{".prettierrc", ".prettierrc.json", "prettier.config.js"}, "Prettier formats the code"},
		{[]string{"buf.yaml", "buf.gen.yaml"}, "Protocol Buffers are built with buf: change the .proto files and regenerate"},
	}
	for _, t := range tools {
		if slices.ContainsFunc(t.names, func(n string) bool { _, ok := byName[n]; return ok }) {
			notes = append(notes, t.note)
		}
	}
	return notes
}
