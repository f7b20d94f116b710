package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Defaults of an HTTPSource's zero fields.
const (
	// DefaultHTTPTimeout bounds one request when Timeout is zero.
	DefaultHTTPTimeout = 5 * time.Second
	// DefaultHTTPField is the JSON field read when Field is empty.
	DefaultHTTPField = "active"
)

// maxUsageBody bounds how much of a response HTTPSource reads.
const maxUsageBody = 1 << 20

// HTTPSource GETs URL and reads the active count from a JSON field. Anything
// but a 2xx response whose field holds a JSON integer >= 0 is an error: a
// broken endpoint must never read as "0 active", which would unlock the
// ceiling.
type HTTPSource struct {
	URL string
	// Field is a dot path into nested JSON objects, e.g. "usage.active"
	// (default "active"). Array indexes are not supported.
	Field string
	// Timeout bounds the whole request, body included (default 5s).
	Timeout time.Duration
	// Client sends the request (default http.DefaultClient).
	Client *http.Client
}

// Usage performs one GET. The Reading's At is left zero: the ledger stamps it
// with the time it started asking, which is never later than the figure.
func (s *HTTPSource) Usage(ctx context.Context) (Reading, error) {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultHTTPTimeout
	}
	field := s.Field
	if field == "" {
		field = DefaultHTTPField
	}
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return Reading{}, fmt.Errorf("ledger: usage source URL %q: %w", s.URL, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return Reading{}, fmt.Errorf("ledger: usage source GET %s: %w", s.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxUsageBody+1))
	if err != nil {
		return Reading{}, fmt.Errorf("ledger: usage source GET %s: reading body: %w", s.URL, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Reading{}, fmt.Errorf("ledger: usage source GET %s: status %s; the endpoint must answer 2xx", s.URL, resp.Status)
	}
	if len(body) > maxUsageBody {
		return Reading{}, fmt.Errorf("ledger: usage source GET %s: body exceeds %d bytes", s.URL, maxUsageBody)
	}
	n, err := activeFromJSON(body, field)
	if err != nil {
		return Reading{}, fmt.Errorf("ledger: usage source GET %s: %w", s.URL, err)
	}
	return Reading{Active: n}, nil
}

// activeFromJSON finds the dot path field in body and returns it as a count.
func activeFromJSON(body []byte, field string) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return 0, fmt.Errorf("response is not valid JSON: %w", err)
	}
	if dec.More() {
		return 0, fmt.Errorf("response has data after the JSON value")
	}
	for _, key := range strings.Split(field, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return 0, fmt.Errorf("field %q: %q is not inside a JSON object", field, key)
		}
		if v, ok = obj[key]; !ok {
			return 0, fmt.Errorf("field %q is missing from the response", field)
		}
	}
	num, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("field %q is %s, want a JSON integer", field, jsonKind(v))
	}
	n, err := strconv.ParseInt(num.String(), 10, 0)
	if err != nil {
		return 0, fmt.Errorf("field %q is %s, want a JSON integer count", field, num)
	}
	if n < 0 {
		return 0, fmt.Errorf("field %q is %d, a count cannot be negative", field, n)
	}
	return int(n), nil
}

func jsonKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}
