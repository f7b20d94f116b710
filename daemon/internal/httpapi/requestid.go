package httpapi

import "github.com/rpdhq/rpd/api"

// CheckRequestID validates a request_id: it becomes part of a lease ID, so
// it must fit a URL path segment and leave the ID's separators alone.
func CheckRequestID(id string) error {
	if len(id) > api.MaxRequestIDLen {
		return BadRequest("request_id is %d bytes long; at most %d", len(id), api.MaxRequestIDLen)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return BadRequest("request_id %q: use letters, digits, '-' and '_' (such as a random hex string)", id)
		}
	}
	return nil
}
