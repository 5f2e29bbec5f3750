package depgraph

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

// jsNamespace is the esbuild namespace of the in-memory repository files.
const jsNamespace = "depgraph"

// jsResolvedPrefix marks an import that resolved to a repository file; such
// imports are marked external so each entry point is linked alone.
const jsResolvedPrefix = "depgraph-resolved:"

// isJS reports whether p is a JavaScript or TypeScript source file that can
// be the target of an import (declaration files are not).
func isJS(p string) bool {
	l := language(p)
	return (l == "typescript" || l == "javascript") && !strings.HasSuffix(p, ".d.ts") &&
		!strings.HasSuffix(p, ".d.mts") && !strings.HasSuffix(p, ".d.cts")
}

// jsExts is the extension search order for extensionless imports.
var jsExts = []string{".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts"}

// jsResolve resolves a relative or absolute specifier imported from the file
// importer against the set of known files, as Node and TypeScript do.
func jsResolve(importer, spec string, known map[string]bool) (string, bool) {
	if i := strings.IndexAny(spec, "?#"); i >= 0 {
		spec = spec[:i]
	}
	var base string
	if strings.HasPrefix(spec, "/") {
		base = path.Clean(strings.TrimPrefix(spec, "/"))
	} else {
		base = path.Join(dirOf(importer), spec)
	}
	if base == "." || base == "" || strings.HasPrefix(base, "../") || base == ".." {
		base = ""
	}
	try := func(p string) bool { return p != "" && known[p] }
	if try(base) {
		return base, true
	}
	// TypeScript ESM convention: "./x.js" names "./x.ts".
	ext := path.Ext(base)
	stem := strings.TrimSuffix(base, ext)
	alts := map[string][]string{
		".js": {".ts", ".tsx"}, ".jsx": {".tsx"}, ".mjs": {".mts"}, ".cjs": {".cts"},
	}[ext]
	for _, a := range alts {
		if try(stem + a) {
			return stem + a, true
		}
	}
	for _, e := range jsExts {
		if try(base + e) {
			return base + e, true
		}
	}
	for _, e := range jsExts {
		p := path.Join(base, "index"+e)
		if base == "" {
			p = "index" + e
		}
		if try(p) {
			return p, true
		}
	}
	return "", false
}

// jsLoader picks the esbuild loader for a path.
func jsLoader(p string) api.Loader {
	switch path.Ext(p) {
	case ".ts", ".mts", ".cts":
		return api.LoaderTS
	case ".tsx":
		return api.LoaderTSX
	case ".jsx":
		return api.LoaderJSX
	}
	return api.LoaderJS
}

// jsMetafile is the part of esbuild's metafile that depgraph reads.
type jsMetafile struct {
	Inputs map[string]struct {
		Imports []struct {
			Path     string `json:"path"`
			External bool   `json:"external"`
		} `json:"imports"`
	} `json:"inputs"`
}

// jsEdges adds the edges of the JavaScript and TypeScript files, running one
// esbuild build over all of them. Files with syntax errors are served empty
// in a further build, so they lose their edges but the others keep theirs.
func jsEdges(files []File, plannedOnly map[string]bool, es *edgeSet) error {
	contents := map[string]string{}
	known := map[string]bool{}
	var entries []string
	for _, f := range files {
		if isJS(f.Path) {
			contents[f.Path] = f.Content
			known[f.Path] = true
			entries = append(entries, f.Path)
		}
	}
	for p := range plannedOnly {
		if isJS(p) {
			known[p] = true
		}
	}
	if len(entries) == 0 {
		return nil
	}
	sort.Strings(entries)
	broken := map[string]bool{}
	for attempt := 0; attempt <= len(entries); attempt++ {
		meta, bad := jsBuild(entries, contents, known, broken)
		if meta != nil {
			for key, in := range meta.Inputs {
				from, ok := strings.CutPrefix(key, jsNamespace+":")
				if !ok || broken[from] {
					continue
				}
				for _, imp := range in.Imports {
					if to, ok := strings.CutPrefix(imp.Path, jsResolvedPrefix); ok {
						es.add(from, to)
					}
				}
			}
			return nil
		}
		progress := false
		for _, b := range bad {
			if known[b] && !broken[b] {
				broken[b] = true
				progress = true
			}
		}
		if !progress {
			// Errors that name no file: give up on JS/TS edges rather than
			// fail the whole analysis.
			return nil
		}
	}
	return fmt.Errorf("depgraph: esbuild did not converge")
}

// jsBuild runs one esbuild build and returns its metafile, or the files
// named by its errors.
func jsBuild(entries []string, contents map[string]string, known, broken map[string]bool) (*jsMetafile, []string) {
	plugin := api.Plugin{
		Name: "depgraph-memfs",
		Setup: func(b api.PluginBuild) {
			b.OnResolve(api.OnResolveOptions{Filter: ".*"}, func(a api.OnResolveArgs) (api.OnResolveResult, error) {
				if a.Kind == api.ResolveEntryPoint {
					return api.OnResolveResult{Path: a.Path, Namespace: jsNamespace}, nil
				}
				spec := a.Path
				relative := strings.HasPrefix(spec, "./") || strings.HasPrefix(spec, "../") ||
					spec == "." || spec == ".." || strings.HasPrefix(spec, "/")
				if relative && a.Namespace == jsNamespace {
					if to, ok := jsResolve(a.Importer, spec, known); ok {
						return api.OnResolveResult{Path: jsResolvedPrefix + to, External: true}, nil
					}
				}
				return api.OnResolveResult{Path: spec, External: true}, nil
			})
			b.OnLoad(api.OnLoadOptions{Filter: ".*", Namespace: jsNamespace}, func(a api.OnLoadArgs) (api.OnLoadResult, error) {
				c := contents[a.Path]
				if broken[a.Path] {
					c = ""
				}
				return api.OnLoadResult{Contents: &c, Loader: jsLoader(a.Path), ResolveDir: "/"}, nil
			})
		},
	}
	eps := make([]api.EntryPoint, len(entries))
	for i, e := range entries {
		eps[i] = api.EntryPoint{InputPath: e, OutputPath: "e" + strconv.Itoa(i)}
	}
	res := api.Build(api.BuildOptions{
		EntryPointsAdvanced: eps,
		Bundle:              true,
		Write:               false,
		Metafile:            true,
		Format:              api.FormatESModule,
		Platform:            api.PlatformNeutral,
		Outdir:              "/out",
		LogLevel:            api.LogLevelSilent,
		Plugins:             []api.Plugin{plugin},
	})
	if len(res.Errors) > 0 {
		var bad []string
		for _, m := range res.Errors {
			if m.Location != nil {
				bad = append(bad, strings.TrimPrefix(m.Location.File, jsNamespace+":"))
			}
		}
		return nil, bad
	}
	var meta jsMetafile
	if err := json.Unmarshal([]byte(res.Metafile), &meta); err != nil {
		return nil, nil
	}
	return &meta, nil
}
