package prompts

import (
	"fmt"
	"github.com/thefold/thefold/pkg/fence"

	"github.com/thefold/thefold/services/ai/internal/llm"
)

// Fit makes req — this prompt's request — fit a model's context window of limit tokens (the
// window less the reply's room), counting with count. It takes out context by priority:
// first the blocks the prompt marked droppable (repository outlines, then dependency files
// from the farthest), each replaced by a one-line note; then, if that is not enough, it
// cuts the longest context block in its middle. The instructions and the call's
// specifics are never cut. ok is false when the prompt cannot be made to fit. A request
// that fits is returned unchanged.
func (p *Prompt) Fit(req llm.Request, limit int, count func(string) int) (out llm.Request, ok bool) {
	if len(req.Messages) == 0 || len(req.Messages[0].Blocks) == 0 {
		return req, total(req, count) <= limit
	}
	n := total(req, count)
	if n <= limit {
		return req, true
	}
	blocks := append([]llm.Block(nil), req.Messages[0].Blocks...)
	sizes := make([]int, len(blocks))
	for i, b := range blocks {
		sizes[i] = count(b.Text)
	}
	for _, i := range p.drop {
		if n <= limit {
			break
		}
		if i >= len(blocks)-1 {
			continue // never the specifics
		}
		note := fmt.Sprintf("[%s left out: the prompt is over the model's context window]", p.dropNames[i])
		n += count(note) - sizes[i]
		blocks[i].Text, sizes[i] = note, count(note)
	}
	// Then the longest context block, cut in its middle, until it fits.
	for tries := 0; n > limit && tries < 4; tries++ {
		longest := -1
		for i := range blocks[:len(blocks)-1] {
			if longest < 0 || sizes[i] > sizes[longest] {
				longest = i
			}
		}
		over := n - limit
		if longest < 0 || sizes[longest] <= over+64 {
			break
		}
		text := blocks[longest].Text
		keep := int(float64(len(text)) * float64(sizes[longest]-over-64) / float64(sizes[longest]))
		blocks[longest].Text = fence.TruncateMiddle(text, max(keep, 0))
		after := count(blocks[longest].Text)
		n += after - sizes[longest]
		sizes[longest] = after
	}
	if n > limit {
		return req, false
	}
	out = req
	out.Messages = append([]llm.Message(nil), req.Messages...)
	out.Messages[0].Blocks = blocks
	return out, true
}

// total is the tokens of req's system text and messages.
func total(req llm.Request, count func(string) int) int {
	n := 0
	for _, s := range req.System {
		n += count(s.Text)
	}
	for _, m := range req.Messages {
		for _, b := range m.Blocks {
			n += count(b.Text)
		}
	}
	return n
}

// SurelyFits reports whether req fits limit tokens without counting them: a cl100k token is
// at least one byte, so a text's count is at most its length, scale times that for a
// provider whose tokens run scale times cl100k's (each text's scaled count rounded, as the
// engine's count does). Counting is the slow part of fitting (tens of milliseconds for a
// large prompt, most of a GenerateFile's own time when the model answers at once) and most
// prompts are far inside the window, so they skip it; false means only "count to know".
func SurelyFits(req llm.Request, limit int, scale float64) bool {
	bound := 0.0
	add := func(s string) { bound += float64(len(s))*scale + 0.5 }
	for _, s := range req.System {
		add(s.Text)
	}
	for _, m := range req.Messages {
		for _, b := range m.Blocks {
			add(b.Text)
		}
	}
	return bound <= float64(limit)
}
