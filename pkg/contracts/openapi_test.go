package contracts

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-openapi/loads"
	"github.com/go-openapi/spec"
	"github.com/go-openapi/strfmt"
	"github.com/go-openapi/validate"

	"github.com/thefold/thefold/pkg/gen/openapi"
)

// TestOpenAPIDocumentIsValid validates the merged document the gateway serves with an
// independent OpenAPI (Swagger 2.0) library, so client generators and validators accept it.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	if raceDetector {
		// One goroutine walking a document: the race detector finds nothing here and makes
		// it ten times slower (26 s). make check-generate runs it without.
		t.Skip("the OpenAPI document is validated without the race detector (make check-generate)")
	}
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

// TestCustomMethodsAreNamedAfterTheirRPC holds the REST custom methods to AIP-136: the verb
// after ':' is lowerCamelCase and made of words of its RPC's name, in order (":batchCreate"
// serves BatchCreateTasks, ":requestChanges" RequestChanges), so a client can tell from a
// URL which RPC answers it.
func TestCustomMethodsAreNamedAfterTheirRPC(t *testing.T) {
	t.Parallel()
	doc, err := loads.Analyzed(json.RawMessage(openapi.Spec), "2.0")
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	camel := regexp.MustCompile(`^[a-z][a-zA-Z]*$`)
	for path, item := range doc.Spec().Paths.Paths {
		last := path[strings.LastIndex(path, "/")+1:]
		_, verb, ok := strings.Cut(last, ":")
		if !ok {
			continue
		}
		for _, op := range []*spec.Operation{item.Get, item.Post, item.Put, item.Patch, item.Delete} {
			if op == nil {
				continue
			}
			_, rpc, _ := strings.Cut(op.ID, "_")
			switch {
			case !camel.MatchString(verb):
				t.Errorf("%s (%s): custom verb %q is not lowerCamelCase", path, rpc, verb)
			case !wordsInOrder(words(verb), words(rpc)):
				t.Errorf("%s: custom verb %q is not named after its RPC %s", path, verb, rpc)
			}
		}
	}
}

// words splits a camelCase or PascalCase name into lower-case words.
func words(s string) []string {
	var out []string
	start := 0
	for i := 1; i <= len(s); i++ {
		if i == len(s) || (s[i] >= 'A' && s[i] <= 'Z' && !(s[i-1] >= 'A' && s[i-1] <= 'Z')) {
			out = append(out, strings.ToLower(s[start:i]))
			start = i
		}
	}
	return out
}

// wordsInOrder reports whether want appear in have in order (not necessarily adjacent).
func wordsInOrder(want, have []string) bool {
	i := 0
	for _, w := range have {
		if i < len(want) && (w == want[i] || w == want[i]+"s" || w+"s" == want[i]) {
			i++
		}
	}
	return i == len(want)
}

// TestWatchRoutesDescribeServerSentEvents: every Watch route says it also answers
// text/event-stream and takes Last-Event-ID (make generate's openapi-sse step).
func TestWatchRoutesDescribeServerSentEvents(t *testing.T) {
	t.Parallel()
	doc, err := loads.Analyzed(json.RawMessage(openapi.Spec), "2.0")
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	n := 0
	for path, item := range doc.Spec().Paths.Paths {
		if !strings.HasSuffix(path, ":watch") || item.Get == nil {
			continue
		}
		n++
		op := item.Get
		if !slices.Contains(op.Produces, "text/event-stream") {
			t.Errorf("%s does not produce text/event-stream: %v", path, op.Produces)
		}
		if !slices.ContainsFunc(op.Parameters, func(p spec.Parameter) bool { return p.Name == "Last-Event-ID" && p.In == "header" }) {
			t.Errorf("%s takes no Last-Event-ID header", path)
		}
		if !strings.Contains(op.Description, "Server-sent events") {
			t.Errorf("%s does not describe its server-sent events", path)
		}
	}
	if n < 4 {
		t.Fatalf("only %d watch routes found", n)
	}
}
