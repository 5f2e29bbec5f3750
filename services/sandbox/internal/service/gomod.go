package service

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	sbvalidate "github.com/thefold/thefold/services/sandbox/internal/validate"
)

// gomodMemo keeps the go command's answers to the validation pipeline's question of where
// a Go module is (sbvalidate.GoModuleQuery, asked before every validation of the module:
// three times in the README's demo task, a third of a second each in a docker sandbox) per
// sandbox and directory, keyed also by the state of every file that could change the
// answer: the directory's go.mod and any go.work from it up to the workspace root (size and
// modification time; a missing file is part of the key too). A changed or new file is a new
// key, so an answer is never used for a workspace it was not given for. Bounded: when full
// it starts again.
type gomodMemo struct {
	mu      sync.Mutex
	answers map[string]string
}

// maxGomodAnswers bounds the memo (a key is a sandbox, a directory and a few file states).
const maxGomodAnswers = 4096

// key is the memo's key for sandbox's dir (workspace-relative, "" or "." the root) in the
// workspace at root on the host.
func (m *gomodMemo) key(sandbox, root, dir string) string {
	dir = path.Clean("/" + filepath.ToSlash(dir))[1:]
	parts := []string{sandbox, dir}
	state := func(rel string) {
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			parts = append(parts, rel+":-")
			return
		}
		parts = append(parts, fmt.Sprintf("%s:%d:%d:%s", rel, fi.Size(), fi.ModTime().UnixNano(), fi.Mode().Type()))
	}
	state(path.Join(dir, "go.mod"))
	for d := dir; ; d = path.Dir(d) {
		if d == "" {
			d = "."
		}
		state(path.Join(d, "go.work"))
		if d == "." {
			break
		}
	}
	return strings.Join(parts, "\x00")
}

func (m *gomodMemo) get(key string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.answers[key]
	return v, ok
}

func (m *gomodMemo) put(key, answer string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.answers == nil || len(m.answers) >= maxGomodAnswers {
		m.answers = map[string]string{}
	}
	m.answers[key] = answer
}

// isGoEnvGOMOD reports whether argv asks sbvalidate.GoModuleQuery.
func isGoEnvGOMOD(argv []string) bool { return slices.Equal(argv, sbvalidate.GoModuleQuery) }

// goodGOMOD reports whether a run of sbvalidate.GoModuleQuery gave an answer worth keeping: it ran, and
// named a go.mod.
func goodGOMOD(exit int, stdout []byte) bool {
	return exit == 0 && strings.HasSuffix(strings.TrimSpace(string(stdout)), "/go.mod")
}
