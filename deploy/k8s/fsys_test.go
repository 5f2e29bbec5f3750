package k8s

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// copyTree copies the manifests (this directory's kustomize files, not its Go module) into
// an in-memory file system at dst, for tests that add kustomizations of their own.
func copyTree(t *testing.T, dst string) filesys.FileSystem {
	t.Helper()
	fsys := filesys.MakeFsInMemory()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(path) {
		case ".yaml", ".env", ".sh":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return fsys.WriteFile(filepath.Join(dst, path), b)
	})
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}

func write(t *testing.T, fsys filesys.FileSystem, path, content string) {
	t.Helper()
	if err := fsys.WriteFile(path, []byte(strings.TrimLeft(content, "\n"))); err != nil {
		t.Fatal(err)
	}
}
