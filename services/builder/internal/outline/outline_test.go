package outline

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goSrc = `// Package store keeps users.
package store

import (
	"fmt"
	"strings"
)

// User is a user.
type User struct {
	// ID is the user's number.
	ID   int // never 0
	Name string
}

// Finder finds users.
type Finder interface {
	// Find returns the user with id, or an error.
	Find(id int) (*User, error)
}

// MaxUsers bounds a store.
const MaxUsers = 100

var onSave = func(u *User) { fmt.Println("saved", u.Name) } // logs

var defaultNames = []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan"}

// New makes a user.
func New(id int, name string) *User {
	// trim the name: people paste spaces
	return &User{ID: id, Name: strings.TrimSpace(name)}
}

func (u *User) String() string {
	if u == nil {
		return "<nil>" // a nil user prints
	}
	return fmt.Sprintf("%d:%s", u.ID, u.Name)
}
`

const tsSrc = `import { db } from './db'
import type { Id } from './types'

/**
 * A user of the store.
 */
export interface User {
  id: Id
  name: string
}

export type Role = 'admin'
  | 'user'

const secret = 'x'

// greet says hello; the text is "// not a comment".
export function greet(user: User): string {
  const s = ` + "`hello ${user.name} {`" + `
  // inside the body
  return s
}

export async function load(
  id: Id,
  opts: { force: boolean },
): Promise<User> {
  if (opts.force) { return db.get(id) }
  throw new Error('not found')
}

export const handler = async (req: Request) => {
  return new Response('ok')
}

// Store keeps users in memory.
export class Store extends Base {
  private items: User[] = []
  constructor(private readonly name: string) {
    super()
  }
  /** size is how many users the store holds. */
  get size(): number { return this.items.length }

  // add appends one user.
  add(item: User): void {
    // no duplicates check
    this.items.push(item)
  }
}

export { db } from './db'
app.listen(3000)
`

const pySrc = `"""Users."""
import os
from typing import List

MAX_USERS = 10
NAMES: List[str] = [
    "a",
    "b",
]

# User is one person.
@dataclass
class User(Base):
    """A user."""
    id: int
    name: str = "x"

    @property
    def display(self) -> str:
        """Doc."""
        return self.name.title()

    async def save(self,
                   force: bool = False) -> None:
        if force:
            os.sync()
        # done saving

class Empty:
    pass

def double(x): return x * 2

def main() -> None:
    y = 3
    def inner():
        return y

if __name__ == "__main__":
    main()
`

func TestFile(t *testing.T) {
	tests := []struct {
		name, path, src string
		want            []string // substrings (whole lines) the outline has
		wantNot         []string // substrings it must not have
		exact           string   // the whole outline, when set
	}{
		{
			name: "go: declarations with their doc comments, bodies dropped",
			path: "store/store.go",
			src:  goSrc,
			exact: `// Package store keeps users.
package store

import (
	"fmt"
	"strings"
)

// User is a user.
type User struct {
	// ID is the user's number.
	ID   int // never 0
	Name string
}

// Finder finds users.
type Finder interface {
	// Find returns the user with id, or an error.
	Find(id int) (*User, error)
}

// MaxUsers bounds a store.
const MaxUsers = 100

var onSave = ...

var defaultNames = ...

// New makes a user.
func New(id int, name string) *User

func (u *User) String() string`,
		},
		{
			name: "go that does not parse falls back to the line scan",
			path: "bad.go",
			src: "// Package bad is broken.\npackage bad\n\n// T is a thing.\ntype T struct {\n\tA int\n}\n\n" +
				"// F prints a.\nfunc F(a int) int {\n\tfmt.Println(a\n\treturn a\n}\n\nfunc G() {\n",
			exact: "// Package bad is broken.\npackage bad\n// T is a thing.\ntype T struct {\n\tA int\n}\n// F prints a.\nfunc F(a int) int { ... }\nfunc G() { ... }",
		},
		{
			name:    "go: an unterminated comment or string still outlines",
			path:    "worse.go",
			src:     "package worse\n\nfunc A() string {\n\treturn \"unterminated\n}\n\n/* never closed\nfunc B() {}\n",
			want:    []string{"package worse", "func A() string { ... }"},
			wantNot: []string{"func B"},
		},
		{
			name: "typescript",
			path: "web/src/store.ts",
			src:  tsSrc,
			exact: `/**
 * A user of the store.
 */
export interface User {
  id: Id
  name: string
}
export type Role = 'admin'
  | 'user'
const secret = 'x'
// greet says hello; the text is "// not a comment".
export function greet(user: User): string { ... }
export async function load(
  id: Id,
  opts: { force: boolean },
): Promise<User> { ... }
export const handler = async (req: Request) => { ... }
// Store keeps users in memory.
export class Store extends Base {
  private items: User[] = []
  constructor(private readonly name: string) { ... }
  /** size is how many users the store holds. */
  get size(): number { ... }
  // add appends one user.
  add(item: User): void { ... }
}
export { db } from './db'`,
		},
		{
			name:    "typescript that does not balance",
			path:    "web/src/broken.tsx",
			src:     "export function A() {\n  return <div>{'}'}</div>\n\nexport const B = 1\n",
			want:    []string{"export function A() { ... }"},
			wantNot: []string{"<div>"},
		},
		{
			name: "javascript",
			path: "lib/util.mjs",
			src:  "// add adds.\nexport function add(a, b) {\n  return a + b\n}\n\n// not kept: a blank line follows\n\nexport default class Thing {\n  run() {\n    return 1\n  }\n}\n",
			exact: "// add adds.\nexport function add(a, b) { ... }\n" +
				"export default class Thing {\n  run() { ... }\n}",
		},
		{
			name: "python",
			path: "app/users.py",
			src:  pySrc,
			exact: `"""Users."""
MAX_USERS = 10
NAMES: List[str] = ...
# User is one person.
@dataclass
class User(Base):
    """A user."""
    id: int
    name: str = "x"
    @property
    def display(self) -> str:
        """Doc."""
        ...
    async def save(self,
                   force: bool = False) -> None:
        ...
class Empty:
    ...
def double(x): ...
def main() -> None:
    ...`,
		},
		{
			name:    "python: a long docstring is cut and closed",
			path:    "long.py",
			src:     "def f():\n    '''" + strings.Repeat("line\n    ", 30) + "'''\n    return 1\n",
			want:    []string{"def f():\n    '''line\n", "    ...'''\n    ..."},
			wantNot: []string{"return 1"},
		},
		{
			name:    "python that does not parse",
			path:    "broken.py",
			src:     "def f(x:\n    return (x\n\nclass C:\n    def m(self): return 1\n",
			want:    []string{"def f(x:", "class C:\n    def m(self): ..."},
			wantNot: []string{"return 1"},
		},
		{
			name:  "other files: first 20 lines",
			path:  "README.md",
			src:   strings.Repeat("line\n", 30),
			exact: strings.TrimSuffix(strings.Repeat("line\n", 20), "\n"),
		},
		{
			name:  "short other file",
			path:  "Makefile",
			src:   "all:\n\tgo build\n",
			exact: "all:\n\tgo build",
		},
		{
			name: "empty file",
			path: "empty.go",
			src:  "",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := File(tc.path, tc.src)
			if tc.exact != "" && got != tc.exact {
				t.Errorf("outline =\n%s\nwant\n%s", got, tc.exact)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("outline lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("outline has %q:\n%s", w, got)
				}
			}
		})
	}
}

// The builder's own Go files, outlined: every top-level declaration is there with the
// first line of its doc comment, no statement of a function body is, and the outline
// parses as Go once its elided values are filled in.
func TestGoFilesOfThisRepository(t *testing.T) {
	var files []string
	err := filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) < 20 {
		t.Fatalf("walk: %v (%d files)", err, len(files))
	}
	for _, p := range files {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got := File(p, string(src))
		if len(got) >= len(src) && len(src) > 200 {
			t.Errorf("%s: outline (%d bytes) is not smaller than the file (%d)", p, len(got), len(src))
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parser.ParseFile(token.NewFileSet(), p, strings.ReplaceAll(got, "= ...", "= 0"), 0); err != nil {
			t.Errorf("%s: the outline does not parse: %v\n%s", p, err, got)
		}
		for _, d := range f.Decls {
			var name string
			var doc *ast.CommentGroup
			switch d := d.(type) {
			case *ast.FuncDecl:
				name, doc = "func ", d.Doc
				if d.Recv != nil {
					name += "("
				} else {
					name += d.Name.Name
				}
				if d.Body != nil && len(d.Body.List) > 0 {
					first := fset.Position(d.Body.List[0].Pos())
					line := strings.TrimSpace(strings.Split(string(src), "\n")[first.Line-1])
					if len(line) > 30 && strings.Contains(got, "\n\t"+line+"\n") {
						t.Errorf("%s: the outline has %s's body line %q", p, d.Name.Name, line)
					}
				}
			case *ast.GenDecl:
				name, doc = d.Tok.String()+" ", d.Doc
			}
			if !strings.Contains(got, name) {
				t.Errorf("%s: the outline lacks %q", p, name)
			}
			if doc != nil && !strings.Contains(got, strings.Split(doc.Text(), "\n")[0]) {
				t.Errorf("%s: the outline lacks the doc %q", p, strings.Split(doc.Text(), "\n")[0])
			}
		}
	}
}

func TestHead(t *testing.T) {
	if got := Head("a\nb\nc\n", 2); got != "a\nb" {
		t.Errorf("Head = %q", got)
	}
	if got := Head("a", 5); got != "a" {
		t.Errorf("Head = %q", got)
	}
}
