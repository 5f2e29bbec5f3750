package service_test

import (
	"github.com/thefold/thefold/services/sandbox/internal/service"

	"testing"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// A TypeScript project that brings no node_modules is type-checked with the host's tsc in
// a bwrap sandbox too, and a type error fails the validation there as in docker
// (TestDockerValidateTypeScript).
func TestBwrapValidateTypeScript(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	if e.kind != sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP {
		t.Skip("bwrap does not work here")
	}
	sb := e.create(t, &sandboxv1.CreateSandboxRequest{Language: "typescript", Archive: tarGz(t, map[string]string{
		"tsconfig.json": `{"compilerOptions": {"strict": true, "target": "es2020", "module": "commonjs"}, "include": ["src"]}`,
		"src/a.ts":      "export function twice(n: number): number {\n  return n * 2;\n}\n\nexport const s: string = twice(2);\n",
	})})
	resp := e.validateLong(t, sb.Id)
	if resp.Passed || resp.Toolchain != "node" {
		t.Errorf("passed %v toolchain %q, want node, not passed; steps %v", resp.Passed, resp.Toolchain, resp.Steps)
	}
	d := stepDiag(t, resp, sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK, "src/a.ts", 5)
	if d != nil && (d.Tool != "tsc" || d.Rule != "TS2322" || d.Severity != typev1.Severity_SEVERITY_ERROR) {
		t.Errorf("diagnostic %v, want tsc's TS2322 error", d)
	}
}
