package validate_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/pkg/validate"
)

func TestUpdatePaths(t *testing.T) {
	updatable := []string{"state", "labels", "title", "body"}
	// An explicit mask is taken as it is, and checked.
	got, err := validate.UpdatePaths(&fieldmaskpb.FieldMask{Paths: []string{"body"}}, &githubv1.Issue{Title: "x"}, updatable)
	if err != nil || strings.Join(got, ",") != "body" {
		t.Fatalf("explicit mask: %v %v", got, err)
	}
	_, err = validate.UpdatePaths(&fieldmaskpb.FieldMask{Paths: []string{"title", "number"}}, nil, updatable)
	if err == nil || !strings.Contains(status.Convert(err).Message(), "paths[1]") {
		t.Fatalf("a path that is not updatable: %v", err)
	}
	// An empty mask means the populated updatable fields, in the order of updatable; the
	// number naming the issue is ignored.
	got, err = validate.UpdatePaths(nil, &githubv1.Issue{Number: 3, Body: "b", Title: "t", Labels: []string{"x"}}, updatable)
	if err != nil || strings.Join(got, ",") != "labels,title,body" {
		t.Fatalf("implied mask: %v %v", got, err)
	}
	_, err = validate.UpdatePaths(&fieldmaskpb.FieldMask{}, &githubv1.Issue{Number: 3}, updatable)
	if err == nil || !strings.Contains(status.Convert(err).Message(), "update_mask") {
		t.Fatalf("nothing to update: %v", err)
	}
}
