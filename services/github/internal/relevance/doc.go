// Package relevance ranks a repository's files by relevance to a task and returns as many
// as fit a token budget: a repository map in the spirit of Aider's, built from lexical
// signals and the import graph, with no model and no network.
//
// # Index
//
// Build indexes one commit's files once (the caller caches the Index per commit). Each file
// is split into terms by one splitter shared with the query (see Terms below); BM25 needs
// only term frequencies, so no tokenizer of any model runs at build time. Go files are
// parsed with go/parser for their top-level declarations (funcs, methods, types, consts,
// vars) and imports; TypeScript/JavaScript, Python, Rust and Java/Kotlin/C# files yield
// their definitions from definition-line patterns (function / class / interface / type /
// const X = / export; def / class; fn / struct / enum / trait; class and method lines).
// The work is spread over GOMAXPROCS goroutines with a private term dictionary each,
// merged at the end into postings lists.
//
// # Terms
//
// Text is cut into ASCII alphanumeric words, which are split at camelCase boundaries
// (snake_case and kebab-case split at their separators), lowercased; English stop words
// and one-letter terms are dropped, and a light stemmer strips plural s / es / ies, -ing,
// -ed and a final e ("parse", "parses", "parsed", "parsing" → "pars"). The same function
// serves contents, paths, symbol names and the task, so a word always meets itself.
//
// # Signals
//
// Each signal is normalised to 0–1 by its maximum over the files for the query. The base
// score is 0.40·BM25 + 0.35·definitions + 0.25·path, times the penalties, renormalised so
// that the best file has 1.
//
//   - BM25 (k1 = 1.2, b = 0.75) of the task's distinct terms over file contents.
//   - Definitions: for each symbol a file defines, the IDF of the query terms in its name
//     times the square root of the share of the name they cover ("server" matches Server
//     fully, NewServer half); a file scores its best symbol plus half the IDF of all query
//     terms its definitions cover. A definition thus counts more than the mere occurrences
//     BM25 sees.
//   - Path: the IDF (over paths) of query terms in the file name (weight 1) and directories
//     (weight 1/2).
//   - Penalties, multiplied: test files ×0.7, generated files (the "Code generated ... DO NOT
//     EDIT." line) ×0.6, paths under vendor/, node_modules/ or testdata/ ×0.6. Nothing is
//     excluded.
//
// # Import graph and greedy selection
//
// Go imports resolve through the go.mod files in the tree: the longest module path that
// prefixes the import path gives the directory, which must belong to that module (its
// nearest go.mod is the module's, so nested modules stay apart), and the import points to
// every non-test .go file there; a module named "std" (GOROOT/src) serves dotless import
// paths, and the importer's module's vendor/ directory is tried last. TypeScript/JavaScript
// relative imports resolve with .ts/.tsx/.js/.jsx/.mjs (and more) and index files; Python
// relative imports resolve against the package, absolute ones against the importer's
// directory and its ancestors (pkg/mod.py or pkg/mod/__init__.py).
//
// Selection is greedy. Requested paths (Query.IncludePaths) come first. Then, repeatedly,
// the file with the best effective score is chosen; the file chosen at position k gives
// each file it imports and each file importing it 0.4 × its score × 0.8^k (divided by
// sqrt(degree/8) for files with more than 8 neighbours, so a hub does not lift half the
// repository). A neighbour's effective score is its base score plus what it received,
// capped at the score of the best chosen file that lifted it, so a neighbour never
// outranks the file that brought it. A file with no term match can therefore be chosen for
// its neighbourhood alone; its Reason says "imported by a/b.go" or "imports a/b.go". Lifts
// accumulate, so a file chosen later may have gathered more than one chosen earlier; the
// reported Score never exceeds the one before it, so scores read in rank order. Ties break
// by path; the whole ranking is deterministic.
//
// # Budget
//
// The ranking is walked in order. A file comes whole when its full content fits the
// remaining budget and is at most a quarter of the total budget; otherwise it comes as an
// outline when the outline fits the remaining budget and at most half of the total (so one
// huge outline cannot starve the rest); otherwise it is listed without content. The sum of
// included tokens never exceeds the budget, and content is always whole lines.
//
// Outlines: Go files via go/parser and go/printer — package clause (with the package doc),
// imports, type / const / var declarations (long initialisers shown as "..."), func and
// method signatures with their doc comments, no bodies; when that does not fit, the same
// without comments. Other files: the first comment block and the definition lines, as
// "12: def parse(...)"; when that does not fit, the definition lines alone. A file with
// nothing to outline falls back to its first whole lines that fit.
//
// Token counts come from pkg/tokens (cl100k_base), counted lazily for the files a query
// returns, and cached in the index.
package relevance
