package contracts

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/go-openapi/loads"
	"github.com/go-openapi/strfmt"
	"github.com/go-openapi/validate"

	"github.com/thefold/thefold/pkg/gen/openapi"
)

// TestOpenAPIDocumentIsValid validates the merged document the gateway serves with an
// independent OpenAPI (Swagger 2.0) library, so client generators and validators accept it.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	doc, err := loads.Analyzed(json.RawMessage(openapi.Spec), "2.0")
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := validate.Spec(doc, strfmt.Default); err != nil {
		t.Fatalf("the OpenAPI document is not valid:\n%v", err)
	}
	info := doc.Spec().Info
	if info == nil || info.Title != "TheFold API" || info.Version != "v1" || info.Description == "" ||
		strings.HasSuffix(info.Title, ".proto") || info.Version == "version not set" {
		t.Errorf("info = %+v, want a real title, version and description", info)
	}
	// One parameter name per path template: two paths that differ only in a parameter's
	// name are one path to a client ("/v1/tasks/{id}" and "/v1/tasks/{task.id}").
	param := regexp.MustCompile(`\{[^}]*\}`)
	seen := map[string]string{}
	for p := range doc.Spec().Paths.Paths {
		shape := param.ReplaceAllString(p, "{}")
		if other, ok := seen[shape]; ok {
			t.Errorf("paths %s and %s are the same template with different parameter names", other, p)
		}
		seen[shape] = p
		if strings.Contains(p, ".") && param.MatchString(p) && strings.Contains(param.FindString(p), ".") {
			t.Errorf("path %s has a dotted parameter name", p)
		}
	}
}
