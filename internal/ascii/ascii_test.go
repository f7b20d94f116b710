package ascii

import (
	"strings"
	"testing"
	"testing/quick"
)

func TestEqualFoldMatchesStringsEqualFoldOnASCII(t *testing.T) {
	ascii := func(s string) string {
		b := []byte(s)
		for i := range b {
			b[i] &= 0x7f
		}
		return string(b)
	}
	f := func(a, b string) bool {
		a, b = ascii(a), ascii(b)
		return EqualFold([]byte(a), b) == strings.EqualFold(a, b) &&
			EqualFold([]byte(a), strings.ToUpper(a)) && EqualFold([]byte(strings.ToLower(a)), a)
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 5000}); err != nil {
		t.Fatal(err)
	}
	if EqualFold([]byte("Content-Length"), "content-lengtH") != true || EqualFold([]byte("a"), "ab") {
		t.Fatal("EqualFold is wrong on the fixed cases")
	}
}
