// Command configdoc writes the configuration reference (docs/configuration.md) from the code:
// every field of a config struct whose env tag names a THEFOLD_ variable, its default (from the tag)
// and its description (the field's doc comment), grouped by who reads it. make generate runs
// it and CI checks the file is fresh, so the reference cannot drift from what the services
// read.
//
//	go run ./pkg/config/cmd/configdoc -root . > docs/configuration.md
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Setting is one environment variable a component reads.
type Setting struct {
	Name, Default, Doc, Source string
	Secret, Required           bool
}

func main() {
	root := flag.String("root", ".", "the repository root")
	flag.Parse()
	settings, err := Scan(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
	if err := Write(os.Stdout, settings); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}

// Scan reads the settings of every config struct under root's cmd/, pkg/ and services/,
// by component ("every service" for pkg/, else the service or command).
func Scan(root string) (map[string][]Setting, error) {
	out := map[string][]Setting{}
	seen := map[string]string{}
	for _, top := range []string{"pkg", "services", "cmd"} {
		if _, err := os.Stat(filepath.Join(root, top)); err != nil {
			continue
		}
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "gen" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			rel = filepath.ToSlash(rel)
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
			if err != nil {
				return err
			}
			comp := component(rel)
			ast.Inspect(f, func(n ast.Node) bool {
				st, ok := n.(*ast.StructType)
				if !ok {
					return true
				}
				prev := ""
				for _, field := range st.Fields.List {
					doc := text(field.Doc)
					if doc == "" {
						doc = text(field.Comment)
					}
					if field.Tag == nil {
						prev = doc
						continue
					}
					tag, _ := strconv.Unquote(field.Tag.Value)
					env, ok := reflect.StructTag(tag).Lookup("env")
					if !ok || !strings.HasPrefix(env, "THEFOLD_") {
						prev = doc
						continue
					}
					s := parseEnv(env)
					s.Secret = reflect.StructTag(tag).Get("secret") == "true"
					s.Source = rel
					if doc == "" {
						doc = prev // a field under the comment of the group it belongs to
					}
					prev = doc
					s.Doc = doc
					if other, dup := seen[s.Name]; dup && other != comp {
						s.Doc = strings.TrimSpace(s.Doc + " (also read by " + other + ")")
					}
					seen[s.Name] = comp
					// The same setting read again (a subcommand's own small struct) keeps the
					// documented reading.
					if i := slices.IndexFunc(out[comp], func(o Setting) bool { return o.Name == s.Name }); i >= 0 {
						if out[comp][i].Doc == "" {
							out[comp][i] = s
						}
						continue
					}
					out[comp] = append(out[comp], s)
				}
				return true
			})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var undocumented []string
	for _, list := range out {
		for _, s := range list {
			if s.Doc == "" {
				undocumented = append(undocumented, s.Name+" ("+s.Source+")")
			}
		}
	}
	if len(undocumented) > 0 {
		slices.Sort(undocumented)
		return nil, fmt.Errorf("settings without a doc comment (the reference would say nothing about them): %s", strings.Join(undocumented, ", "))
	}
	for c := range out {
		slices.SortStableFunc(out[c], func(a, b Setting) int { return strings.Compare(a.Name, b.Name) })
	}
	return out, nil
}

// component names who reads a file's settings.
func component(rel string) string {
	parts := strings.Split(rel, "/")
	switch parts[0] {
	case "pkg":
		return "every service"
	case "services", "cmd":
		if len(parts) > 1 {
			if parts[0] == "cmd" && parts[1] == "thefold" {
				return "launcher (thefold)"
			}
			return parts[1]
		}
	}
	return parts[0]
}

// parseEnv reads go-envconfig's tag: the name, then options; default= takes the rest.
func parseEnv(tag string) Setting {
	name, opts, _ := strings.Cut(tag, ",")
	s := Setting{Name: strings.TrimSpace(name)}
	for opts != "" {
		opts = strings.TrimSpace(opts)
		if d, ok := strings.CutPrefix(opts, "default="); ok {
			s.Default = d
			break
		}
		var opt string
		opt, opts, _ = strings.Cut(opts, ",")
		if strings.TrimSpace(opt) == "required" {
			s.Required = true
		}
	}
	return s
}

// text is a comment group as one line.
func text(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.Join(strings.Fields(g.Text()), " ")
}

// Write renders the reference as Markdown.
func Write(w io.Writer, settings map[string][]Setting) error {
	var b strings.Builder
	b.WriteString("# Configuration\n\n")
	b.WriteString("<!-- Code generated by pkg/config/cmd/configdoc from the config structs' env tags and doc comments. DO NOT EDIT: make generate writes it, CI checks it is fresh. -->\n\n")
	b.WriteString("Every setting is an environment variable. Each service reads the settings of \"every service\" and its own; ")
	b.WriteString("the local launcher (`make run`) and docker compose set the addresses, database URLs and keys for you. ")
	b.WriteString("Secrets are masked when a service logs its effective configuration at start.\n")
	comps := make([]string, 0, len(settings))
	for c := range settings {
		comps = append(comps, c)
	}
	slices.SortFunc(comps, func(a, b string) int {
		if (a == "every service") != (b == "every service") {
			if a == "every service" {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	n := 0
	for _, c := range comps {
		fmt.Fprintf(&b, "\n## %s\n\n| Variable | Default | Description |\n| --- | --- | --- |\n", c)
		for _, s := range settings[c] {
			def := "—"
			switch {
			case s.Required:
				def = "required"
			case s.Default != "":
				def = "`" + s.Default + "`"
			}
			doc := s.Doc
			if s.Secret {
				doc = strings.TrimSpace(doc + " Secret: masked in logs.")
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.Name, cell(def), cell(doc))
			n++
		}
	}
	fmt.Fprintf(&b, "\n%d settings.\n", n)
	_, err := io.WriteString(w, b.String())
	return err
}

func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
