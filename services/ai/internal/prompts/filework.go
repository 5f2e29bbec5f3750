package prompts

import (
	"encoding/json"
	"fmt"
	"github.com/thefold/thefold/pkg/fence"
	"slices"
	"strconv"
	"strings"

	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/textedit"

	"github.com/thefold/thefold/services/ai/internal/llm"
)

// editsAboveLines is where the service switches an unspecified form to edits: beyond it,
// rewriting a file costs more output tokens (and more chances to drop a line) than editing.
const editsAboveLines = 80

// EffectiveForm is the answer form a GenerateFile or FixFile call asks for: CREATE is always
// the whole file, and so is any change to an empty file (edits need text to match); an
// explicit form is kept; CHANGE_FORM_UNSPECIFIED becomes edits for a MODIFY of a file over
// 80 lines and the whole file otherwise. (An answer in the other form is accepted too.)
func EffectiveForm(action typev1.FileAction, existing string, form aiv1.ChangeForm) aiv1.ChangeForm {
	if action != typev1.FileAction_FILE_ACTION_MODIFY || existing == "" {
		return aiv1.ChangeForm_CHANGE_FORM_WHOLE_FILE
	}
	if form != aiv1.ChangeForm_CHANGE_FORM_UNSPECIFIED {
		return form
	}
	if lineCount(existing) > editsAboveLines {
		return aiv1.ChangeForm_CHANGE_FORM_EDITS
	}
	return aiv1.ChangeForm_CHANGE_FORM_WHOLE_FILE
}

func lineCount(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// fileMaxTokens leaves room for a whole-file answer as long as the file (about 3 bytes a
// token) and an explanation, within what models answer at most.
func fileMaxTokens(form aiv1.ChangeForm, existing string) int {
	if form == aiv1.ChangeForm_CHANGE_FORM_EDITS {
		return 16000
	}
	return min(max(16000, len(existing)/3+4000), 64000)
}

// Limits on the writer's context that the request checks do not already bound.
const (
	maxPlanStepsShown = 500
	maxExcerptErrors  = 20
	excerptRadius     = 3
	maxHistoryRounds  = 20
)

// fileContextView is the block GenerateFile and FixFile share.
type fileContextView struct {
	Task *aiv1.TaskSpec
	Plan *typev1.Plan
	Deps []*aiv1.ContextFile
}

// fileWork renders the shared system text and context blocks around one call's specifics:
// the task and plan, one block per dependency file, then the repository outlines.
func fileWork(rpc string, task *aiv1.TaskSpec, plan *typev1.Plan, deps, refs []*aiv1.ContextFile, guidance, specificsName string,
	specifics any, maxTokens int) (*Prompt, error) {
	p := parts{rpc: rpc, guidance: guidance, maxTokens: maxTokens, text: true}
	var err error
	if p.system, err = render("file_work.system", nil); err != nil {
		return nil, err
	}
	if plan != nil && len(plan.GetSteps()) > maxPlanStepsShown {
		plan = &typev1.Plan{Summary: plan.GetSummary(), Packages: plan.GetPackages(), Steps: plan.GetSteps()[:maxPlanStepsShown]}
	}
	head, err := render("file_work.context", fileContextView{Task: task, Plan: plan, Deps: deps})
	if err != nil {
		return nil, err
	}
	// One block per dependency file, in the given order: a build's next file usually
	// depends on this file's dependencies plus this file, so its prompt extends this
	// prompt block by block, and the provider's cache (which looks back over block
	// boundaries) serves the shared part to the next file's first call too. The outlines
	// differ per file and come last; GenerateFile and FixFile of one file share them.
	p.context = []string{head}
	for _, d := range deps {
		p.context = append(p.context, fenceFile("file", d.GetPath(), d.GetContent(), d.GetTruncated()))
	}
	if len(refs) > 0 {
		r, err := render("file_work.references", refs)
		if err != nil {
			return nil, err
		}
		p.context = append(p.context, r)
	}
	if p.specifics, err = render(specificsName, specifics); err != nil {
		return nil, err
	}
	out := assemble(p)
	// What goes first when the prompt is over a model's window: the outlines, then the
	// dependency files from the farthest (they come in dependency order, nearest last).
	out.dropNames = map[int]string{}
	if len(refs) > 0 {
		i := len(p.context) - 1
		out.drop, out.dropNames[i] = append(out.drop, i), "the repository outlines"
	}
	for k, d := range deps {
		out.drop, out.dropNames[k+1] = append(out.drop, k+1), "dependency file "+fence.Attr(d.GetPath())
	}
	return out, nil
}

// stepFor is the id of the plan's step that writes path, or "".
func stepFor(plan *typev1.Plan, p string) string {
	for _, s := range plan.GetSteps() {
		if s.GetPath() == p && s.GetAction() != typev1.FileAction_FILE_ACTION_UNSPECIFIED {
			return s.GetId()
		}
	}
	return ""
}

// GenerateFile builds the prompt that writes one planned file. Skills, conventions and
// code patterns form the second system segment; the project structure and the file spec
// are the call's specifics, so the context blocks (task, plan, dependency files, outlines)
// are the ones FixFile sends for the same file.
func GenerateFile(req *aiv1.GenerateFileRequest) (*Prompt, error) {
	f := req.GetFile()
	if f == nil {
		return nil, errs.Invalid("file", "required")
	}
	if f.GetAction() != typev1.FileAction_FILE_ACTION_CREATE && f.GetAction() != typev1.FileAction_FILE_ACTION_MODIFY {
		return nil, errs.Invalid("file.action", "want FILE_ACTION_CREATE or FILE_ACTION_MODIFY, got %s", f.GetAction())
	}
	form := EffectiveForm(f.GetAction(), f.GetExistingContent(), req.GetForm())
	v := struct {
		Path, Description, Existing, StepID string
		Modify, Edits                       bool
		Structure                           []string
	}{
		Path: f.GetPath(), Description: f.GetDescription(), Existing: f.GetExistingContent(), StepID: stepFor(req.GetPlan(), f.GetPath()),
		Modify: f.GetAction() == typev1.FileAction_FILE_ACTION_MODIFY, Edits: form == aiv1.ChangeForm_CHANGE_FORM_EDITS,
		Structure: req.GetProjectStructure(),
	}
	guidance := guidanceSegment(req.GetSkills(), req.GetConventions(), req.GetPatterns())
	return fileWork("GenerateFile", req.GetTask(), req.GetPlan(), req.GetDependencyFiles(), req.GetReferenceFiles(), guidance,
		"generate_file.specifics", v, fileMaxTokens(form, f.GetExistingContent()))
}

// FixFile builds the prompt that fixes one file's diagnostics: the file, its diagnostics with
// a line-numbered excerpt around each, the errors a later step will fix, and what the
// earlier rounds tried. Given the skills, conventions and patterns GenerateFile had, its
// system segments and context blocks are GenerateFile's, byte for byte: the provider's
// prompt cache serves the whole prefix to the fix loop.
func FixFile(req *aiv1.FixFileRequest) (*Prompt, error) {
	form := EffectiveForm(typev1.FileAction_FILE_ACTION_MODIFY, req.GetContent(), req.GetForm())
	v := struct {
		Path, Content, ErrorOutput, Excerpts, History string
		Errors, Expected                              []*typev1.Diagnostic
		Related                                       []*aiv1.ContextFile
		Attempt                                       int32
		Edits                                         bool
	}{
		Related: req.GetRelatedFiles(),
		Path:    req.GetPath(), Content: req.GetContent(), ErrorOutput: req.GetErrorOutput(), Errors: req.GetErrors(),
		Expected: req.GetExpectedErrors(), Attempt: req.GetAttempt(), Edits: form == aiv1.ChangeForm_CHANGE_FORM_EDITS,
		Excerpts: errorExcerpts(req.GetPath(), req.GetContent(), req.GetErrors()),
		History:  fixHistory(req.GetPreviousRounds()),
	}
	guidance := guidanceSegment(req.GetSkills(), req.GetConventions(), req.GetPatterns())
	return fileWork("FixFile", req.GetTask(), req.GetPlan(), req.GetDependencyFiles(), req.GetReferenceFiles(), guidance,
		"fix_file.specifics", v, fileMaxTokens(form, req.GetContent()))
}

// errorExcerpts shows the lines around each error in file p, numbered, the error lines
// marked with '>' and followed by their messages; overlapping windows merge. Empty when no
// diagnostic points at a line of the file.
func errorExcerpts(p, content string, ds []*typev1.Diagnostic) string {
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	msgs := map[int][]string{}
	var at []int
	for _, d := range ds {
		if d.GetPath() != p || d.GetLine() < 1 || int(d.GetLine()) > len(lines) {
			continue
		}
		l := int(d.GetLine())
		if _, ok := msgs[l]; !ok {
			if len(at) == maxExcerptErrors {
				continue
			}
			at = append(at, l)
		}
		msgs[l] = append(msgs[l], d.GetMessage())
	}
	if len(at) == 0 {
		return ""
	}
	slices.Sort(at)
	width := len(strconv.Itoa(len(lines)))
	var b strings.Builder
	last := 0
	for _, l := range at {
		from, to := max(l-excerptRadius, last+1, 1), min(l+excerptRadius, len(lines))
		if from > last+1 && last > 0 {
			b.WriteString("…\n")
		}
		for n := from; n <= to; n++ {
			mark := " "
			if _, ok := msgs[n]; ok {
				mark = ">"
			}
			fmt.Fprintf(&b, "%s%*d| %s\n", mark, width, n, lines[n-1])
			for _, m := range msgs[n] {
				fmt.Fprintf(&b, " %*s^ %s\n", width, "", strings.ReplaceAll(m, "\n", " "))
			}
		}
		last = max(last, to)
	}
	return fence.Fence("excerpt", [][2]string{{"path", p}}, strings.TrimSuffix(b.String(), "\n"), maxOutputBytes)
}

// fixHistory renders the earlier rounds, oldest first.
func fixHistory(rs []*aiv1.FixHistory) string {
	if len(rs) == 0 {
		return ""
	}
	if len(rs) > maxHistoryRounds {
		rs = rs[len(rs)-maxHistoryRounds:]
	}
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "Round %d: ", r.GetRound())
		switch {
		case r.GetError() != "":
			b.WriteString("its answer could not be used: " + fence.Sanitize(r.GetError(), maxShortBytes) + "\n")
		case r.GetExplanation() != "":
			b.WriteString("changed: " + fence.Sanitize(r.GetExplanation(), maxShortBytes) + "\n")
		default:
			b.WriteString("changed the file (no explanation given)\n")
		}
		if len(r.GetErrorsAfter()) > 0 {
			b.WriteString("Still failing after it:\n" + diagnosticLines(r.GetErrorsAfter()))
		}
	}
	return fence.Fence("fix-history", nil, strings.TrimSuffix(b.String(), "\n"), maxOutputBytes)
}

// FileSession reads one GenerateFile or FixFile call's answers, across its repair rounds.
// The code comes outside JSON (see codeanswer.go): SEARCH/REPLACE blocks or the whole file
// in a code block, in either form whatever the request asked, and the JSON answers of
// earlier versions still read. Edits apply tolerantly: the blocks that match apply, and the
// next round asks only for the rest, against the file as it then is; after a second miss it
// asks for the whole file. A whole file that leaves code out is asked for again, and a
// reply cut off at the output limit is not asked for unchanged: a MODIFY switches to edits,
// anything else gets twice the limit.
type FileSession struct {
	rpc, path string
	create    bool
	// existing is the file before the call; base is what the next edits apply to (existing
	// with the edits that applied so far), applied those edits.
	existing, base string
	applied        []*typev1.Edit
	misses         int
	truncations    int
	// related are the other files the answer may change (FixFile's related_files), in the
	// request's order, with their content.
	related []*aiv1.ContextFile
}

// maxFileRepairRounds bounds the repair rounds of one file call: a partial edit, a second
// miss that asks for the whole file, and one more for what that answer got wrong.
const maxFileRepairRounds = 3

// NewGenerateSession reads the answers of req.
func NewGenerateSession(req *aiv1.GenerateFileRequest) *FileSession {
	f := req.GetFile()
	return &FileSession{rpc: "GenerateFile", path: f.GetPath(), create: f.GetAction() != typev1.FileAction_FILE_ACTION_MODIFY,
		existing: f.GetExistingContent(), base: f.GetExistingContent()}
}

// NewFixSession reads the answers of req.
func NewFixSession(req *aiv1.FixFileRequest) *FileSession {
	return &FileSession{rpc: "FixFile", path: req.GetPath(), existing: req.GetContent(), base: req.GetContent(), related: req.GetRelatedFiles()}
}

// FileProblem is an answer the session cannot use yet, with the next round's request.
type FileProblem struct {
	*ParseError
	s *FileSession
	// next builds the repair round's request from the failed round's (false: none may
	// follow), or is nil when no round may follow.
	next func(req llm.Request, reply string) (llm.Request, bool)
}

// Unwrap makes the problem an *ParseError for errors.As.
func (p *FileProblem) Unwrap() error { return p.ParseError }

// Next returns the request of repair round n (1-based) after req got reply, or false when
// there is none.
func (p *FileProblem) Next(req llm.Request, reply string, n int) (llm.Request, bool) {
	if p.next == nil || n > maxFileRepairRounds {
		return llm.Request{}, false
	}
	return p.next(req, reply)
}

// ask is a problem whose repair round shows the model its reply and says what to do.
func (s *FileSession) ask(format string, args ...any) *FileProblem {
	pe := parseErr(s.rpc, format, args...)
	return &FileProblem{ParseError: pe, s: s, next: func(req llm.Request, reply string) (llm.Request, bool) {
		return withTurns(req, reply, pe.Err.Error()), true
	}}
}

// withTurns is req followed by the model's reply and a user turn.
func withTurns(req llm.Request, reply, user string) llm.Request {
	reply = strings.TrimSpace(reply)
	if reply == "" {
		reply = "(empty reply)" // providers refuse empty assistant turns
	}
	req.Messages = append(slices.Clone(req.Messages),
		llm.Message{Role: llm.RoleAssistant, Blocks: []llm.Block{llm.Text(fence.Truncate(reply, maxRepairEcho))}},
		llm.UserText(fence.Sanitize(user, maxRepairEcho)))
	return req
}

// FileResult is a usable answer: the resulting file, the edits it was made with (exact,
// applying in order to the request's content; none when the answer was the whole file) and
// the explanation (FixFile).
type FileResult struct {
	Content     string
	Edits       []*typev1.Edit
	Explanation string
	// Related are the related files the answer changed, whole, in the request's order.
	Related []*typev1.FileChange
}

// Read reads one reply; truncated says it stopped at the output limit. A *FileProblem error
// carries the repair round.
func (s *FileSession) Read(text string, truncated bool) (*FileResult, error) {
	if truncated {
		return nil, s.cutOff()
	}
	var others []string
	for _, f := range s.related {
		others = append(others, f.GetPath())
	}
	a, err := readCodeAnswer(text, s.path, others)
	if err != nil {
		return nil, s.ask("%v. %s", err, s.formHint())
	}
	if len(a.edits) == 0 && !a.hasFile {
		// An answer in the JSON form of earlier versions: {"content": …} or {"edits": […]}.
		if old, ok := legacyAnswer(text); ok {
			a = old
		}
	}
	related, err := s.relatedChanges(text)
	if err != nil {
		return nil, err
	}
	var res *FileResult
	switch {
	case len(a.edits) > 0:
		res, err = s.readEdits(a)
	case a.hasFile:
		if err := lazyWhole(a.file, s.existing, !s.create); err != nil {
			return nil, s.ask("%v", err)
		}
		if err := checkContent(s.rpc, "the code block", s.path, a.file); err != nil {
			return nil, s.ask("%v", err.(*ParseError).Err)
		}
		res = &FileResult{Content: a.file, Explanation: explanation(a.rest)}
	case len(related) > 0:
		// Only a related file changed (the defect was in the code under test).
		res = &FileResult{Content: s.base, Edits: s.applied, Explanation: explanation(stripBlocks(text))}
	default:
		return nil, s.ask("the answer has no code. %s", s.formHint())
	}
	if err != nil {
		return nil, err
	}
	res.Related = related
	return res, nil
}

// relatedChanges reads the whole related files the answer gives, checked as the main file
// is; a block that repeats a file unchanged is no change.
func (s *FileSession) relatedChanges(text string) ([]*typev1.FileChange, error) {
	if len(s.related) == 0 {
		return nil, nil
	}
	var paths []string
	for _, f := range s.related {
		paths = append(paths, f.GetPath())
	}
	blocks := namedBlocks(text, paths)
	var out []*typev1.FileChange
	for _, f := range s.related {
		c, ok := blocks[f.GetPath()]
		if !ok || c == f.GetContent() {
			continue
		}
		if err := lazyWhole(c, f.GetContent(), true); err != nil {
			return nil, s.ask("in %s: %v", f.GetPath(), err)
		}
		if err := checkContent(s.rpc, "the code block of "+f.GetPath(), f.GetPath(), c); err != nil {
			return nil, s.ask("%v", err.(*ParseError).Err)
		}
		out = append(out, &typev1.FileChange{Path: f.GetPath(), Action: typev1.FileAction_FILE_ACTION_MODIFY, Content: c})
	}
	return out, nil
}

// stripBlocks is text without its code blocks.
func stripBlocks(text string) string {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	keep := make([]bool, len(lines))
	for i := range keep {
		keep[i] = true
	}
	for _, b := range fenceBlocks(lines) {
		end := b.end
		if end < 0 {
			end = len(lines) - 1
		}
		for i := b.open; i <= end; i++ {
			if !jsonBlock(lines, b) {
				keep[i] = false
			}
		}
	}
	var out []string
	for i, l := range lines {
		if keep[i] {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func (s *FileSession) formHint() string {
	if s.create || s.base == "" {
		return fmt.Sprintf("Answer with the whole file in one code block opened with ```%s", s.path)
	}
	return fmt.Sprintf("Answer with SEARCH/REPLACE blocks, or with the whole file in one code block opened with ```%s", s.path)
}

// readEdits applies an answer's edits to the file as it is, reporting the ones that miss.
func (s *FileSession) readEdits(a codeAnswer) (*FileResult, error) {
	if s.create || s.base == "" {
		return nil, s.ask("the file is new (or empty), so edits have nothing to match: answer with the whole file in one code block opened with ```%s", s.path)
	}
	if err := lazyEdits(a.edits, s.base); err != nil {
		return nil, s.ask("%v", err)
	}
	out, applied, failed := textedit.ApplyTolerant(s.base, a.edits)
	if err := checkContent(s.rpc, "the edited file", "", out); err != nil {
		return nil, s.ask("%v", err.(*ParseError).Err)
	}
	s.base, s.applied = out, append(s.applied, applied...)
	if len(failed) == 0 {
		return &FileResult{Content: out, Edits: s.applied, Explanation: explanation(a.rest)}, nil
	}
	s.misses++
	var why []string
	for _, f := range failed {
		why = append(why, f.Error())
	}
	current := fenceFile("file", s.path, s.base, false)
	if s.misses >= 2 {
		pe := parseErr(s.rpc, "%d of %d SEARCH/REPLACE blocks did not apply again: %s", len(failed), len(a.edits), strings.Join(why, "; "))
		msg := pe.Err.Error() + ". The blocks that applied are kept; the file as it now is:\n" + current +
			"\n\nAnswer with the whole file instead: every line of it as it must be, in one code block opened with ```" + s.path + "."
		if s.rpc == "FixFile" {
			msg += ` Start with {"explanation": "…"}.`
		}
		return nil, &FileProblem{ParseError: pe, s: s, next: func(req llm.Request, reply string) (llm.Request, bool) { return withTurns(req, reply, msg), true }}
	}
	pe := parseErr(s.rpc, "%d of %d SEARCH/REPLACE blocks did not apply: %s", len(failed), len(a.edits), strings.Join(why, "; "))
	msg := pe.Err.Error() + fmt.Sprintf(". The other %d applied and are kept; the file as it now is:\n", len(applied)) + current +
		"\n\nAnswer with SEARCH/REPLACE blocks for the changes still to make only, their SEARCH parts copied exactly from the file as it now is."
	return nil, &FileProblem{ParseError: pe, s: s, next: func(req llm.Request, reply string) (llm.Request, bool) { return withTurns(req, reply, msg), true }}
}

// cutOff is the problem of a reply stopped at the output limit: never asked again as it was.
func (s *FileSession) cutOff() *FileProblem {
	s.truncations++
	pe := parseErr(s.rpc, "the reply was cut off at the output limit")
	if s.truncations > 2 {
		return &FileProblem{ParseError: pe, s: s}
	}
	if !s.create && s.base != "" && s.truncations == 1 {
		msg := pe.Err.Error() + " before the file ended. Answer with SEARCH/REPLACE blocks for the changes instead of the whole file."
		return &FileProblem{ParseError: pe, s: s, next: func(req llm.Request, reply string) (llm.Request, bool) {
			return withTurns(req, fence.Truncate(reply, 4<<10), msg), true
		}}
	}
	return &FileProblem{ParseError: pe, s: s, next: func(req llm.Request, _ string) (llm.Request, bool) {
		// The same request with room for the answer: the cut reply is no use to repeat.
		if req.MaxTokens <= 0 {
			return req, false // the model's own maximum already applied
		}
		req.MaxTokens = min(req.MaxTokens*2, 128000)
		return req, true
	}}
}

// legacyAnswer reads the JSON answer form of earlier versions.
func legacyAnswer(text string) (codeAnswer, bool) {
	b, err := ExtractJSON(text)
	if err != nil {
		return codeAnswer{}, false
	}
	var j struct {
		Content     *string    `json:"content"`
		Edits       []editJSON `json:"edits"`
		Explanation string     `json:"explanation"`
	}
	if json.Unmarshal(b, &j) != nil {
		return codeAnswer{}, false
	}
	rest, _ := json.Marshal(map[string]string{"explanation": j.Explanation})
	switch {
	case len(j.Edits) > 0:
		a := codeAnswer{rest: string(rest)}
		for _, e := range j.Edits {
			a.edits = append(a.edits, &typev1.Edit{OldText: e.OldText, NewText: e.NewText, ExpectedCount: e.ExpectedCount})
		}
		return a, true
	case j.Content != nil:
		return codeAnswer{file: *j.Content, hasFile: true, rest: string(rest)}, true
	}
	return codeAnswer{}, false
}

type editJSON struct {
	OldText       string `json:"old_text"`
	NewText       string `json:"new_text"`
	ExpectedCount int32  `json:"expected_count"`
}

// maxExplanationBytes caps a fix's explanation.
const maxExplanationBytes = 2000

// explanation is the answer's explanation: the "explanation" of its JSON object, else its
// prose outside the code.
func explanation(rest string) string {
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return ""
	}
	if b, err := ExtractJSON(rest); err == nil {
		var j struct {
			Explanation string `json:"explanation"`
		}
		if json.Unmarshal(b, &j) == nil && strings.TrimSpace(j.Explanation) != "" {
			return fence.Truncate(strings.TrimSpace(j.Explanation), maxExplanationBytes)
		}
	}
	return fence.Truncate(rest, maxExplanationBytes)
}

// checkContent rejects file text no file should have: NUL bytes, or the whole file wrapped
// in a markdown fence (a model habit) for a file that is not Markdown.
func checkContent(rpc, at, filePath, content string) error {
	if strings.ContainsRune(content, 0) {
		return parseErr(rpc, "%s contains a NUL character", at)
	}
	if markdown(filePath) {
		return nil
	}
	if filePath != "" && strings.HasPrefix(strings.TrimSpace(content), "```") {
		return parseErr(rpc, "%s is wrapped in a markdown fence; give the raw file text only", at)
	}
	return nil
}

// GenerateFileResponse converts a read answer.
func GenerateFileResponse(req *aiv1.GenerateFileRequest, r *FileResult) *aiv1.GenerateFileResponse {
	f := req.GetFile()
	change := &typev1.FileChange{Path: f.GetPath(), Action: f.GetAction()}
	if len(r.Edits) > 0 {
		change.Edits = r.Edits
	} else {
		change.Content = r.Content
	}
	return &aiv1.GenerateFileResponse{Change: change, Content: r.Content}
}

// FixFileResponse converts a read answer.
func FixFileResponse(r *FileResult) *aiv1.FixFileResponse {
	return &aiv1.FixFileResponse{Content: r.Content, Explanation: r.Explanation, Edits: r.Edits, RelatedChanges: r.Related}
}

// ParseGenerateFile reads a single GenerateFile reply (no repair rounds; the service uses a
// FileSession).
func ParseGenerateFile(raw string, req *aiv1.GenerateFileRequest) (*aiv1.GenerateFileResponse, error) {
	r, err := NewGenerateSession(req).Read(raw, false)
	if err != nil {
		return nil, err
	}
	return GenerateFileResponse(req, r), nil
}

// ParseFixFile reads a single FixFile reply (no repair rounds; the service uses a
// FileSession).
func ParseFixFile(raw string, req *aiv1.FixFileRequest) (*aiv1.FixFileResponse, error) {
	r, err := NewFixSession(req).Read(raw, false)
	if err != nil {
		return nil, err
	}
	return FixFileResponse(r), nil
}
