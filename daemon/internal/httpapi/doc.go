// Package httpapi is the daemon's HTTP plumbing, shared by its edge and its
// arbiter: the API's error model (Error, Classify: the runtime packages'
// sentinels to a status and an API code), the one place request bodies are
// read and checked (Decode: bounded size and time, no unknown fields, no
// duplicate keys, no over-long strings, the hot acquire body decoded by
// hand), answers (WriteJSON, WriteJSONConditional with an ETag, paged lists
// through Window), and the guards against what net/http would answer in
// plain text (ServerErrorBody) or redirect (UncleanPath).
//
// It holds no state of a daemon; docs/api.md documents the error model.
package httpapi
