// Package ascii holds the one byte-level helper the hand-kept wire code
// (api's JSON decoders, the client's HTTP/1.1 reader) shares.
package ascii

// EqualFold reports whether b and s are equal under ASCII case folding
// (what HTTP header names and encoding/json's key matching compare by, for
// ASCII keys), without converting b to a string.
func EqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
