package spec

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Loader loads configurations and remembers every file it parsed, so that
// diagnostics can be printed with their source snippets (see Files). A Loader
// is not safe for concurrent use; use one per load.
type Loader struct {
	parser *hclparse.Parser
}

// NewLoader returns an empty Loader.
func NewLoader() *Loader {
	return &Loader{parser: hclparse.NewParser()}
}

// Files returns every file parsed so far (configuration and -var-file files)
// by name, ready for hcl.NewDiagnosticTextWriter.
func (l *Loader) Files() map[string]*hcl.File {
	return l.parser.Files()
}

// Load is shorthand for NewLoader().Load(path, vars).
func Load(path string, vars Vars) (*Config, hcl.Diagnostics) {
	return NewLoader().Load(path, vars)
}

// Load loads the configuration at path: either a directory, of which every
// *.hcl file (not recursively) is read, or a single file. The returned Config
// is nil whenever the diagnostics contain an error; warnings may accompany a
// valid Config.
func (l *Loader) Load(p string, vars Vars) (*Config, hcl.Diagnostics) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read configuration",
			Detail:   fmt.Sprintf("%v. Pass a directory holding *.hcl files or a single .hcl file.", err),
		}}
	}
	var names []string
	if info.IsDir() {
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Cannot read configuration directory",
				Detail:   err.Error(),
			}}
		}
		for _, e := range entries {
			if !e.IsDir() && isConfigFile(e.Name()) {
				names = append(names, filepath.Join(p, e.Name()))
			}
		}
		if len(names) == 0 {
			return nil, hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "No configuration files",
				Detail:   fmt.Sprintf("The directory %s contains no *.hcl files.", p),
			}}
		}
	} else {
		names = []string{p}
	}
	srcs := make(map[string][]byte, len(names))
	var diags hcl.Diagnostics
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Cannot read configuration file",
				Detail:   err.Error(),
			})
			continue
		}
		srcs[n] = b
	}
	diags = append(diags, varFileInConfig(names, vars.Files)...)
	if diags.HasErrors() {
		return nil, diags
	}
	return l.LoadSources(srcs, vars)
}

// varFileInConfig reports each -var-file that is also one of the
// configuration's files, which would be read as configuration too.
func varFileInConfig(names, varFiles []string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, vf := range varFiles {
		for _, n := range names {
			if sameFile(vf, n) {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Variable file inside the configuration",
					Detail:   fmt.Sprintf("The variable file %s is also read as configuration, as is every *.hcl file of its directory. Move it out of the directory, or rename it to an extension other than .hcl (such as %s.vars).", vf, strings.TrimSuffix(filepath.Base(vf), filepath.Ext(vf))),
				})
				break
			}
		}
	}
	return diags
}

func sameFile(a, b string) bool {
	ia, err := os.Stat(a)
	if err != nil {
		return false
	}
	ib, err := os.Stat(b)
	return err == nil && os.SameFile(ia, ib)
}

// LoadFS loads every *.hcl file in the root directory of fsys.
func (l *Loader) LoadFS(fsys fs.FS, vars Vars) (*Config, hcl.Diagnostics) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read configuration directory", Detail: err.Error()}}
	}
	srcs := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() || !isConfigFile(e.Name()) {
			continue
		}
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read configuration file", Detail: err.Error()}}
		}
		srcs[e.Name()] = b
	}
	if len(srcs) == 0 {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "No configuration files", Detail: "The directory contains no *.hcl files."}}
	}
	return l.LoadSources(srcs, vars)
}

// LoadSources loads a configuration from in-memory files, keyed by the file
// name that diagnostics will show. It is what Load and LoadFS do after
// reading, and what tests and the fuzzer call.
//
// Loading happens in phases, like Terraform's: parse every file; check each
// file's top level against the schema; gather blocks across files, reporting
// duplicates; resolve variables and locals; decode and validate each block;
// check cross-object rules (queue name collisions). Every problem found is
// reported, not only the first.
//
// No diagnostic shows the token attribute's expression (see redactToken).
func (l *Loader) LoadSources(srcs map[string][]byte, vars Vars) (*Config, hcl.Diagnostics) {
	var token *hcl.Range
	cfg, diags := l.loadSources(srcs, vars, &token)
	redactToken(diags, srcs, token)
	return cfg, diags
}

func (l *Loader) loadSources(srcs map[string][]byte, vars Vars, token **hcl.Range) (*Config, hcl.Diagnostics) {
	names := make([]string, 0, len(srcs))
	for n := range srcs {
		names = append(names, n)
	}
	sort.Strings(names)

	var diags hcl.Diagnostics
	var files []*hcl.File
	for _, n := range names {
		if d := CheckSource(n, srcs[n]); d != nil {
			diags = append(diags, d)
			continue
		}
		f, ds := l.parser.ParseHCL(srcs[n], n)
		diags = append(diags, ds...)
		if f != nil && !ds.HasErrors() {
			files = append(files, f)
		}
	}

	m, ds := gather(files)
	diags = append(diags, ds...)
	if m.rpd != nil {
		if body, ok := m.rpd.Body.(*hclsyntax.Body); ok && body.Attributes["token"] != nil {
			*token = body.Attributes["token"].SrcRange.Ptr()
		}
	}
	if diags.HasErrors() && len(files) < len(names) {
		// A file that doesn't parse may declare the variables, locals or
		// objects that the others refer to: decoding them now would only add
		// misleading errors.
		SortDiagnostics(diags)
		return nil, diags
	}

	ctx, ds := l.evalContext(m, vars)
	diags = append(diags, ds...)

	cfg, ds := decode(m, ctx)
	diags = append(diags, ds...)
	SortDiagnostics(diags)
	if diags.HasErrors() {
		return nil, diags
	}
	cfg.Files = names
	return cfg, diags
}

// SortDiagnostics orders diags in place the way they are best read:
// those without a location first, then by file and position. The sort is
// stable, so diagnostics at one position keep their order.
func SortDiagnostics(diags hcl.Diagnostics) {
	sort.SliceStable(diags, func(i, j int) bool {
		a, b := diags[i].Subject, diags[j].Subject
		switch {
		case a == nil || b == nil:
			return a == nil && b != nil
		case a.Filename != b.Filename:
			return a.Filename < b.Filename
		default:
			return a.Start.Byte < b.Start.Byte
		}
	})
}

func isConfigFile(name string) bool {
	return strings.HasSuffix(name, ".hcl") && !strings.HasPrefix(name, ".")
}

// topSchema is the top level of a configuration file.
var topSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "rpd"},
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "locals"},
		{Type: "runner_class", LabelNames: []string{"name"}},
		{Type: "budget", LabelNames: []string{"name"}},
		{Type: "vm_ceiling", LabelNames: []string{"name"}},
		{Type: "pool", LabelNames: []string{"name"}},
		{Type: "priority", LabelNames: []string{"name"}},
		{Type: "token", LabelNames: []string{"name"}},
	},
}

// module is every top-level block of a configuration, gathered across files
// in file order, duplicates removed (and reported).
type module struct {
	rpd       *hcl.Block
	variables []*hcl.Block
	locals    []*hcl.Attribute
	byType    map[string][]*hcl.Block // runner_class, budget, vm_ceiling, pool, priority, token
}

// gather is phase two and three: the top-level schema of every file, then
// duplicate detection across files.
func gather(files []*hcl.File) (*module, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	m := &module{byType: map[string][]*hcl.Block{}}
	seen := map[string]*hcl.Block{} // "type.name" -> first declaration
	localSeen := map[string]*hcl.Attribute{}
	for _, f := range files {
		content, ds := f.Body.Content(topSchema)
		diags = append(diags, ds...)
		for _, b := range content.Blocks {
			switch b.Type {
			case "rpd":
				if m.rpd != nil {
					diags = append(diags, duplicate("Duplicate rpd block", "An rpd block", b.DefRange, m.rpd.DefRange))
					continue
				}
				m.rpd = b
			case "locals":
				attrs, ds := b.Body.JustAttributes()
				diags = append(diags, ds...)
				for _, a := range sortedAttrs(attrs) {
					if first, ok := localSeen[a.Name]; ok {
						diags = append(diags, duplicate("Duplicate local value", fmt.Sprintf("A local value named %q", a.Name), a.NameRange, first.NameRange))
						continue
					}
					localSeen[a.Name] = a
					m.locals = append(m.locals, a)
				}
			default:
				name := b.Labels[0]
				key := b.Type + "." + name
				if first, ok := seen[key]; ok {
					diags = append(diags, duplicate("Duplicate "+b.Type+" "+quote(name), fmt.Sprintf("A %s named %q", b.Type, name), b.DefRange, first.DefRange))
					continue
				}
				seen[key] = b
				if b.Type == "variable" {
					if !validIdent(name) {
						diags = append(diags, &hcl.Diagnostic{
							Severity: hcl.DiagError,
							Summary:  "Invalid variable name",
							Detail:   fmt.Sprintf("%q is not a valid variable name: use letters, digits, underscores and dashes, starting with a letter or underscore.", name),
							Subject:  b.LabelRanges[0].Ptr(),
						})
						continue
					}
					m.variables = append(m.variables, b)
					continue
				}
				if !validName(name) {
					diags = append(diags, badName(b.Type, name, b.LabelRanges[0]))
				}
				m.byType[b.Type] = append(m.byType[b.Type], b)
			}
		}
	}
	return m, diags
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

func duplicate(summary, what string, at, first hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf("%s was already declared at %s. Names must be unique across all files of the configuration; remove or rename one of them.", what, rangeString(first)),
		Subject:  at.Ptr(),
	}
}

func rangeString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d,%d", r.Filename, r.Start.Line, r.Start.Column)
}

// sortedAttrs returns attrs in source order.
func sortedAttrs(attrs hcl.Attributes) []*hcl.Attribute {
	out := make([]*hcl.Attribute, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return rangeLess(out[i].Range, out[j].Range) })
	return out
}

func rangeLess(a, b hcl.Range) bool {
	if a.Filename != b.Filename {
		return a.Filename < b.Filename
	}
	return a.Start.Byte < b.Start.Byte
}

// validName reports whether s can name an rpd object: 1..64 characters of
// letters, digits, '_' and '-', starting with a letter or digit. Object names
// appear in queue names, resource addresses and API URLs.
func validName(s string) bool {
	if len(s) == 0 || len(s) > maxNameLen {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

const maxNameLen = 64

// validIdent reports whether s is an HCL identifier usable as var.<s>.
func validIdent(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case (c >= '0' && c <= '9' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

func badName(kind, name string, r hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid " + kind + " name",
		Detail:   fmt.Sprintf("%q is not a valid %s name: use 1 to %d letters, digits, underscores and dashes, starting with a letter or digit.", name, kind, maxNameLen),
		Subject:  r.Ptr(),
	}
}

// validGlob reports whether pattern is a well-formed path.Match pattern.
func validGlob(pattern string) bool {
	if pattern == "" {
		return false
	}
	_, err := path.Match(pattern, "")
	return err == nil
}
