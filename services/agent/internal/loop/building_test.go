package loop

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// resumer answers ResumeBuild with err (nil: the build, PENDING again).
type resumer struct {
	builderv1.BuilderServiceClient
	err error
	ids []string
}

func (c *resumer) ResumeBuild(_ context.Context, req *builderv1.ResumeBuildRequest, _ ...grpc.CallOption) (*builderv1.ResumeBuildResponse, error) {
	c.ids = append(c.ids, req.Id)
	if c.err != nil {
		return nil, c.err
	}
	return &builderv1.ResumeBuildResponse{Build: &builderv1.BuildJob{Id: req.Id, Status: builderv1.BuildStatus_BUILD_STATUS_PENDING}}, nil
}

// A job that follows its build again resumes it when it is paused (and says so in its
// audit log); a build that is not paused, or a builder without pause, is followed as it is;
// a builder that cannot answer fails the step, to be tried again.
func TestResumeBuildBeforeFollowingIt(t *testing.T) {
	const buildID = "55555555-5555-4555-8555-555555555555"
	for _, c := range []struct {
		name    string
		err     error
		wantErr codes.Code
		audited bool
	}{
		{"paused", nil, codes.OK, true},
		{"running or ended", status.Error(codes.FailedPrecondition, "build is running"), codes.OK, false},
		{"an older builder", status.Error(codes.Unimplemented, "unknown method ResumeBuild"), codes.OK, false},
		{"the builder is down", status.Error(codes.Unavailable, "no builder"), codes.Unavailable, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &resumer{err: c.err}
			r := &run{e: &Engine{c: Clients{Builder: b}}, rec: &store.Record{Job: &agentv1.Job{Id: jobID, BuildId: buildID}}}
			err := r.resumeBuild(t.Context())
			if status.Code(err) != c.wantErr {
				t.Fatalf("resumeBuild = %v, want %v", err, c.wantErr)
			}
			if len(b.ids) != 1 || b.ids[0] != buildID {
				t.Errorf("ResumeBuild of %v, want [%s]", b.ids, buildID)
			}
			audited := len(r.step.Audit) == 1 && r.step.Audit[0].Action == "build_resumed"
			if audited != c.audited {
				t.Errorf("audit %v, want build_resumed: %v", r.step.Audit, c.audited)
			}
		})
	}
}
