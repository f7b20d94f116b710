package spec

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// Schema names every block the decoder knows, nested ones included, so
// that tests generated from it cover the whole language.
func TestSchemaCoversEveryBlock(t *testing.T) {
	for _, b := range topSchema.Blocks {
		if b.Type == "variable" || b.Type == "locals" {
			continue // the language's own plumbing, not settings
		}
		if _, ok := blockSchemas[b.Type]; !ok {
			t.Errorf("blockSchemas lacks the top-level block %q", b.Type)
		}
	}
	paths := slices.Collect(maps.Keys(blockSchemas))
	for path, schema := range blockSchemas {
		for _, b := range schema.Blocks {
			nested := path + "." + b.Type
			if !slices.ContainsFunc(paths, func(p string) bool { return p == nested || strings.HasPrefix(p, nested+".") }) {
				t.Errorf("blockSchemas lacks the nested block %s", nested)
			}
		}
	}
	s := Schema()
	if len(s) != len(blockSchemas) || !slices.Contains(s["pool"], "slots") || !slices.Contains(s["runner_class.queue"], "visibility_timeout") {
		t.Errorf("Schema() = %v", s)
	}
}
