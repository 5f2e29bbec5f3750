package prompts

import (
	"path"
	"strings"

	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/textedit"
)

// editsAboveLines is where the service switches an unspecified form to edits: beyond it,
// rewriting a file costs more output tokens (and more chances to drop a line) than editing.
const editsAboveLines = 80

// EffectiveForm is the answer form a GenerateFile or FixFile call uses: CREATE is always the
// whole file, and so is any change to an empty file (edits need text to match); an explicit
// form is kept; CHANGE_FORM_UNSPECIFIED becomes edits for a MODIFY of a file over 80 lines
// and the whole file otherwise.
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
// token, plus JSON escaping), within what models answer at most.
func fileMaxTokens(form aiv1.ChangeForm, existing string) int {
	if form == aiv1.ChangeForm_CHANGE_FORM_EDITS {
		return 16000
	}
	return min(max(16000, len(existing)/3+4000), 64000)
}

// fileContextView is the block GenerateFile and FixFile share.
type fileContextView struct {
	Task *aiv1.TaskSpec
	Deps []*aiv1.ContextFile
}

// fileWork renders the shared system text and context block around one call's specifics.
func fileWork(rpc string, task *aiv1.TaskSpec, deps []*aiv1.ContextFile, guidance, specificsName string,
	specifics any, schema *Schema, maxTokens int) (*Prompt, error) {
	p := parts{rpc: rpc, guidance: guidance, schema: schema, maxTokens: maxTokens}
	var err error
	if p.system, err = render("file_work.system", nil); err != nil {
		return nil, err
	}
	head, err := render("file_work.context", fileContextView{Task: task, Deps: deps})
	if err != nil {
		return nil, err
	}
	// One block per dependency file, in the given order: a build's next file usually
	// depends on this file's dependencies plus this file, so its prompt extends this
	// prompt block by block, and the provider's cache (which looks back over block
	// boundaries) serves the shared part to the next file's first call too.
	p.context = []string{head}
	for _, d := range deps {
		p.context = append(p.context, fenceFile("file", d.GetPath(), d.GetContent(), d.GetTruncated()))
	}
	if p.specifics, err = render(specificsName, specifics); err != nil {
		return nil, err
	}
	return assemble(p), nil
}

func fileSchema(prefix string, form aiv1.ChangeForm) *Schema {
	if form == aiv1.ChangeForm_CHANGE_FORM_EDITS {
		return schemaFor(prefix + "_edits")
	}
	return schemaFor(prefix + "_whole")
}

// GenerateFile builds the prompt that writes one planned file. Skills, conventions and
// code patterns form the second system segment; the project structure and the file spec
// are the call's specifics, so the context block (task and dependency files) is the one
// FixFile sends for the same file.
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
		Path, Description, Existing string
		Modify, Edits               bool
		Structure                   []string
	}{
		Path: f.GetPath(), Description: f.GetDescription(), Existing: f.GetExistingContent(),
		Modify: f.GetAction() == typev1.FileAction_FILE_ACTION_MODIFY, Edits: form == aiv1.ChangeForm_CHANGE_FORM_EDITS,
		Structure: req.GetProjectStructure(),
	}
	guidance := guidanceSegment(req.GetSkills(), req.GetConventions(), req.GetPatterns())
	return fileWork("GenerateFile", req.GetTask(), req.GetDependencyFiles(), guidance, "generate_file.specifics", v,
		fileSchema("generate_file", form), fileMaxTokens(form, f.GetExistingContent()))
}

// FixFile builds the prompt that fixes one file's diagnostics. Later attempts are told the
// earlier ones failed. Given the skills, conventions and patterns GenerateFile had, its
// system segments and context block are GenerateFile's, byte for byte: the provider's
// prompt cache serves the whole prefix to the fix loop.
func FixFile(req *aiv1.FixFileRequest) (*Prompt, error) {
	form := EffectiveForm(typev1.FileAction_FILE_ACTION_MODIFY, req.GetContent(), req.GetForm())
	v := struct {
		Path, Content, ErrorOutput string
		Errors                     []*typev1.Diagnostic
		Attempt                    int32
		Edits                      bool
	}{
		Path: req.GetPath(), Content: req.GetContent(), ErrorOutput: req.GetErrorOutput(), Errors: req.GetErrors(),
		Attempt: req.GetAttempt(), Edits: form == aiv1.ChangeForm_CHANGE_FORM_EDITS,
	}
	guidance := guidanceSegment(req.GetSkills(), req.GetConventions(), req.GetPatterns())
	return fileWork("FixFile", req.GetTask(), req.GetDependencyFiles(), guidance, "fix_file.specifics", v,
		fileSchema("fix_file", form), fileMaxTokens(form, req.GetContent()))
}

type editJSON struct {
	OldText       string `json:"old_text"`
	NewText       string `json:"new_text"`
	ExpectedCount int32  `json:"expected_count"`
}

// applyEdits applies the answer's edits to the real (unsanitised) content; edits that do
// not apply are a ParseError quoting textedit's explanation, for the repair round.
func applyEdits(rpc, content string, es []editJSON) (string, []*typev1.Edit, error) {
	edits := make([]*typev1.Edit, 0, len(es))
	for _, e := range es {
		edits = append(edits, &typev1.Edit{OldText: e.OldText, NewText: e.NewText, ExpectedCount: e.ExpectedCount})
	}
	out, err := textedit.Apply(content, edits)
	if err != nil {
		return "", nil, parseErr(rpc, "at /edits: the edits do not apply to the current content: %v. "+
			"Copy each old_text exactly from the current content, as it is after the edits before it", err)
	}
	if err := checkContent(rpc, "/edits", "", out); err != nil {
		return "", nil, err
	}
	return out, edits, nil
}

// checkContent rejects file text no file should have: NUL bytes, or the whole file wrapped
// in a markdown fence (a model habit) for a file that is not Markdown.
func checkContent(rpc, at, filePath, content string) error {
	if strings.ContainsRune(content, 0) {
		return parseErr(rpc, "at %s: the file text contains a NUL character", at)
	}
	switch strings.ToLower(path.Ext(filePath)) {
	case ".md", ".markdown", ".mdx":
		return nil
	}
	if filePath != "" && strings.HasPrefix(strings.TrimSpace(content), "```") {
		return parseErr(rpc, "at %s: the file text is wrapped in a markdown fence; give the raw file text only", at)
	}
	return nil
}

// ParseGenerateFile converts GenerateFile's answer in the form the request asked for (see
// EffectiveForm). Edits are applied to the existing content; the response carries them and
// the resulting file.
func ParseGenerateFile(raw string, req *aiv1.GenerateFileRequest) (*aiv1.GenerateFileResponse, error) {
	const rpc = "GenerateFile"
	f := req.GetFile()
	form := EffectiveForm(f.GetAction(), f.GetExistingContent(), req.GetForm())
	change := &typev1.FileChange{Path: f.GetPath(), Action: f.GetAction()}
	if form == aiv1.ChangeForm_CHANGE_FORM_EDITS {
		var a struct {
			Edits []editJSON `json:"edits"`
		}
		if err := decode(rpc, fileSchema("generate_file", form), raw, &a); err != nil {
			return nil, err
		}
		content, edits, err := applyEdits(rpc, f.GetExistingContent(), a.Edits)
		if err != nil {
			return nil, err
		}
		change.Edits = edits
		return &aiv1.GenerateFileResponse{Change: change, Content: content}, nil
	}
	var a struct {
		Content string `json:"content"`
	}
	if err := decode(rpc, fileSchema("generate_file", form), raw, &a); err != nil {
		return nil, err
	}
	if err := checkContent(rpc, "/content", f.GetPath(), a.Content); err != nil {
		return nil, err
	}
	change.Content = a.Content
	return &aiv1.GenerateFileResponse{Change: change, Content: a.Content}, nil
}

// ParseFixFile converts FixFile's answer in the form the request asked for: the fixed file,
// the explanation and, for edits, the edits applied to the request's content.
func ParseFixFile(raw string, req *aiv1.FixFileRequest) (*aiv1.FixFileResponse, error) {
	const rpc = "FixFile"
	form := EffectiveForm(typev1.FileAction_FILE_ACTION_MODIFY, req.GetContent(), req.GetForm())
	var a struct {
		Content     string     `json:"content"`
		Edits       []editJSON `json:"edits"`
		Explanation string     `json:"explanation"`
	}
	if err := decode(rpc, fileSchema("fix_file", form), raw, &a); err != nil {
		return nil, err
	}
	if form == aiv1.ChangeForm_CHANGE_FORM_EDITS {
		content, edits, err := applyEdits(rpc, req.GetContent(), a.Edits)
		if err != nil {
			return nil, err
		}
		return &aiv1.FixFileResponse{Content: content, Explanation: a.Explanation, Edits: edits}, nil
	}
	if err := checkContent(rpc, "/content", req.GetPath(), a.Content); err != nil {
		return nil, err
	}
	return &aiv1.FixFileResponse{Content: a.Content, Explanation: a.Explanation}, nil
}
