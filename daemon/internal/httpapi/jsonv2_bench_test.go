package httpapi

import (
	"bytes"
	stdjson "encoding/json"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/rpdhq/rpd/api"
)

// The hand-kept decoder of the hot body (CheckJSON + ParseAcquire) and the
// hand-kept encoder of its answer (api.Lease.AppendJSON) against
// encoding/json and github.com/go-json-experiment/json (encoding/json/v2),
// in one run: they stay only while they earn it. Each decoder is held to
// what the API refuses (unknown fields, a key twice): v2 refuses both by
// itself, the standard decoder needs CheckJSON for duplicates.
func BenchmarkHotPathJSON(b *testing.B) {
	body := []byte(`{"task_id":"bench","wait_seconds":5,"request_id":"0f8fad5b-d9cb-469f-a165-70867728950e"}`)
	b.Run("decode/hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r api.AcquireRequest
			if err := DecodeBody(bytes.NewReader(body), &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := CheckJSONTokens(body); err != nil {
				b.Fatal(err)
			}
			var r api.AcquireRequest
			dec := stdjson.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/json-v2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r api.AcquireRequest
			if err := jsonv2.Unmarshal(body, &r, jsonv2.RejectUnknownMembers(true)); err != nil {
				b.Fatal(err)
			}
		}
	})
	lease := api.Lease{LeaseID: "db.r-0f8fad5b-d9cb-469f-a165-70867728950e", Kind: api.KindPool, Pool: "db", TaskID: "bench",
		Slots: 1, TTLSeconds: 60, ExpiresAt: time.Date(2026, 11, 27, 3, 0, 0, 123456789, time.UTC)}
	buf := make([]byte, 0, 512)
	b.Run("encode/hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := lease.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := stdjson.Marshal(lease); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/json-v2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jsonv2.Marshal(lease); err != nil {
				b.Fatal(err)
			}
		}
	})
}
