package contracts

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// The rules of thefold/type/v1/conventions.proto that a machine can check. Check runs them
// over contract files; the contract test runs it over every file of the nine services, so
// the rules hold for the services still to come.

// Violation is one broken rule.
type Violation struct {
	// Element is the full name of the message, field, enum or method.
	Element string
	Rule    string
}

func (v Violation) String() string { return v.Element + ": " + v.Rule }

// Side-effecting RPCs (any method not marked idempotency_level = NO_SIDE_EFFECTS) take a
// caller-chosen request_id, so a client may retry one whose answer was lost, unless they
// are listed in naturallyIdempotent with the reason a retry is harmless. A new
// side-effecting RPC is neither until someone decides: Check fails on it.

// Reasons shared by many entries.
const (
	setsFields   = "sets the fields named in update_mask to the values given: a retry sets them again"
	deletesByID  = "deletes by id: a retry finds it gone (NOT_FOUND) and deletes nothing else"
	setsRelation = "sets a relation to the role given (NONE removes it): a retry sets the same"
	guardedOnce  = "a transition out of a state it never returns to: a retry finds it done and is FAILED_PRECONDITION (or returns it), never a second effect"
)

// naturallyIdempotent are the side-effecting RPCs without a request_id, each with why a
// retry is harmless (a natural key, a state that cannot be left twice, values set rather
// than added).
var naturallyIdempotent = map[string]string{
	// Natural keys: a retry finds the thing, or ALREADY_EXISTS names it.
	"thefold.github.v1.RepoService.CreateRepo":          "the repository name",
	"thefold.github.v1.RepoService.InitRepo":            "the repository: a second init of a repository with commits writes nothing",
	"thefold.github.v1.RepoService.CreateBranch":        "the branch name",
	"thefold.github.v1.RepoService.CreateNamespace":     "the namespace name",
	"thefold.skills.v1.SkillService.CreateSkill":        "the skill name",
	"thefold.ai.v1.ModelRegistryService.CreateProvider": "the provider name",
	"thefold.ai.v1.ModelRegistryService.CreateModel":    "the provider and model name",
	"thefold.gateway.v1.UserService.CreateUser":         "the e-mail address",
	"thefold.tasks.v1.TaskService.ImportIssues":         "each issue's external id: re-importing updates the task it became",
	"thefold.sandbox.v1.SandboxService.Snapshot":        "the snapshot name: a second Snapshot of a name is ALREADY_EXISTS and leaves the first",
	"thefold.tasks.v1.TaskService.AddDependency":        "the edge (task_id, blocked_by_id): adding it again changes nothing",
	"thefold.tasks.v1.TaskService.RemoveDependency":     "the edge (task_id, blocked_by_id): removing it again changes nothing",

	"thefold.github.v1.RepoService.MergeBaseIntoPullRequest": "a head that contains its base already is left as is: a retry finds nothing to merge (updated false); with expected_head_sha a retry after a success is ABORTED, never a second merge",
	"thefold.github.v1.RepoService.CreateMergeGroup":         "moves no branch and changes no pull request: a retry writes an unreferenced commit of the same tree again",

	// Values set, not added.
	"thefold.agent.v1.ProjectService.UpdateProject":          setsFields,
	"thefold.agent.v1.ChatService.UpdateConversation":        setsFields,
	"thefold.agent.v1.PreferencesService.UpdatePreferences":  setsFields,
	"thefold.ai.v1.ModelRegistryService.UpdateModel":         setsFields,
	"thefold.ai.v1.ModelRegistryService.UpdateProvider":      setsFields,
	"thefold.gateway.v1.UserService.UpdateUser":              setsFields,
	"thefold.github.v1.RepoService.UpdateIssue":              setsFields,
	"thefold.memory.v1.MemoryService.UpdateMemory":           setsFields,
	"thefold.skills.v1.SkillService.UpdateSkill":             setsFields + " (version counts updates, not states: a retry adds one)",
	"thefold.tasks.v1.TaskService.UpdateTask":                setsFields,
	"thefold.agent.v1.RepoEventService.UpdateRepoConnection": setsFields,
	"thefold.tasks.v1.TaskService.SetTaskStatus":             "moves the task to the status given: a retry finds it there (the same status is no transition)",
	"thefold.memory.v1.MemoryService.PromoteMemory":          "sets trust USER; promoting a USER memory again changes nothing and returns it",
	"thefold.github.v1.RepoService.SetCollaborator":          setsRelation,
	"thefold.github.v1.RepoService.SetNamespaceMember":       setsRelation,
	"thefold.github.v1.RepoService.SetGitHubGrant":           setsRelation,
	"thefold.github.v1.RepoService.SetGitHubCredential":      "stores the caller's one token: a retry stores the same token again",
	"thefold.github.v1.RepoService.DeleteGitHubCredential":   "forgets the caller's one token: a retry finds none",
	"thefold.sandbox.v1.SandboxService.WriteFile":            "writes the whole content given: a retry writes the same bytes",
	"thefold.sandbox.v1.SandboxService.KeepAliveSandbox":     "sets the expiry from now (or the pin): a retry sets it again",
	"thefold.sandbox.v1.SandboxService.ApplyEdits": "each edit states how often its old_text occurs; once applied that no longer holds, so a " +
		"retry fails as a whole without touching the file (the response says so)",

	// Deletes.
	"thefold.ai.v1.ModelRegistryService.DeleteModel":         deletesByID,
	"thefold.ai.v1.ModelRegistryService.DeleteProvider":      deletesByID,
	"thefold.memory.v1.MemoryService.DeleteMemory":           deletesByID,
	"thefold.skills.v1.SkillService.DeleteSkill":             deletesByID,
	"thefold.tasks.v1.TaskService.DeleteTask":                deletesByID,
	"thefold.agent.v1.ChatService.DeleteConversation":        deletesByID,
	"thefold.agent.v1.ChatService.DeleteIntegration":         deletesByID,
	"thefold.agent.v1.RepoEventService.DeleteRepoConnection": deletesByID,
	"thefold.agent.v1.LinearService.DeleteLinearConnection":  deletesByID,
	"thefold.sandbox.v1.SandboxService.DeleteFile":           "deletes by path: a retry finds it gone (NOT_FOUND)",
	"thefold.sandbox.v1.SandboxService.DestroySandbox":       "destroying a destroyed sandbox succeeds and changes nothing",

	// Transitions guarded by a state that cannot be entered twice.
	"thefold.agent.v1.AgentService.CancelJob":               guardedOnce,
	"thefold.agent.v1.AgentService.PauseJob":                guardedOnce,
	"thefold.agent.v1.ProjectService.InterruptWorker":       "pauses the worker's job: a retry finds it paused and returns the worker as is",
	"thefold.agent.v1.ProjectService.ResumeWorker":          guardedOnce,
	"thefold.agent.v1.AgentService.ResolveTask":             guardedOnce,
	"thefold.agent.v1.AgentService.SkipTask":                guardedOnce,
	"thefold.agent.v1.ProjectService.CancelProject":         guardedOnce,
	"thefold.agent.v1.ProjectService.PauseProject":          guardedOnce,
	"thefold.agent.v1.ProjectService.ResumeProject":         "continues a PAUSED project and never runs a completed task again: a retry finds it RUNNING (FAILED_PRECONDITION)",
	"thefold.agent.v1.ProjectService.SkipProjectTask":       guardedOnce,
	"thefold.agent.v1.ProjectService.ResolveProjectTask":    guardedOnce,
	"thefold.agent.v1.ChatService.CancelReply":              guardedOnce,
	"thefold.agent.v1.ChatService.TestIntegration":          "posts one test message and records how the webhook answered: a retry posts another test message, which is what a person testing a webhook expects",
	"thefold.agent.v1.ChatService.HandleInbound":            "the provider's signed request is the key: a redelivery of the same request (same signature) is answered as the first and stores nothing twice",
	"thefold.agent.v1.RepoEventService.HandleGitHubWebhook": "GitHub's X-GitHub-Delivery id is the key (a redelivery keeps it): a delivery seen before is answered as the first and stores nothing twice",
	"thefold.agent.v1.LinearService.HandleLinearWebhook":    "Linear's Linear-Delivery id is the key: a delivery seen before is answered as the first and stores nothing twice",
	"thefold.agent.v1.LinearService.SyncLinear":             "converges: each issue's task is made once (keyed by the issue) and then set to the issue's values, and a status is written to Linear only while it differs from the one last written",
	"thefold.agent.v1.ReviewService.ApproveReview":          "approving an APPROVED review again is a no-op that returns it",
	"thefold.agent.v1.ReviewService.RejectReview":           guardedOnce,
	"thefold.agent.v1.ReviewService.RequestChanges":         "keyed by the review: only a PENDING review is sent back and it never becomes PENDING again (the next round is a new review), so a retry is FAILED_PRECONDITION, never a second round",
	"thefold.builder.v1.BuilderService.CancelBuild":         "cancelling a CANCELLED build returns it unchanged",
	"thefold.builder.v1.BuilderService.PauseBuild":          "pausing a PAUSED build returns it unchanged",
	"thefold.builder.v1.BuilderService.ResumeBuild":         "continues a PAUSED build and runs no finished step again: a retry finds it PENDING or RUNNING (FAILED_PRECONDITION)",
	"thefold.github.v1.RepoService.MergePullRequest":        "an already merged pull request is returned as is",
	"thefold.github.v1.RepoService.ClosePullRequest":        "an already closed pull request is returned as is",
	"thefold.gateway.v1.AuthService.RevokeAPIKey":           "revoking a revoked key returns it unchanged",
	"thefold.gateway.v1.AuthService.RevokeToken":            "revoking a revoked token or ended session changes nothing",
	"thefold.gateway.v1.AuthService.RefreshToken":           "the refresh token is the key: presenting it again within the grace period returns the same successor",
	"thefold.gateway.v1.AuthService.VerifyLoginCode":        "the code is the key and works once: a retry is refused, never a second session",
	"thefold.gateway.v1.AuthService.RequestLoginCode":       "a retry mails another code, which replaces the first (only the latest works): the person uses the newest e-mail, and the per-address limit bounds the mails",
	"thefold.gateway.v1.IdentityService.ExchangeAPIKey":     "mints a short-lived token from the key and keeps no state: a retry mints another equivalent one",
	"thefold.memory.v1.MemoryService.Consolidate":           "converges: a group is merged into one memory, so running it again finds nothing more to merge",
	"thefold.skills.v1.SkillService.LogResult":              "the (job, skill) pair is the key: a result is recorded once, a retry changes nothing",
	"thefold.skills.v1.SkillService.ExecutePostRun": "runs the POST_RUN skills' rules over the files given and keeps nothing but a log line: a retry " +
		"computes the same answer (no AI check runs today; one that spends tokens must pass a request_id on to ai)",
	"thefold.skills.v1.SkillService.ExecutePreRun":          "runs checks and transforms over the input given and keeps nothing: a retry computes the same answer",
	"thefold.sandbox.v1.SandboxService.Validate":            "validates the workspace as it is: a retry runs the same checks again and only adds build caches and a command-log entry, no state a caller depends on",
	"thefold.sandbox.v1.SandboxService.ValidateIncremental": "as Validate",
}

// createVerbs start the names of methods that create something.
var createVerbs = []string{"Create", "BatchCreate", "Start", "Store", "Plan", "Commit", "Comment", "Submit", "Import", "Init"}

// readVerbs start the names of methods that only read.
var readVerbs = []string{"Get", "List", "Watch", "Search", "Find", "Estimate", "Select", "Read", "Who"}

var (
	moneyName   = regexp.MustCompile(`(^|_)(usd|cost|costs|price|money|dollars?|micros)(_|$)`)
	commandName = regexp.MustCompile(`^(command|commands|cmd|argv|args|shell|script)$`)
)

// Check runs the rules over files and returns what breaks them.
func Check(files []protoreflect.FileDescriptor) []Violation {
	var out []Violation
	add := func(el protoreflect.Descriptor, format string, args ...any) {
		out = append(out, Violation{Element: string(el.FullName()), Rule: fmt.Sprintf(format, args...)})
	}
	for _, f := range files {
		walkMessages(f.Messages(), func(m protoreflect.MessageDescriptor) {
			checkEnums(m.Enums(), add)
			for i := 0; i < m.Fields().Len(); i++ {
				checkField(m.Fields().Get(i), add)
			}
		})
		checkEnums(f.Enums(), add)
		for i := 0; i < f.Services().Len(); i++ {
			s := f.Services().Get(i)
			for j := 0; j < s.Methods().Len(); j++ {
				checkMethod(s.Methods().Get(j), add)
			}
		}
	}
	return out
}

type addFunc func(el protoreflect.Descriptor, format string, args ...any)

func walkMessages(ms protoreflect.MessageDescriptors, fn func(protoreflect.MessageDescriptor)) {
	for i := 0; i < ms.Len(); i++ {
		m := ms.Get(i)
		if m.IsMapEntry() {
			continue
		}
		fn(m)
		walkMessages(m.Messages(), fn)
	}
}

func checkEnums(es protoreflect.EnumDescriptors, add addFunc) {
	for i := 0; i < es.Len(); i++ {
		e := es.Get(i)
		want := upperSnake(string(e.Name())) + "_UNSPECIFIED"
		zero := e.Values().ByNumber(0)
		if zero == nil || string(zero.Name()) != want {
			add(e, "enum without %s = 0", want)
		}
	}
}

func checkField(fd protoreflect.FieldDescriptor, add addFunc) {
	name := string(fd.Name())
	switch k := fd.Kind(); {
	case (k == protoreflect.DoubleKind || k == protoreflect.FloatKind) && moneyName.MatchString(name):
		add(fd, "money as a float; use int64 micro-dollars (<name>_micros)")
	case k == protoreflect.StringKind && commandName.MatchString(name) && !fd.IsList():
		add(fd, "command as a shell string; use an argv list (repeated string)")
	case (k == protoreflect.Int64Kind || k == protoreflect.Int32Kind) && moneyName.MatchString(name) &&
		!strings.Contains(name, "micros"):
		add(fd, "money field must say its unit: <name>_micros")
	}
}

func checkMethod(m protoreflect.MethodDescriptor, add addFunc) {
	name := string(m.Name())
	full := string(m.FullName())
	in, outMsg := m.Input(), m.Output()
	readOnly := idempotency(m) == descriptorpb.MethodOptions_NO_SIDE_EFFECTS
	if hasPrefix(name, readVerbs) && !readOnly {
		add(m, "read-only method without option idempotency_level = NO_SIDE_EFFECTS")
	}
	if strings.HasPrefix(name, "Watch") {
		checkWatch(m, add)
	}
	if strings.HasPrefix(name, "List") && !m.IsStreamingServer() {
		for _, f := range []string{"page_size", "page_token"} {
			if in.Fields().ByName(protoreflect.Name(f)) == nil {
				add(m, "list without %s in its request", f)
			}
		}
		if outMsg.Fields().ByName("next_page_token") == nil {
			add(m, "list without next_page_token in its response")
		}
	}
	if strings.HasPrefix(name, "Update") && in.Fields().ByName("update_mask") == nil {
		add(m, "update without a google.protobuf.FieldMask update_mask")
	}
	if readOnly {
		return
	}
	if hasPrefix(name, createVerbs) {
		// A create is never excused by its state: only a natural key makes its retry safe.
		if _, natural := naturallyIdempotent[full]; !natural && !hasRequestID(in) {
			add(m, "side-effecting create without string request_id")
		}
		return
	}
	if _, natural := naturallyIdempotent[full]; !natural && !hasRequestID(in) {
		add(m, "side-effecting method without string request_id (or an entry in naturallyIdempotent saying why a retry is harmless)")
	}
}

func hasRequestID(in protoreflect.MessageDescriptor) bool {
	f := in.Fields().ByName("request_id")
	return f != nil && f.Kind() == protoreflect.StringKind && !f.IsList()
}

// checkWatch checks the envelope of thefold/type/v1/event.proto.
func checkWatch(m protoreflect.MethodDescriptor, add addFunc) {
	if !m.IsStreamingServer() {
		add(m, "Watch method that does not stream")
		return
	}
	in, out := m.Input(), m.Output()
	for _, want := range []struct {
		msg    protoreflect.MessageDescriptor
		name   string
		number protoreflect.FieldNumber
		kind   protoreflect.Kind
		typ    protoreflect.FullName
	}{
		{out, "id", 1, protoreflect.Int64Kind, ""},
		{out, "time", 2, protoreflect.MessageKind, "google.protobuf.Timestamp"},
		{out, "type", 3, protoreflect.EnumKind, ""},
		{out, "heartbeat", 0, protoreflect.MessageKind, "thefold.type.v1.Heartbeat"},
		{in, "after_id", 0, protoreflect.Int64Kind, ""},
		{in, "from_now", 0, protoreflect.BoolKind, ""},
	} {
		f := want.msg.Fields().ByName(protoreflect.Name(want.name))
		ok := f != nil && f.Kind() == want.kind && (want.number == 0 || f.Number() == want.number) &&
			(want.typ == "" || (f.Message() != nil && f.Message().FullName() == want.typ))
		if !ok {
			add(m, "Watch without the shared envelope: %s.%s", want.msg.Name(), want.name)
		}
	}
	if o := out.Oneofs().ByName("payload"); o == nil || o.Fields().ByName("heartbeat") == nil {
		add(m, "Watch without the shared envelope: %s has no oneof payload holding heartbeat", out.Name())
	}
}

func idempotency(m protoreflect.MethodDescriptor) descriptorpb.MethodOptions_IdempotencyLevel {
	if o, ok := m.Options().(*descriptorpb.MethodOptions); ok && o != nil {
		return o.GetIdempotencyLevel()
	}
	return descriptorpb.MethodOptions_IDEMPOTENCY_UNKNOWN
}

func hasPrefix(name string, verbs []string) bool {
	return slices.ContainsFunc(verbs, func(v string) bool {
		rest, ok := strings.CutPrefix(name, v)
		// "Store" must not match "Stored…", nor "Get" "Getaway": the verb ends a word.
		return ok && (rest == "" || (rest[0] >= 'A' && rest[0] <= 'Z'))
	})
}

// upperSnake turns "TaskStatus" into "TASK_STATUS".
func upperSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			prev := s[i-1]
			next := byte(0)
			if i+1 < len(s) {
				next = s[i+1]
			}
			if prev >= 'a' && prev <= 'z' || prev >= '0' && prev <= '9' || (next >= 'a' && next <= 'z' && prev >= 'A' && prev <= 'Z') {
				b.WriteByte('_')
			}
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}
