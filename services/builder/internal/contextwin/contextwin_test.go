package contextwin

import (
	"reflect"
	"testing"

	"github.com/thefold/thefold/pkg/tokens"

	"github.com/thefold/thefold/services/builder/internal/outline"
)

const goSrc = `// Package store keeps users.
package store

import (
	"fmt"
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
	short := tokens.Count(outline.File(deps[2].Path, deps[2].Content))
	if short >= third {
		t.Fatalf("outline of %s (%d tokens) is not smaller than the file (%d)", deps[2].Path, short, third)
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
			budget: full + short,
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
			budget: full + short - 1,
			want: want{
				full:      []string{"store/store.go", "app/users.py"},
				paths:     []string{"store/store.go", "app/users.py"},
				truncated: []bool{false, false},
			},
		},
		{
			name:   "order of deps kept: outlined first, later full",
			deps:   []Dep{deps[2], {Path: "small.go", Content: "package small\n"}},
			budget: short + tokens.Count("package small\n"),
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
					if want := map[bool]string{false: d.Content, true: outline.File(d.Path, d.Content)}[f.GetTruncated()]; f.GetContent() != want {
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
