package fakellm

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"unicode"
)

const (
	defaultDimensions = 1536
	maxDimensions     = 16384
	// wordSlots is how many coordinates each word touches in the word-hashing part.
	wordSlots = 8
	// identityWeight is the share of the vector that depends on the exact text, so texts with
	// the same words in another order still differ a little.
	identityWeight = 0.25
)

// Embed is the vector fakellm returns for text: deterministic, L2-normalised, of the given
// size. It is not a semantic embedding: each word adds fixed pseudo-random coordinates
// (from a SHA-256 of the word), so texts sharing words have a positive cosine similarity
// and identical texts have similarity 1; a smaller part seeded from a SHA-256 of the whole
// text keeps different texts apart.
func Embed(text string, dimensions int) []float64 {
	if dimensions <= 0 {
		dimensions = defaultDimensions
	}
	words := normalize(wordVector(text, dimensions))
	exact := normalize(textVector(text, dimensions))
	out := make([]float64, dimensions)
	for i := range out {
		if words == nil {
			out[i] = exact[i]
		} else {
			out[i] = words[i] + identityWeight*exact[i]
		}
	}
	return normalize(out)
}

func wordVector(text string, dims int) []float64 {
	v := make([]float64, dims)
	isSep := func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }
	for _, w := range strings.FieldsFunc(strings.ToLower(text), isSep) {
		h := sha256.Sum256([]byte(w))
		for k := range wordSlots {
			x := binary.LittleEndian.Uint32(h[4*k:])
			v[int(x>>1)%dims] += 1 - 2*float64(x&1)
		}
	}
	return v
}

// textVector expands a SHA-256 of the text in counter mode into coordinates in [-1, 1).
func textVector(text string, dims int) []float64 {
	seed := sha256.Sum256([]byte(text))
	v := make([]float64, dims)
	var block [sha256.Size]byte
	for i := range v {
		if i%(sha256.Size/4) == 0 {
			var ctr [8]byte
			binary.LittleEndian.PutUint64(ctr[:], uint64(i))
			block = sha256.Sum256(append(seed[:], ctr[:]...))
		}
		x := binary.LittleEndian.Uint32(block[4*(i%(sha256.Size/4)):])
		v[i] = float64(x)/float64(1<<31) - 1
	}
	return v
}

// normalize scales v to length 1 in place; nil when v is zero.
func normalize(v []float64) []float64 {
	var sum float64
	for _, x := range v {
		sum += x * x
	}
	if sum == 0 {
		return nil
	}
	n := math.Sqrt(sum)
	for i := range v {
		v[i] /= n
	}
	return v
}

// embeddingDimensions is the size for a request naming requested (0: the script's default).
// The caller holds s.mu.
func (s *Server) embeddingDimensions(requested int) int {
	if requested > 0 {
		return requested
	}
	if s.script != nil && s.script.EmbeddingDimensions > 0 {
		return s.script.EmbeddingDimensions
	}
	return defaultDimensions
}

func inputTokens(texts []string) int {
	n := 0
	for _, t := range texts {
		n += estimateTokens(len(t))
	}
	return n
}

type openAIEmbeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	Dimensions     int             `json:"dimensions"`
	EncodingFormat string          `json:"encoding_format"`
}

func parseOpenAIEmbedding(body []byte) (*openAIEmbeddingRequest, []string, error) {
	var req openAIEmbeddingRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, fmt.Errorf("We could not parse the JSON body of your request: %v", err)
	}
	if req.Model == "" {
		return nil, nil, fmt.Errorf("you must provide a model parameter")
	}
	if req.Dimensions < 0 || req.Dimensions > maxDimensions {
		return nil, nil, fmt.Errorf("'dimensions': must be between 1 and %d", maxDimensions)
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		return nil, nil, fmt.Errorf("'encoding_format': must be float or base64")
	}
	var one string
	if json.Unmarshal(req.Input, &one) == nil {
		if one == "" {
			return nil, nil, fmt.Errorf("'input': must not be empty")
		}
		return &req, []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(req.Input, &many); err != nil || len(many) == 0 {
		return nil, nil, fmt.Errorf("'input': must be a non-empty string or list of strings (fakellm takes no token arrays)")
	}
	for i, s := range many {
		if s == "" {
			return nil, nil, fmt.Errorf("'input.%d': must not be empty", i)
		}
	}
	return &req, many, nil
}

func (s *Server) openAIEmbeddings(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r, w)
	rec := s.begin(EndpointOpenAIEmbeddings, body)
	if err != nil {
		s.finish(rec, "", http.StatusRequestEntityTooLarge, tokens{})
		writeError(w, dialectOpenAI, apiError{status: http.StatusRequestEntityTooLarge, message: err.Error(), noRetry: true})
		return
	}
	req, texts, err := parseOpenAIEmbedding(body)
	if err != nil {
		s.finish(rec, "", http.StatusBadRequest, tokens{})
		writeError(w, dialectOpenAI, badRequest(err.Error()))
		return
	}
	s.mu.Lock()
	entry, failure := s.pick(familyEmbeddings, EndpointOpenAIEmbeddings, strings.Join(texts, "\n"))
	dims := s.embeddingDimensions(req.Dimensions)
	s.mu.Unlock()
	t := tokens{input: inputTokens(texts)}
	s.reply(w, r, rec, req.Model, dialectOpenAI, entry, failure, t, func(Response, *tokens) any {
		data := make([]map[string]any, len(texts))
		for i, text := range texts {
			var vec any = Embed(text, dims)
			if req.EncodingFormat == "base64" {
				vec = base64Floats(vec.([]float64))
			}
			data[i] = map[string]any{"object": "embedding", "index": i, "embedding": vec}
		}
		return map[string]any{
			"object": "list", "data": data, "model": req.Model,
			"usage": map[string]any{"prompt_tokens": t.input, "total_tokens": t.input},
		}
	})
}

// base64Floats is OpenAI's base64 encoding: little-endian float32s.
func base64Floats(v []float64) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(x)))
	}
	return base64.StdEncoding.EncodeToString(b)
}
