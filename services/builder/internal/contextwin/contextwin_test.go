package contextwin

import (
	"reflect"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/tokens"
)

const goSrc = `// Package store keeps users.
package store

import (
	"fmt"
	"strings"
)

// User is a user.
type User struct {
	ID   int    // the id
	Name string
}

// Finder finds users.
type Finder interface {
	Find(id int) (*User, error)
}

const MaxUsers = 100

var onSave = func(u *User) { fmt.Println("saved", u.Name) }

// New makes a user.
func New(id int, name string) *User {
	return &User{ID: id, Name: strings.TrimSpace(name)}
}

func (u *User) String() string {
	if u == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%d:%s", u.ID, u.Name)
}
`

const tsSrc = `import { db } from './db'
import type { Id } from './types'

export interface User {
  id: Id
  name: string
}

export type Role = 'admin'
  | 'user'

const secret = 'x'

export function greet(user: User): string {
  const s = ` + "`hello ${user.name} {`" + `
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

export class Store extends Base {
  private items: User[] = []
  constructor(private readonly name: string) {
    super()
  }
  get size(): number { return this.items.length }
  add(item: User): void {
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

class Empty:
    """Nothing."""

def double(x): return x * 2

def main() -> None:
    y = 3
    def inner():
        return y

if __name__ == "__main__":
    main()
`

func TestOutline(t *testing.T) {
	tests := []struct {
		name, path, src string
		want            []string // substrings (whole lines) the outline has
		wantNot         []string // substrings it must not have
		exact           string   // the whole outline, when set
	}{
		{
			name: "go",
			path: "store/store.go",
			src:  goSrc,
			exact: `package store

import (
	"fmt"
	"strings"
)

type User struct {
	ID   int
	Name string
}

type Finder interface {
	Find(id int) (*User, error)
}

const MaxUsers = 100

var onSave = ...

func New(id int, name string) *User

func (u *User) String() string`,
		},
		{
			name: "go that does not parse falls back to lines",
			path: "bad.go",
			src:  "package bad\n\ntype T struct {\n\tA int\n}\n\nfunc F(a int) int {\n\tfmt.Println(a\n\treturn a\n}\n",
			want: []string{"package bad", "type T struct {\n\tA int\n}", "func F(a int) int { ... }"},
			wantNot: []string{
				"return a",
			},
		},
		{
			name: "typescript",
			path: "web/src/store.ts",
			src:  tsSrc,
			want: []string{
				"export interface User {\n  id: Id\n  name: string\n}",
				"export type Role = 'admin'\n  | 'user'",
				"const secret = 'x'",
				"export function greet(user: User): string { ... }",
				"export async function load(\n  id: Id,\n  opts: { force: boolean },\n): Promise<User> { ... }",
				"export const handler = async (req: Request) => { ... }",
				"export class Store extends Base {\n  private items: User[] = []\n  constructor(private readonly name: string) { ... }\n  get size(): number { ... }\n  add(item: User): void { ... }\n}",
				"export { db } from './db'",
			},
			wantNot: []string{"return s", "throw new Error", "new Response", "super()", "push(item)", "app.listen", "import "},
		},
		{
			name: "javascript",
			path: "lib/util.mjs",
			src:  "export function add(a, b) {\n  return a + b\n}\nexport default class Thing {\n  run() {\n    return 1\n  }\n}\n",
			exact: "export function add(a, b) { ... }\n" +
				"export default class Thing {\n  run() { ... }\n}",
		},
		{
			name: "python",
			path: "app/users.py",
			src:  pySrc,
			exact: `MAX_USERS = 10
NAMES: List[str] = ...
@dataclass
class User(Base):
    id: int
    name: str = "x"
    @property
    def display(self) -> str:
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
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Outline(tc.path, tc.src)
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

func TestBuild(t *testing.T) {
	deps := []Dep{
		{Path: "store/store.go", Content: goSrc},
		{Path: "app/users.py", Content: pySrc},
		{Path: "web/src/store.ts", Content: tsSrc},
	}
	full := 0
	for _, d := range deps[:2] {
		full += tokens.Count(d.Content)
	}
	third := tokens.Count(tsSrc)
	outline := tokens.Count(Outline(deps[2].Path, deps[2].Content))
	if outline >= third {
		t.Fatalf("outline of %s (%d tokens) is not smaller than the file (%d)", deps[2].Path, outline, third)
	}

	type want struct {
		full, outlined []string
		paths          []string
		truncated      []bool
	}
	tests := []struct {
		name   string
		deps   []Dep
		budget int
		want   want
	}{
		{
			name:   "two full, third outlined",
			deps:   deps,
			budget: full + outline,
			want: want{
				full:      []string{"store/store.go", "app/users.py"},
				outlined:  []string{"web/src/store.ts"},
				paths:     []string{"store/store.go", "app/users.py", "web/src/store.ts"},
				truncated: []bool{false, false, true},
			},
		},
		{
			name:   "everything fits",
			deps:   deps,
			budget: full + third,
			want: want{
				full:      []string{"store/store.go", "app/users.py", "web/src/store.ts"},
				paths:     []string{"store/store.go", "app/users.py", "web/src/store.ts"},
				truncated: []bool{false, false, false},
			},
		},
		{
			name:   "third left out when not even its outline fits",
			deps:   deps,
			budget: full + outline - 1,
			want: want{
				full:      []string{"store/store.go", "app/users.py"},
				paths:     []string{"store/store.go", "app/users.py"},
				truncated: []bool{false, false},
			},
		},
		{
			name:   "order of deps kept: outlined first, later full",
			deps:   []Dep{deps[2], {Path: "small.go", Content: "package small\n"}},
			budget: outline + tokens.Count("package small\n"),
			want: want{
				full:      []string{"small.go"},
				outlined:  []string{"web/src/store.ts"},
				paths:     []string{"web/src/store.ts", "small.go"},
				truncated: []bool{true, false},
			},
		},
		{
			name:   "budget 0 leaves everything out",
			deps:   deps,
			budget: 0,
		},
		{
			name:   "no deps",
			budget: 1000,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files, gotFull, gotOutlined := Build(tc.deps, tc.budget, tokens.Count)
			if !reflect.DeepEqual(gotFull, tc.want.full) {
				t.Errorf("full = %v, want %v", gotFull, tc.want.full)
			}
			if !reflect.DeepEqual(gotOutlined, tc.want.outlined) {
				t.Errorf("outlined = %v, want %v", gotOutlined, tc.want.outlined)
			}
			var paths []string
			var truncated []bool
			used := 0
			for _, f := range files {
				paths = append(paths, f.GetPath())
				truncated = append(truncated, f.GetTruncated())
				used += tokens.Count(f.GetContent())
				for _, d := range tc.deps {
					if d.Path != f.GetPath() {
						continue
					}
					if want := map[bool]string{false: d.Content, true: Outline(d.Path, d.Content)}[f.GetTruncated()]; f.GetContent() != want {
						t.Errorf("%s: content is not the %s", f.GetPath(), map[bool]string{false: "file", true: "outline"}[f.GetTruncated()])
					}
				}
			}
			if !reflect.DeepEqual(paths, tc.want.paths) || !reflect.DeepEqual(truncated, tc.want.truncated) {
				t.Errorf("files = %v %v, want %v %v", paths, truncated, tc.want.paths, tc.want.truncated)
			}
			if used > tc.budget && len(files) > 0 {
				t.Errorf("%d tokens used, over the budget of %d", used, tc.budget)
			}
		})
	}
}
