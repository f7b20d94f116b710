package httpapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rpdhq/rpd/api"
)

// FuzzCheckJSONFastPath holds CheckJSON's allocation-free scan to the
// token walk that defines it: same verdict, same words, for any body.
func FuzzCheckJSONFastPath(f *testing.F) {
	for _, s := range []string{
		`{}`, ``, ` {"task_id":"a","slots":2,"wait_seconds":1.5e0,"ttl_seconds":-0.5E+3} `,
		`{"a":1,"a":2}`, `{"a":{"a":1},"b":[{"a":1,"a":2}]}`, `{"a":tru,"a":1}`, `{"a":1}{"a":1}`,
		`{"a":"` + strings.Repeat("x", api.MaxIDBytes+1) + `"}`, `{"a":"\u0061","\u0061":1}`,
		`{"a":01}`, `{"a":1.}`, `{"a":-}`, `[1,2,[3,{"k":null,"k":false}]]`, `{"é":1,"é":2}`,
		`{"a" 1}`, `{"a":1,}`, `[1,]`, `"` + strings.Repeat("y", api.MaxIDBytes) + `"`,
		strings.Repeat("[", 40) + strings.Repeat("]", 40),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, slow := CheckJSON(body), CheckJSONTokens(body)
		if fmt.Sprint(fast) != fmt.Sprint(slow) {
			t.Fatalf("CheckJSON(%q) = %v; the token walk says %v", body, fast, slow)
		}
		if scanJSON(body) && slow != nil {
			t.Fatalf("scanJSON passed %q, which the token walk refuses: %v", body, slow)
		}
	})
}
