package engine

import (
	"fmt"
	"slices"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"

	"github.com/thefold/thefold/services/ai/internal/llm"
)

// forVision is req as model m is sent it: unchanged when m takes images (the registry's
// supports_vision), else with every image replaced by a line saying it was left out, so
// the model knows there was one instead of answering as if there were none. req is not
// changed: the next candidate may take images.
func forVision(req llm.Request, m *aiv1.Model) llm.Request {
	if m.GetSupportsVision() || !hasImages(req) {
		return req
	}
	msgs := slices.Clone(req.Messages)
	for i, msg := range msgs {
		if !slices.ContainsFunc(msg.Blocks, isImage) {
			continue
		}
		blocks := make([]llm.Block, len(msg.Blocks))
		for j, b := range msg.Blocks {
			if isImage(b) {
				b = llm.Block{Kind: llm.BlockText, Cache: b.Cache, Text: fmt.Sprintf(
					"[An image (%s, %d bytes) was left out here: model %s does not take images.]",
					b.MediaType, len(b.Data), m.GetName())}
			}
			blocks[j] = b
		}
		msgs[i].Blocks = blocks
	}
	req.Messages = msgs
	return req
}

func hasImages(req llm.Request) bool {
	for _, m := range req.Messages {
		if slices.ContainsFunc(m.Blocks, isImage) {
			return true
		}
	}
	return false
}

func isImage(b llm.Block) bool { return b.Kind == llm.BlockImage }
