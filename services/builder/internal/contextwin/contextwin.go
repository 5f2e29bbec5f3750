// Package contextwin builds the context window of one file's generation: the files it
// depends on, in full while they fit a token budget, else as outlines (package outline),
// else left out.
package contextwin

import (
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"

	"github.com/thefold/thefold/services/builder/internal/outline"
)

// Dep is one file the generated file depends on.
type Dep struct {
	Path, Content string
}

// Build returns the context files for deps, in the order of deps, within budget tokens as
// count counts them (callers pass tokens.Count). Each dep is given in full when its content
// still fits what is left of the budget; otherwise its outline, marked Truncated, when that
// fits; otherwise it is left out (and later, smaller deps may still fit). full and outlined
// list the paths given in full and as outlines. A budget of 0 or less gives nothing.
func Build(deps []Dep, budget int, count func(string) int) (files []*aiv1.ContextFile, full []string, outlined []string) {
	if budget <= 0 {
		return nil, nil, nil
	}
	if count == nil {
		count = func(s string) int { return (len(s) + 3) / 4 }
	}
	used := 0
	for _, d := range deps {
		if n := count(d.Content); used+n <= budget {
			used += n
			files = append(files, &aiv1.ContextFile{Path: d.Path, Content: d.Content})
			full = append(full, d.Path)
			continue
		}
		o := outline.File(d.Path, d.Content)
		if o == "" {
			continue
		}
		if n := count(o); used+n <= budget {
			used += n
			files = append(files, &aiv1.ContextFile{Path: d.Path, Content: o, Truncated: true})
			outlined = append(outlined, d.Path)
		}
	}
	return files, full, outlined
}
