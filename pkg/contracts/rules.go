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

// naturalKeyCreates are side-effecting creates without a request_id because a natural key
// makes a retry harmless (it finds the thing, or ALREADY_EXISTS names it). Each entry says
// which key; anything else that creates needs a request_id.
var naturalKeyCreates = map[string]string{
	"thefold.github.v1.RepoService.CreateRepo":          "the repository name",
	"thefold.github.v1.RepoService.InitRepo":            "the repository: a second init of a repository with commits writes nothing",
	"thefold.github.v1.RepoService.CreateBranch":        "the branch name",
	"thefold.github.v1.RepoService.CreateNamespace":     "the namespace name",
	"thefold.skills.v1.SkillService.CreateSkill":        "the skill name",
	"thefold.ai.v1.ModelRegistryService.CreateProvider": "the provider name",
	"thefold.ai.v1.ModelRegistryService.CreateModel":    "the provider and model name",
	"thefold.gateway.v1.UserService.CreateUser":         "the e-mail address",
	"thefold.tasks.v1.TaskService.ImportIssues":         "each issue's external id: re-importing updates the task it became",
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
	creates := hasPrefix(name, createVerbs) && !readOnly
	// Every model call writes the usage ledger: a retry must not count twice.
	if m.Parent().FullName() == "thefold.ai.v1.AIService" && !readOnly {
		creates = true
	}
	if _, natural := naturalKeyCreates[full]; creates && !natural {
		if f := in.Fields().ByName("request_id"); f == nil || f.Kind() != protoreflect.StringKind {
			add(m, "side-effecting create without string request_id")
		}
	}
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
