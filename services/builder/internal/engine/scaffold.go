package engine

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// A prepared step is one the builder adds to the plan's own: a command (argv) or a file
// whose content the builder writes itself (no model call).
type prepared struct {
	command     []string
	workdir     string
	path        string
	content     string
	description string
}

// ecosystem is the package ecosystem a manifest belongs to ("go", "node", "python"), or
// "" for any other file.
func ecosystem(p string) string {
	switch path.Base(p) {
	case "go.mod", "go.sum":
		return "go"
	case "package.json", "package-lock.json":
		return "node"
	case "requirements.txt", "pyproject.toml":
		return "python"
	}
	return ""
}

// languages reports which languages the planned file paths are in.
func languages(paths []string) (goFiles, node, ts, tsx, py bool) {
	for _, p := range paths {
		switch path.Ext(p) {
		case ".go":
			goFiles = true
		case ".ts", ".mts", ".cts":
			node, ts = true, true
		case ".tsx":
			node, ts, tsx = true, true, true
		case ".js", ".jsx", ".mjs", ".cjs":
			node = true
		case ".py":
			py = true
		}
	}
	return
}

// skeleton is the scaffold of a new project: for each language the plan writes files in,
// the project file its toolchain needs when the workspace neither has nor plans one and
// the plan does not create it by a command — `go mod init`, a package.json, a tsconfig.json
// for TypeScript (without which tsc validates nothing), a pyproject.toml.
func skeleton(repo string, plan []*typev1.PlanStep, existing []string) []prepared {
	var paths []string
	have := map[string]bool{}
	for _, p := range existing {
		have[path.Base(p)] = true
	}
	var commands []string
	for _, s := range plan {
		if s.Path != "" {
			paths = append(paths, s.Path)
			have[path.Base(s.Path)] = true
		}
		if len(s.Command) > 0 {
			commands = append(commands, strings.Join(s.Command, " "))
		}
	}
	ran := func(prefixes ...string) bool {
		return slices.ContainsFunc(commands, func(c string) bool {
			return slices.ContainsFunc(prefixes, func(p string) bool { return c == p || strings.HasPrefix(c, p+" ") })
		})
	}
	name := projectName(repo)
	goFiles, node, ts, tsx, py := languages(paths)
	var out []prepared
	if goFiles && !have["go.mod"] && !ran("go mod init") {
		module := "example.com/app"
		if repo != "" {
			module = "example.com/" + repo
		}
		out = append(out, prepared{command: []string{"go", "mod", "init", module}, description: "initialise the Go module"})
	}
	if node && !have["package.json"] && !ran("npm init", "yarn init", "pnpm init") {
		out = append(out, prepared{path: "package.json", content: jsonFile(map[string]any{
			"name": name, "version": "0.1.0", "private": true,
		}), description: "project skeleton: package.json"})
	}
	if ts && !have["tsconfig.json"] && !ran("tsc --init", "npx tsc --init") {
		opts := map[string]any{
			"target": "ES2022", "module": "ESNext", "moduleResolution": "Bundler", "strict": true,
			"esModuleInterop": true, "skipLibCheck": true, "forceConsistentCasingInFileNames": true, "noEmit": true,
		}
		if tsx {
			opts["jsx"] = "react-jsx"
		}
		out = append(out, prepared{path: "tsconfig.json", content: jsonFile(map[string]any{"compilerOptions": opts}),
			description: "project skeleton: tsconfig.json"})
	}
	if py && !have["pyproject.toml"] && !have["setup.py"] && !have["requirements.txt"] && !ran("poetry init", "uv init") {
		out = append(out, prepared{path: "pyproject.toml", content: fmt.Sprintf(
			"[project]\nname = %q\nversion = \"0.1.0\"\nrequires-python = \">=3.9\"\n", name),
			description: "project skeleton: pyproject.toml"})
	}
	return out
}

var notName = regexp.MustCompile(`[^a-z0-9._-]+`)

// projectName is a package name from "owner/name": its name, lower case, in the characters
// npm and PyPI both allow.
func projectName(repo string) string {
	n := strings.Trim(notName.ReplaceAllString(strings.ToLower(path.Base(repo)), "-"), "-._")
	if n == "" || n == "." {
		return "app"
	}
	return n
}

func jsonFile(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err) // maps of strings and booleans always marshal
	}
	return string(b) + "\n"
}

// syncCommands install what the manifests the plan writes declare, once per project
// directory and ecosystem: `go mod download`; `npm ci` where a package-lock.json is there
// or planned, else `npm install`; `pip install -r` for a requirements.txt. A pyproject.toml
// alone installs nothing: pip has no way to install only a project's dependencies.
func syncCommands(manifests []string, existing []string) []prepared {
	all := map[string]bool{}
	for _, p := range existing {
		all[p] = true
	}
	for _, p := range manifests {
		all[p] = true
	}
	var out []prepared
	seen := map[string]bool{}
	for _, m := range manifests {
		dir, eco := path.Dir(m), ecosystem(m)
		if seen[dir+"\x00"+eco] {
			continue
		}
		var argv []string
		switch eco {
		case "go":
			argv = []string{"go", "mod", "download"}
		case "node":
			argv = []string{"npm", "install"}
			if all[path.Join(dir, "package-lock.json")] {
				argv = []string{"npm", "ci"}
			}
		case "python":
			if path.Base(m) != "requirements.txt" {
				continue
			}
			argv = []string{"pip", "install", "-r", "requirements.txt"}
		default:
			continue
		}
		seen[dir+"\x00"+eco] = true
		workdir := dir
		if workdir == "." {
			workdir = ""
		}
		out = append(out, prepared{command: argv, workdir: workdir,
			description: "install the dependencies " + path.Join(dir, path.Base(m)) + " declares"})
	}
	return out
}

// installCommand installs packages with the package manager of the sandbox's language (or,
// unknown, of the planned files).
func installCommand(lang string, planned []*builderv1.PlannedFile, pkgs []string) []string {
	if lang == "" {
		for _, p := range planned {
			switch path.Ext(p.Path) {
			case ".go":
				lang = "go"
			case ".ts", ".tsx", ".js", ".jsx", ".mjs":
				lang = "node"
			case ".py":
				lang = "python"
			}
			if lang != "" {
				break
			}
		}
	}
	switch lang {
	case "node", "typescript", "javascript":
		return append([]string{"npm", "install"}, pkgs...)
	case "python":
		return append([]string{"pip", "install"}, pkgs...)
	}
	return append([]string{"go", "get"}, pkgs...)
}
