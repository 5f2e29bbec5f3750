package fakegithub

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// The git side of the fake: content-addressed blobs, trees and commits of one repository,
// flattened to path → entry maps for edits, diffs and merges.

type entry struct {
	mode, typ, sha string
}

type treeEntry struct {
	name string
	entry
}

type gitCommit struct {
	sha, tree string
	parents   []string
	message   string
	author    sig
	time      time.Time
}

type sig struct{ name, email string }

type gitTag struct {
	sha, name, object, objectType string
}

type gitStore struct {
	blobs   map[string][]byte
	trees   map[string][]treeEntry
	commits map[string]*gitCommit
	tags    map[string]*gitTag
	seq     int
}

func newGitStore() *gitStore {
	return &gitStore{blobs: map[string][]byte{}, trees: map[string][]treeEntry{}, commits: map[string]*gitCommit{}, tags: map[string]*gitTag{}}
}

func hash(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

func (g *gitStore) putBlob(data []byte) string {
	sha := hash(fmt.Sprintf("blob %d\x00%s", len(data), data))
	g.blobs[sha] = slices.Clone(data)
	return sha
}

func (g *gitStore) putTree(entries []treeEntry) string {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var b strings.Builder
	b.WriteString("tree\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "%s %s %s\t%s\n", e.mode, e.typ, e.sha, e.name)
	}
	sha := hash(b.String())
	g.trees[sha] = entries
	return sha
}

func (g *gitStore) putCommit(tree string, parents []string, message string, author sig) string {
	g.seq++
	c := &gitCommit{tree: tree, parents: parents, message: message, author: author, time: epoch.Add(time.Duration(g.seq) * time.Minute)}
	c.sha = hash(fmt.Sprintf("commit\ntree %s\nparents %v\nauthor %s <%s>\nseq %d\n\n%s", tree, parents, author.name, author.email, g.seq, message))
	g.commits[c.sha] = c
	return c.sha
}

var epoch = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// treeOf is the tree of a commit or tree sha, "" when neither.
func (g *gitStore) treeOf(sha string) string {
	if c, ok := g.commits[sha]; ok {
		return c.tree
	}
	if _, ok := g.trees[sha]; ok {
		return sha
	}
	return ""
}

// flatten maps every non-directory path under tree to its entry.
func (g *gitStore) flatten(tree string) map[string]entry {
	out := map[string]entry{}
	var walk func(sha, prefix string)
	walk = func(sha, prefix string) {
		for _, e := range g.trees[sha] {
			if e.typ == "tree" {
				walk(e.sha, prefix+e.name+"/")
				continue
			}
			out[prefix+e.name] = e.entry
		}
	}
	walk(tree, "")
	return out
}

// build writes the trees of a flat map and returns the root's sha.
func (g *gitStore) build(flat map[string]entry) string {
	var rec func(prefix string) string
	rec = func(prefix string) string {
		var entries []treeEntry
		subdirs := map[string]bool{}
		for p, e := range flat {
			if !strings.HasPrefix(p, prefix) {
				continue
			}
			rest := strings.TrimPrefix(p, prefix)
			if dir, _, ok := strings.Cut(rest, "/"); ok {
				subdirs[dir] = true
				continue
			}
			entries = append(entries, treeEntry{name: rest, entry: e})
		}
		for d := range subdirs {
			entries = append(entries, treeEntry{name: d, entry: entry{mode: "040000", typ: "tree", sha: rec(prefix + d + "/")}})
		}
		return g.putTree(entries)
	}
	return rec("")
}

// ancestors is every commit reachable from sha, itself included.
func (g *gitStore) ancestors(sha string) map[string]bool {
	seen := map[string]bool{}
	for queue := []string{sha}; len(queue) > 0; queue = queue[1:] {
		c := queue[0]
		if seen[c] || g.commits[c] == nil {
			continue
		}
		seen[c] = true
		queue = append(queue, g.commits[c].parents...)
	}
	return seen
}

func (g *gitStore) mergeBase(a, b string) string {
	anc := g.ancestors(b)
	seen := map[string]bool{}
	for queue := []string{a}; len(queue) > 0; queue = queue[1:] {
		c := queue[0]
		if seen[c] || g.commits[c] == nil {
			continue
		}
		seen[c] = true
		if anc[c] {
			return c
		}
		queue = append(queue, g.commits[c].parents...)
	}
	return ""
}

// merge3 merges theirs into ours from base at the path level; false on a conflict.
func merge3(base, ours, theirs map[string]entry) (map[string]entry, bool) {
	out := map[string]entry{}
	paths := map[string]bool{}
	for _, m := range []map[string]entry{base, ours, theirs} {
		for p := range m {
			paths[p] = true
		}
	}
	for p := range paths {
		m, o, t := base[p], ours[p], theirs[p]
		var pick entry
		switch {
		case o == t, m == t:
			pick = o
		case m == o:
			pick = t
		default:
			return nil, false
		}
		if pick != (entry{}) {
			out[p] = pick
		}
	}
	return out, true
}

// fileDiff is one changed file, shaped as GitHub's "files" entries.
type fileDiff struct {
	Filename         string `json:"filename"`
	Status           string `json:"status"`
	Additions        int    `json:"additions"`
	Deletions        int    `json:"deletions"`
	Changes          int    `json:"changes"`
	Patch            string `json:"patch,omitempty"`
	PreviousFilename string `json:"previous_filename,omitempty"`
	SHA              string `json:"sha"`
}

// diffTrees is how tree b differs from tree a, by path, with renames of unchanged content.
func (g *gitStore) diffTrees(a, b string) []fileDiff {
	fa, fb := g.flatten(a), g.flatten(b)
	var out []fileDiff
	var added, removed []string
	for _, p := range slices.Sorted(maps.Keys(fb)) {
		ea, ok := fa[p]
		switch {
		case !ok:
			added = append(added, p)
		case ea != fb[p]:
			d := g.diffText(string(g.blobs[ea.sha]), string(g.blobs[fb[p].sha]))
			d.Filename, d.Status, d.SHA = p, "modified", fb[p].sha
			out = append(out, d)
		}
	}
	for p := range fa {
		if _, ok := fb[p]; !ok {
			removed = append(removed, p)
		}
	}
	slices.Sort(removed)
	for _, p := range added {
		if i := slices.IndexFunc(removed, func(r string) bool { return fa[r].sha == fb[p].sha }); i >= 0 {
			out = append(out, fileDiff{Filename: p, Status: "renamed", PreviousFilename: removed[i], SHA: fb[p].sha})
			removed = slices.Delete(removed, i, i+1)
			continue
		}
		d := g.diffText("", string(g.blobs[fb[p].sha]))
		d.Filename, d.Status, d.SHA = p, "added", fb[p].sha
		out = append(out, d)
	}
	for _, p := range removed {
		d := g.diffText(string(g.blobs[fa[p].sha]), "")
		d.Filename, d.Status, d.SHA = p, "removed", fa[p].sha
		out = append(out, d)
	}
	slices.SortFunc(out, func(x, y fileDiff) int { return strings.Compare(x.Filename, y.Filename) })
	return out
}

// fileDiff is a one-hunk patch of the whole file (GitHub's shape: no ---/+++ lines).
// Binary content gets no patch and no counts, as GitHub reports it.
func (g *gitStore) diffText(a, b string) fileDiff {
	if isBinary(a) || isBinary(b) {
		return fileDiff{}
	}
	la, lb := splitLines(a), splitLines(b)
	// LCS table.
	n, m := len(la), len(lb)
	dp := make([][]int, n+1)
	for i := range dp {
		dp[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if la[i] == lb[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	var body strings.Builder
	var d fileDiff
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && la[i] == lb[j]:
			body.WriteString(" " + la[i] + "\n")
			i, j = i+1, j+1
		case j < m && (i == n || dp[i][j+1] >= dp[i+1][j]):
			body.WriteString("+" + lb[j] + "\n")
			d.Additions++
			j++
		default:
			body.WriteString("-" + la[i] + "\n")
			d.Deletions++
			i++
		}
	}
	d.Changes = d.Additions + d.Deletions
	if d.Changes > 0 {
		d.Patch = strings.TrimSuffix(fmt.Sprintf("@@ -%s +%s @@\n%s", hunkRange(n), hunkRange(m), body.String()), "\n")
	}
	return d
}

func hunkRange(n int) string {
	if n == 0 {
		return "0,0"
	}
	return fmt.Sprintf("1,%d", n)
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func isBinary(s string) bool { return !utf8.ValidString(s) || strings.ContainsRune(s, 0) }

// tarball is GitHub's archive of a commit: gzip, a pax global header naming the commit,
// every path under "owner-repo-sha7/".
func (g *gitStore) tarball(owner, name, commit string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	mtime := g.commits[commit].time
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": commit}, Format: tar.FormatPAX}))
	top := fmt.Sprintf("%s-%s-%s/", owner, name, commit[:7])
	must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: top, Mode: 0o775, ModTime: mtime}))
	var walk func(sha, prefix string)
	walk = func(sha, prefix string) {
		for _, e := range g.trees[sha] {
			p := top + prefix + e.name
			switch {
			case e.typ == "tree":
				must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: 0o775, ModTime: mtime}))
				walk(e.sha, prefix+e.name+"/")
			case e.mode == "120000":
				must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: p, Linkname: string(g.blobs[e.sha]), Mode: 0o777, ModTime: mtime}))
			case e.typ == "commit":
				must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: 0o775, ModTime: mtime}))
			default:
				mode := int64(0o664)
				if e.mode == "100755" {
					mode = 0o775
				}
				data := g.blobs[e.sha]
				must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Size: int64(len(data)), Mode: mode, ModTime: mtime}))
				_, err := tw.Write(data)
				must(err)
			}
		}
	}
	walk(g.commits[commit].tree, "")
	must(tw.Close())
	must(zw.Close())
	return buf.Bytes()
}
