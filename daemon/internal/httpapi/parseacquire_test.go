package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"testing/quick"

	"github.com/rpdhq/rpd/api"
)

// decodeStrict is what DecodeBody does without ParseAcquire: unknown
// fields refused, exactly one value.
func decodeStrict(b []byte) (api.AcquireRequest, error) {
	var v api.AcquireRequest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return v, fmt.Errorf("more than one JSON value (%v)", err)
	}
	return v, nil
}

// randBody writes an object of random fields: the shapes clients send, and
// the ones the fast path must leave to encoding/json (escapes, case
// variants, unknown keys, null, wrong types, odd numbers, trailing bytes).
func randBody(r *rand.Rand) []byte {
	keys := []string{"task_id", "priority", "priority_name", "slots", "wait_seconds", "ttl_seconds", "request_id", "Task_ID", "SLOTS", "bogus", ""}
	values := []string{`"job-1"`, `""`, `"a\"b"`, `"\u00fc"`, "\"\xc3\xbc\"", `"tab	x"`, `0`, `-0`, `17`, `-3`, `1.5`, `2.50`, `1e3`, `1E+2`, `-1e-2`, `01`, `1.`, `.5`, `-`, `9223372036854775808`,
		`1e400`, `null`, `true`, `{}`, `[]`, `"9"`, `3 `, ` 4`}
	ws := []string{"", " ", "\n\t", "\r"}
	var sb strings.Builder
	sb.WriteString(ws[r.IntN(len(ws))] + "{")
	for i := range r.IntN(5) {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(ws[r.IntN(len(ws))] + `"` + keys[r.IntN(len(keys))] + `"` + ws[r.IntN(len(ws))] + ":" + ws[r.IntN(len(ws))])
		sb.WriteString(values[r.IntN(len(values))])
	}
	sb.WriteString("}" + ws[r.IntN(len(ws))])
	switch r.IntN(12) {
	case 0:
		sb.WriteString("{}")
	case 1:
		return []byte(strings.TrimSuffix(sb.String(), "}"))
	case 2:
		return []byte(strings.Replace(sb.String(), "}", ",}", 1))
	}
	return []byte(sb.String())
}

// Wherever ParseAcquire answers, it answers what encoding/json decodes; and it
// covers every body the Go client sends.
func TestParseAcquireIsEncodingJSON(t *testing.T) {
	covered := 0
	prop := func(seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 3))
		b := randBody(r)
		var fast api.AcquireRequest
		if !ParseAcquire(b, &fast) {
			if !reflect.DeepEqual(fast, api.AcquireRequest{}) {
				t.Errorf("%s: not covered, yet the request was changed to %+v", b, fast)
				return false
			}
			return true
		}
		covered++
		want, err := decodeStrict(b)
		if err != nil || !reflect.DeepEqual(fast, want) {
			t.Errorf("%s:\n ParseAcquire %+v\n encoding/json %+v, %v", b, fast, want, err)
			return false
		}
		return true
	}
	if err := quick.Check(prop, &quick.Config{MaxCount: 20000}); err != nil {
		t.Fatal(err)
	}
	if covered < 1000 {
		t.Fatalf("only %d of 20000 random bodies took the fast path; the test shows little", covered)
	}
	// What clients send (AppendJSON of plain values) is always covered.
	sent := func(seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 4))
		ids := []string{"", "job-17", "pool/r-9", "x y"}
		req := api.AcquireRequest{TaskID: ids[r.IntN(4)], PriorityName: ids[r.IntN(4)], Slots: r.IntN(5), WaitSeconds: float64(r.IntN(600)) / 4,
			TTLSeconds: []float64{0, 1e-7, 30, 1e21}[r.IntN(4)], RequestID: ids[r.IntN(4)]}
		if r.IntN(2) == 0 {
			p := r.IntN(200) - 100
			req.Priority = &p
		}
		b, err := req.AppendJSON(nil)
		if err != nil {
			t.Error(err)
			return false
		}
		var got api.AcquireRequest
		if !ParseAcquire(b, &got) || !reflect.DeepEqual(got, req) {
			t.Errorf("%s: ParseAcquire %+v; want %+v", b, got, req)
			return false
		}
		return true
	}
	if err := quick.Check(sent, &quick.Config{MaxCount: 2000}); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkParseAcquireRequest(b *testing.B) {
	body := []byte(`{"task_id":"bench","wait_seconds":5,"request_id":"0f8fad5b-d9cb-469f-a165-70867728950e"}`)
	b.Run("ParseAcquire", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r api.AcquireRequest
			if !ParseAcquire(body, &r) {
				b.Fatal("not covered")
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeStrict(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
