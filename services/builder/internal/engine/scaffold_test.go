package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

func fileSteps(paths ...string) []*typev1.PlanStep {
	var out []*typev1.PlanStep
	for i, p := range paths {
		out = append(out, &typev1.PlanStep{Id: string(rune('a' + i)), Path: p})
	}
	return out
}

// describe renders prepared steps as "argv" or "path", for comparison.
func describe(ps []prepared) []string {
	var out []string
	for _, p := range ps {
		if p.path != "" {
			out = append(out, p.path)
			continue
		}
		s := strings.Join(p.command, " ")
		if p.workdir != "" {
			s += " (in " + p.workdir + ")"
		}
		out = append(out, s)
	}
	return out
}

func TestSkeleton(t *testing.T) {
	cmd := func(argv ...string) *typev1.PlanStep { return &typev1.PlanStep{Id: "c", Command: argv} }
	for _, c := range []struct {
		name     string
		plan     []*typev1.PlanStep
		existing []string
		want     []string
	}{
		{"go", fileSteps("main.go", "internal/x/x.go"), nil, []string{"go mod init example.com/acme/Shop"}},
		{"go with a planned go.mod", fileSteps("go.mod", "main.go"), nil, nil},
		{"go with an init command", append(fileSteps("main.go"), cmd("go", "mod", "init", "x")), nil, nil},
		{"go in a workspace with a go.mod", fileSteps("main.go"), []string{"go.mod"}, nil},
		{"javascript", fileSteps("src/index.js"), nil, []string{"package.json"}},
		{"typescript", fileSteps("src/index.ts"), nil, []string{"package.json", "tsconfig.json"}},
		{"typescript with npm init", append(fileSteps("src/a.tsx"), cmd("npm", "init", "-y")), nil, []string{"tsconfig.json"}},
		{"typescript with a package.json", fileSteps("src/index.ts"), []string{"web/package.json"}, []string{"tsconfig.json"}},
		{"python", fileSteps("app/main.py"), nil, []string{"pyproject.toml"}},
		{"python with requirements", fileSteps("app/main.py", "requirements.txt"), nil, nil},
		{"mixed", fileSteps("api/main.go", "web/app.ts", "tools/gen.py"), nil,
			[]string{"go mod init example.com/acme/Shop", "package.json", "tsconfig.json", "pyproject.toml"}},
		{"docs only", fileSteps("README.md"), nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, describe(skeleton("acme/Shop", c.plan, c.existing))); diff != "" {
				t.Errorf("skeleton (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSkeletonFilesAreValid(t *testing.T) {
	for _, p := range skeleton("acme/My Shop!", fileSteps("a.tsx", "b.py"), nil) {
		switch p.path {
		case "package.json", "tsconfig.json":
			var v map[string]any
			if err := json.Unmarshal([]byte(p.content), &v); err != nil {
				t.Fatalf("%s is not JSON: %v\n%s", p.path, err, p.content)
			}
			if p.path == "package.json" && v["name"] != "my-shop" {
				t.Errorf("package.json name = %v, want my-shop", v["name"])
			}
			if p.path == "tsconfig.json" && v["compilerOptions"].(map[string]any)["jsx"] != "react-jsx" {
				t.Errorf("tsconfig.json for .tsx has no jsx option:\n%s", p.content)
			}
		case "pyproject.toml":
			if !strings.Contains(p.content, `name = "my-shop"`) {
				t.Errorf("pyproject.toml:\n%s", p.content)
			}
		}
	}
	if got := projectName("acme/..."); got != "app" {
		t.Errorf("projectName of a name without letters = %q, want app", got)
	}
}

func TestSyncCommands(t *testing.T) {
	for _, c := range []struct {
		name      string
		manifests []string
		existing  []string
		want      []string
	}{
		{"go.mod", []string{"go.mod"}, nil, []string{"go mod download"}},
		{"go.mod and go.sum once", []string{"go.mod", "go.sum"}, nil, []string{"go mod download"}},
		{"package.json without a lock", []string{"web/package.json"}, nil, []string{"npm install (in web)"}},
		{"package.json with a lock", []string{"web/package.json"}, []string{"web/package-lock.json"}, []string{"npm ci (in web)"}},
		{"planned lock", []string{"package.json", "package-lock.json"}, nil, []string{"npm ci"}},
		{"requirements", []string{"requirements.txt"}, nil, []string{"pip install -r requirements.txt"}},
		{"pyproject alone", []string{"pyproject.toml"}, nil, nil},
		{"two projects", []string{"api/go.mod", "web/package.json"}, nil, []string{"go mod download (in api)", "npm install (in web)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, describe(syncCommands(c.manifests, c.existing))); diff != "" {
				t.Errorf("syncCommands (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInstallCommandByLanguage(t *testing.T) {
	py := []*builderv1.PlannedFile{{Path: "app/main.py"}}
	for _, c := range []struct {
		lang    string
		planned []*builderv1.PlannedFile
		want    string
	}{
		{"go", nil, "go get x"},
		{"node", nil, "npm install x"},
		{"", py, "pip install x"},
		{"", nil, "go get x"},
	} {
		got := installCommand(c.lang, c.planned, []string{"x"})
		if s := strings.Join(got, " "); s != c.want {
			t.Errorf("%q %v: %q, want %q", c.lang, c.planned, s, c.want)
		}
	}
}
