package layers

import (
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/rpdhq/rpd"

// rule is what one package may import: packages of the module (by path
// below the module) and third-party import paths (by prefix). The
// standard library is always allowed.
type rule struct {
	rpd []string
	ext []string
}

var (
	awsSDK    = []string{"github.com/aws/aws-sdk-go-v2/", "github.com/aws/smithy-go"}
	hcl       = []string{"github.com/hashicorp/hcl/v2"}
	runtimeOf = []string{"runtime/fatjob", "runtime/fleet", "runtime/ledger", "runtime/pickup", "runtime/pools"}
)

// rules is the architecture (README, "Layout"): the wire types, the
// runtime components and the backend contract are leaves; backends import
// only the contract and the interfaces their consumers declare; spec
// imports nothing of rpd; reconcile plans on spec and the contract;
// internal/open is the composition root of the backends; the daemon wires
// everything below it; cmd/rpd sits on top.
var rules = map[string]rule{
	"api":            {rpd: []string{"internal/ascii"}},
	"client":         {rpd: []string{"api", "internal/ascii"}},
	"internal/ascii": {},
	// An answer sent the moment a write is durable: a leaf the server
	// offers, the arbiter arms and a backend's writer sends.
	"internal/answer":              {},
	"runtime/fatjob":               {},
	"runtime/fleet":                {},
	"runtime/ledger":               {},
	"runtime/pickup":               {},
	"runtime/pools":                {},
	"backend":                      {},
	"backend/internal/groupcommit": {},
	"backend/internal/awsconfig":   {ext: awsSDK},
	"backend/local":                {rpd: []string{"backend", "backend/internal/groupcommit", "internal/answer", "runtime/pickup", "runtime/pools"}, ext: []string{"golang.org/x/sys/unix", "modernc.org/sqlite"}},
	"backend/aws":                  {rpd: []string{"backend", "backend/internal/awsconfig", "backend/internal/groupcommit", "runtime/pickup", "runtime/pools"}, ext: awsSDK},
	"backend/faulty":               {rpd: []string{"backend", "runtime/pickup"}},
	"backend/ec2":                  {rpd: []string{"backend/internal/awsconfig", "runtime/fleet", "runtime/ledger"}, ext: awsSDK},
	"backend/backendtest":          {rpd: []string{"backend", "runtime/pickup", "runtime/pools"}},
	"backend/snapshot":             {rpd: []string{"backend", "runtime/pickup", "runtime/pools"}},
	"spec":                         {ext: append(hcl, "github.com/zclconf/go-cty/", "github.com/robfig/cron/v3")},
	"reconcile":                    {rpd: []string{"backend", "spec"}, ext: []string{"golang.org/x/sync/errgroup"}},
	"internal/open":                {rpd: []string{"backend", "backend/aws", "backend/local", "reconcile", "runtime/pickup", "runtime/pools"}},
	"internal/awstest":             {rpd: []string{"backend/aws", "internal/childproc"}, ext: awsSDK},
	"internal/childproc":           {},
	"internal/clocktest":           {},
	"internal/poolstest":           {rpd: []string{"runtime/pools"}},
	"internal/waitfor":             {},
	"internal/tlstest":             {},
	"internal/ec2test":             {rpd: []string{"internal/childproc"}, ext: awsSDK},
	"internal/buildinfo":           {},
	"internal/layers":              {},
	"daemon/statuspage":            {},
	"daemon/internal/httpapi":      {rpd: []string{"api", "backend", "internal/answer", "runtime/fatjob", "runtime/ledger", "runtime/pools"}},
	"daemon/internal/component":    {rpd: []string{"api", "reconcile", "spec"}, ext: append(hcl, "github.com/prometheus/client_golang/")},
	"daemon/internal/holders":      {rpd: []string{"api", "daemon/internal/httpapi", "runtime/ledger", "runtime/pools"}},
	"daemon/internal/records":      {rpd: []string{"runtime/pools"}},
	"daemon/internal/h1":           {rpd: []string{"internal/answer"}},
	"daemon/internal/gcfloor":      {},
	"daemon/internal/leader":       {rpd: []string{"backend", "daemon/internal/httpapi", "runtime/pools"}},
	"daemon/internal/security":     {rpd: []string{"api", "daemon/internal/httpapi", "daemon/statuspage", "spec"}, ext: append(hcl, "github.com/prometheus/client_golang/")},
	// The arbiter: the grant kinds, their records and the one grant
	// pipeline, on the runtime components; the HTTP edge (package daemon)
	// asks it, never the other way round.
	"daemon/arbiter": {rpd: append([]string{"api", "backend", "backend/ec2", "internal/open", "daemon/internal/component", "daemon/internal/holders", "daemon/internal/httpapi", "daemon/internal/records", "daemon/internal/security", "internal/answer", "reconcile", "spec"}, runtimeOf...),
		ext: append(hcl, "github.com/prometheus/client_golang/")},
	// The runner inventory: classes and the fleet, whose VMs are claims
	// on the arbiter's ceilings.
	"daemon/inventory": {rpd: append([]string{"api", "backend", "backend/ec2", "internal/open", "daemon/arbiter", "daemon/internal/component", "daemon/internal/httpapi", "daemon/internal/security", "reconcile", "spec"}, runtimeOf...),
		ext: append(hcl, "github.com/prometheus/client_golang/")},
	"daemon/watch": {ext: []string{"github.com/fsnotify/fsnotify"}},
	"daemon": {rpd: append([]string{"api", "backend", "backend/ec2", "internal/buildinfo", "internal/open", "daemon/arbiter", "daemon/inventory", "daemon/internal/component", "daemon/internal/gcfloor", "daemon/internal/h1", "daemon/internal/httpapi", "daemon/internal/leader", "daemon/internal/security", "daemon/statuspage", "daemon/watch", "reconcile", "spec"}, runtimeOf...),
		ext: append(hcl, "github.com/prometheus/client_golang/")},
	"cmd/rpd": {rpd: []string{"api", "backend", "backend/snapshot", "internal/buildinfo", "internal/open", "client", "daemon", "reconcile", "spec"},
		ext: append(hcl, "github.com/agext/levenshtein", "github.com/aymanbagabas/go-udiff", "github.com/mattn/go-isatty", "github.com/mitchellh/go-wordwrap", "golang.org/x/sys/unix")},
}

// TestImportRules checks every package of the module against rules: a
// package missing from the table, an import of the module's packages the
// table does not allow, or a third-party import it does not list fails.
func TestImportRules(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string]map[string]bool{} // package -> imported paths
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // a nested module has rules of its own
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		if imports[pkg] == nil {
			imports[pkg] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			imports[pkg][p] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(imports) < len(rules)/2 {
		t.Fatalf("found only %d packages under %s; is the test run from inside the module?", len(imports), root)
	}
	for _, pkg := range slices.Sorted(maps.Keys(imports)) {
		r, ok := rules[pkg]
		if !ok {
			t.Errorf("%s is not in the import rules: add it to rules in internal/layers/layers_test.go, with what it may import", pkg)
			continue
		}
		for _, p := range slices.Sorted(maps.Keys(imports[pkg])) {
			switch {
			case p == module || strings.HasPrefix(p, module+"/"):
				if dep := strings.TrimPrefix(strings.TrimPrefix(p, module), "/"); !slices.Contains(r.rpd, dep) {
					t.Errorf("%s imports %s, which the rules do not allow (allowed: %v)", pkg, dep, r.rpd)
				}
			case !strings.Contains(strings.SplitN(p, "/", 2)[0], "."):
				// the standard library
			case !slices.ContainsFunc(r.ext, func(prefix string) bool {
				return p == prefix || strings.HasPrefix(p, strings.TrimSuffix(prefix, "/")+"/")
			}):
				t.Errorf("%s imports the third-party %s, which the rules do not list for it (listed: %v)", pkg, p, r.ext)
			}
		}
	}
	for pkg := range rules {
		if imports[pkg] == nil {
			t.Errorf("rules name %s, which has no source files: remove it from the table", pkg)
		}
	}
}
