package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The status page polls GET /v1/status, /v1/leases and /v1/classes every
// second for every open tab. WriteJSONConditional answers those with an
// ETag (a hash of the body) and a bodiless 304 when the client already has
// it, so that an idle stack costs a tab a few hundred bytes a second
// instead of the whole inventory. The body is still built: what it saves
// is bytes on the wire and the client's parsing, not the daemon's work.

// WriteJSONConditional writes v as WriteJSON does, with an ETag, or 304
// Not Modified when r's If-None-Match names it.
func WriteJSONConditional(w http.ResponseWriter, r *http.Request, v any) error {
	buf := answerBufs.Get().(*bytes.Buffer)
	defer PutBuf(&answerBufs, buf)
	buf.Reset()
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		http.Error(w, `{"error":{"code":"internal","message":"cannot encode the response"}}`, http.StatusInternalServerError)
		return err
	}
	h := fnv.New64a()
	h.Write(buf.Bytes())
	etag := fmt.Sprintf(`"%016x"`, h.Sum64())
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "no-cache") // may be stored, must be revalidated
	if etagMatch(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(buf.Bytes())
	return err
}

// etagMatch reports whether an If-None-Match header lists etag (or is *).
func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

// MaxListLimit bounds ?limit= of the paged lists.
const MaxListLimit = 10000

// Window is one page of a list answer (GET /v1/leases, GET
// /v1/classes/{class}/instances): ?offset= and ?limit= (no limit: every
// item), the items inside it, and how many there are in all.
type Window[T any] struct {
	offset, limit int // limit < 0: none
	Total         int
	Out           []T
}

// PageBounds reads ?offset= and ?limit=.
func PageBounds[T any](q url.Values) (Window[T], error) {
	get := func(name string) (int, bool, error) {
		v := q.Get(name)
		if v == "" {
			return 0, false, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, false, BadRequest("?%s=%q: use a whole number from 0", name, v)
		}
		return n, true, nil
	}
	offset, _, err := get("offset")
	if err != nil {
		return Window[T]{}, err
	}
	limit, limited, err := get("limit")
	if err != nil {
		return Window[T]{}, err
	}
	if !limited {
		limit = -1
	} else if limit < 1 || limit > MaxListLimit {
		return Window[T]{}, BadRequest("?limit=%d: use 1 to %d", limit, MaxListLimit)
	}
	return Window[T]{offset: offset, limit: limit, Out: []T{}}, nil
}

// Add counts one item and keeps it when it falls inside the Window; build
// makes it, and is called only then.
func (w *Window[T]) Add(build func() T) {
	if w.Total >= w.offset && (w.limit < 0 || len(w.Out) < w.limit) {
		w.Out = append(w.Out, build())
	}
	w.Total++
}

// Next is the ?offset= of the next page, 0 when none follows.
func (w *Window[T]) Next() int {
	if end := w.offset + len(w.Out); w.limit >= 0 && end < w.Total {
		return end
	}
	return 0
}
