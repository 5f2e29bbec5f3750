package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Gemini's URLs are <base>/<version>/models/<model>:<method>; google.golang.org/genai with
// BackendGeminiAPI uses version v1beta unless HTTPOptions.APIVersion says otherwise, and
// sends Models.EmbedContent to :batchEmbedContents.
var geminiVersions = map[string]bool{"v1beta": true, "v1": true}

type geminiContent struct {
	Role  string            `json:"role"`
	Parts []json.RawMessage `json:"parts"`
}

type geminiPart struct {
	Text         string `json:"text"`
	FunctionCall *struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

// partsText is the text parts carry: text, or a function call's or response's name and
// JSON; other parts (inline data) count by their JSON.
func partsText(parts []json.RawMessage) (string, error) {
	var out []string
	for i, raw := range parts {
		var p geminiPart
		if err := json.Unmarshal(raw, &p); err != nil {
			return "", fmt.Errorf("parts[%d]: %v", i, err)
		}
		switch {
		case p.FunctionCall != nil:
			out = append(out, p.FunctionCall.Name+string(p.FunctionCall.Args))
		case p.FunctionResponse != nil:
			out = append(out, p.FunctionResponse.Name+string(p.FunctionResponse.Response))
		case p.Text != "":
			out = append(out, p.Text)
		default:
			out = append(out, string(raw))
		}
	}
	return strings.Join(out, "\n"), nil
}

type geminiRequest struct {
	Contents          []json.RawMessage `json:"contents"`
	SystemInstruction json.RawMessage   `json:"systemInstruction"`
	Tools             []json.RawMessage `json:"tools"`
	GenerationConfig  struct {
		ThinkingConfig *struct {
			IncludeThoughts bool   `json:"includeThoughts"`
			ThinkingBudget  *int   `json:"thinkingBudget"`
			ThinkingLevel   string `json:"thinkingLevel"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
}

// geminiMaxThinkingBudget is the largest thinkingBudget a Gemini model takes (2.5 Pro's);
// -1 asks for dynamic thinking.
const geminiMaxThinkingBudget = 32768

// thinks reports whether the model thinks: unless the thinking budget is 0.
func (r *geminiRequest) thinks() bool {
	tc := r.GenerationConfig.ThinkingConfig
	return tc == nil || tc.ThinkingBudget == nil || *tc.ThinkingBudget != 0
}

// includesThoughts reports whether thought summaries are asked for.
func (r *geminiRequest) includesThoughts() bool {
	tc := r.GenerationConfig.ThinkingConfig
	return tc != nil && tc.IncludeThoughts && r.thinks()
}

// parseGemini reads a generateContent request into units (system instruction, tools, then
// one per content, the order of Gemini's implicit prefix caching) and the matched text.
func parseGemini(body []byte) (*geminiRequest, []unit, string, error) {
	req, units, text, err := parseGeminiContents(body)
	if err != nil {
		return nil, nil, "", err
	}
	if tc := req.GenerationConfig.ThinkingConfig; tc != nil {
		if b := tc.ThinkingBudget; b != nil && (*b < -1 || *b > geminiMaxThinkingBudget) {
			return nil, nil, "", fmt.Errorf("* GenerateContentRequest.generation_config.thinking_config.thinking_budget: "+
				"the budget %d is invalid; choose -1 (dynamic) or 0 to %d", *b, geminiMaxThinkingBudget)
		}
		if tc.ThinkingBudget != nil && tc.ThinkingLevel != "" {
			return nil, nil, "", fmt.Errorf("* GenerateContentRequest.generation_config.thinking_config: thinking_budget and thinking_level are mutually exclusive")
		}
	}
	return req, units, text, nil
}

func parseGeminiContents(body []byte) (*geminiRequest, []unit, string, error) {
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, "", fmt.Errorf("Invalid JSON payload received. %v", err)
	}
	if len(req.Contents) == 0 {
		return nil, nil, "", fmt.Errorf("* GenerateContentRequest.contents: contents is not specified")
	}
	var units []unit
	var text []string
	if len(req.SystemInstruction) > 0 && string(req.SystemInstruction) != "null" {
		var c geminiContent
		if err := json.Unmarshal(req.SystemInstruction, &c); err != nil {
			return nil, nil, "", fmt.Errorf("systemInstruction: %v", err)
		}
		t, err := partsText(c.Parts)
		if err != nil {
			return nil, nil, "", fmt.Errorf("systemInstruction.%v", err)
		}
		key, _ := canonical("system", req.SystemInstruction)
		units = append(units, unit{key: key, chars: len(t)})
		text = append(text, t)
	}
	if len(req.Tools) > 0 {
		chars := 0
		for i, raw := range req.Tools {
			var t struct {
				FunctionDeclarations []struct {
					Name                 string          `json:"name"`
					Description          string          `json:"description"`
					Parameters           json.RawMessage `json:"parameters"`
					ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
				} `json:"functionDeclarations"`
			}
			if err := json.Unmarshal(raw, &t); err != nil {
				return nil, nil, "", fmt.Errorf("tools[%d]: %v", i, err)
			}
			for _, f := range t.FunctionDeclarations {
				chars += len(f.Name) + len(f.Description) + len(f.Parameters) + len(f.ParametersJSONSchema)
			}
		}
		raw, _ := json.Marshal(req.Tools)
		key, _ := canonical("tools", raw)
		units = append(units, unit{key: key, chars: chars})
	}
	for i, raw := range req.Contents {
		var c geminiContent
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, nil, "", fmt.Errorf("contents[%d]: %v", i, err)
		}
		if c.Role != "" && c.Role != "user" && c.Role != "model" {
			return nil, nil, "", fmt.Errorf("contents[%d].role: Please use a valid role: user, model.", i)
		}
		if len(c.Parts) == 0 {
			return nil, nil, "", fmt.Errorf("contents[%d].parts: must not be empty", i)
		}
		t, err := partsText(c.Parts)
		if err != nil {
			return nil, nil, "", fmt.Errorf("contents[%d].%v", i, err)
		}
		key, _ := canonical("content", raw)
		units = append(units, unit{key: key, chars: len(t)})
		text = append(text, t)
	}
	return &req, units, strings.Join(text, "\n"), nil
}

func (s *Server) gemini(w http.ResponseWriter, r *http.Request) {
	model, method, ok := strings.Cut(r.PathValue("call"), ":")
	known := map[string]string{
		"generateContent":       EndpointGeminiGenerate,
		"streamGenerateContent": EndpointGeminiStream,
		"embedContent":          EndpointGeminiEmbed,
		"batchEmbedContents":    EndpointGeminiBatchEmbed,
	}
	endpoint := known[method]
	if !geminiVersions[r.PathValue("version")] || !ok || model == "" || endpoint == "" {
		writeError(w, dialectGemini, apiError{status: http.StatusNotFound,
			message: fmt.Sprintf("fakellm: no such endpoint: %s %s", r.Method, r.URL.Path), noRetry: true})
		return
	}
	body, err := readBody(r, w)
	rec := s.begin(endpoint, body)
	if err != nil {
		s.finish(rec, model, http.StatusRequestEntityTooLarge, tokens{})
		writeError(w, dialectGemini, apiError{status: http.StatusRequestEntityTooLarge, message: err.Error(), noRetry: true})
		return
	}
	stream := endpoint == EndpointGeminiStream
	if endpoint != EndpointGeminiGenerate && !stream {
		s.geminiEmbed(w, r, rec, model, endpoint, body)
		return
	}
	if stream && r.URL.Query().Get("alt") != "sse" {
		// Without alt=sse the API streams one JSON array, which no SDK here reads.
		s.finish(rec, model, http.StatusBadRequest, tokens{})
		writeError(w, dialectGemini, badRequest("fakellm streams streamGenerateContent only as server-sent events: add ?alt=sse"))
		return
	}
	req, units, text, err := parseGemini(body)
	if err != nil {
		s.finish(rec, model, http.StatusBadRequest, tokens{})
		writeError(w, dialectGemini, badRequest(err.Error()))
		return
	}
	s.mu.Lock()
	entry, failure := s.pick(familyGemini, endpoint, text)
	var t tokens
	if failure == nil && entry.Error == nil {
		t = s.automaticCache(familyGemini, model, units)
	}
	s.mu.Unlock()
	if stream {
		s.streamed(rec)
		s.replyStream(w, r, rec, model, dialectGemini, entry, failure, t,
			func(e Response, t *tokens) { t.output, _, _ = geminiOutput(req, e) },
			func(es *eventStream, e Response, t tokens) { s.geminiStream(es, req, model, e, t) })
		return
	}
	s.reply(w, r, rec, model, dialectGemini, entry, failure, t, func(e Response, t *tokens) any {
		return s.geminiAnswer(req, model, e, t)
	})
}

// geminiOutput counts an answer's output: its candidates' tokens and the thoughts', which
// are billed as output beside them.
func geminiOutput(req *geminiRequest, e Response) (output, candidates, thoughts int) {
	if e.Thinking != "" && req.thinks() {
		thoughts = estimateTokens(len(e.Thinking))
	}
	candidates = outputTokens(replyText(e), e.OutputTokens)
	return candidates + thoughts, candidates, thoughts
}

// geminiUsage is an answer's usageMetadata.
func geminiUsage(req *geminiRequest, e Response, t tokens) map[string]any {
	_, candidates, thoughts := geminiOutput(req, e)
	usage := map[string]any{
		"promptTokenCount":     t.input,
		"candidatesTokenCount": candidates,
		"totalTokenCount":      t.input + t.output,
	}
	if thoughts > 0 {
		usage["thoughtsTokenCount"] = thoughts
	}
	if t.cacheRead > 0 {
		usage["cachedContentTokenCount"] = t.cacheRead
	}
	return usage
}

// geminiFunctionCall is a call's part. Like the Gemini API (unlike Vertex), no call id:
// clients must pair calls by name.
func geminiFunctionCall(tc ToolCall) map[string]any {
	return map[string]any{"functionCall": map[string]any{"name": tc.Name, "args": toolInput(tc)}}
}

func (s *Server) geminiAnswer(req *geminiRequest, model string, e Response, t *tokens) any {
	parts := []map[string]any{}
	if e.Thinking != "" && req.includesThoughts() {
		parts = append(parts, map[string]any{"text": e.Thinking, "thought": true})
	}
	if e.Text != "" {
		parts = append(parts, map[string]any{"text": e.Text})
	}
	for _, tc := range e.ToolCalls {
		parts = append(parts, geminiFunctionCall(tc))
	}
	t.output, _, _ = geminiOutput(req, e)
	return map[string]any{
		"candidates": []map[string]any{{
			"content":      map[string]any{"role": "model", "parts": parts},
			"finishReason": stopReason(e).gemini(),
			"index":        0,
		}},
		"usageMetadata": geminiUsage(req, e, *t),
		"modelVersion":  model,
		"responseId":    s.nextID("resp"),
	}
}

// geminiStream writes the answer as streamGenerateContent's server-sent events: one
// GenerateContentResponse per part (thought summaries and text in pieces, each function
// call whole), data lines only. Every chunk has the prompt's usage; the last one the
// finishReason and the whole usage.
func (s *Server) geminiStream(es *eventStream, req *geminiRequest, model string, e Response, t tokens) {
	type piece struct {
		part map[string]any
		text bool
	}
	var pieces []piece
	if e.Thinking != "" && req.includesThoughts() {
		for _, c := range chunks(e.Thinking, e.ChunkSize) {
			pieces = append(pieces, piece{part: map[string]any{"text": c, "thought": true}})
		}
	}
	texts := chunks(e.Text, e.ChunkSize)
	for _, c := range texts {
		pieces = append(pieces, piece{part: map[string]any{"text": c}, text: true})
	}
	for _, tc := range e.ToolCalls {
		pieces = append(pieces, piece{part: geminiFunctionCall(tc)})
	}
	id := s.nextID("resp")
	prompt := map[string]any{"promptTokenCount": t.input, "totalTokenCount": t.input}
	if t.cacheRead > 0 {
		prompt["cachedContentTokenCount"] = t.cacheRead
	}
	sentTexts := 0
	for i, p := range pieces {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": []map[string]any{p.part}}, "index": 0}
		chunk := map[string]any{"candidates": []map[string]any{cand}, "usageMetadata": prompt, "modelVersion": model, "responseId": id}
		if i == len(pieces)-1 {
			cand["finishReason"] = stopReason(e).gemini()
			chunk["usageMetadata"] = geminiUsage(req, e, t)
		}
		es.delta("", chunk, p.text)
		if p.text {
			sentTexts++
			if es.breaking(sentTexts == len(texts)) {
				es.abort()
			}
		}
	}
}

type geminiEmbedRequest struct {
	Content              geminiContent `json:"content"`
	OutputDimensionality int           `json:"outputDimensionality"`
}

func (s *Server) geminiEmbed(w http.ResponseWriter, r *http.Request, rec *Recorded, model, endpoint string, body []byte) {
	var reqs []geminiEmbedRequest
	var err error
	if endpoint == EndpointGeminiBatchEmbed {
		var batch struct {
			Requests []geminiEmbedRequest `json:"requests"`
		}
		if err = json.Unmarshal(body, &batch); err == nil && len(batch.Requests) == 0 {
			err = fmt.Errorf("* BatchEmbedContentsRequest.requests: requests is not specified")
		}
		reqs = batch.Requests
	} else {
		var one geminiEmbedRequest
		err = json.Unmarshal(body, &one)
		reqs = []geminiEmbedRequest{one}
	}
	texts := make([]string, len(reqs))
	for i, q := range reqs {
		if err != nil {
			break
		}
		if q.OutputDimensionality < 0 || q.OutputDimensionality > maxDimensions {
			err = fmt.Errorf("requests[%d].outputDimensionality: must be between 1 and %d", i, maxDimensions)
			break
		}
		if texts[i], err = partsText(q.Content.Parts); err == nil && texts[i] == "" {
			err = fmt.Errorf("requests[%d].content: * EmbedContentRequest.content: contents is not specified", i)
		}
	}
	if err != nil {
		s.finish(rec, model, http.StatusBadRequest, tokens{})
		writeError(w, dialectGemini, badRequest(err.Error()))
		return
	}
	s.mu.Lock()
	entry, failure := s.pick(familyEmbeddings, endpoint, strings.Join(texts, "\n"))
	dims := make([]int, len(reqs))
	for i, q := range reqs {
		dims[i] = s.embeddingDimensions(q.OutputDimensionality)
	}
	s.mu.Unlock()
	t := tokens{input: inputTokens(texts)}
	s.reply(w, r, rec, model, dialectGemini, entry, failure, t, func(Response, *tokens) any {
		vecs := make([]map[string]any, len(texts))
		for i, text := range texts {
			vecs[i] = map[string]any{"values": Embed(text, dims[i])}
		}
		if endpoint == EndpointGeminiEmbed {
			return map[string]any{"embedding": vecs[0]}
		}
		return map[string]any{"embeddings": vecs}
	})
}
