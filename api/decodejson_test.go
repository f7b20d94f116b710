package api

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"testing/quick"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
)

// sameLease compares leases as values: times by instant and offset (a
// decoded time's Location is a new one, equal but not the same pointer).
func sameLease(a, b Lease) bool {
	sameTime := func(x, y time.Time) bool {
		_, ox := x.Zone()
		_, oy := y.Zone()
		return x.Equal(y) && ox == oy && x.IsZero() == y.IsZero()
	}
	if !sameTime(a.GrantedAt, b.GrantedAt) || !sameTime(a.ExpiresAt, b.ExpiresAt) {
		return false
	}
	a.GrantedAt, a.ExpiresAt, b.GrantedAt, b.ExpiresAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return a == b
}

// DecodeJSON of what AppendJSON wrote is the lease, and json.Unmarshal's
// result, for random leases (strings needing escapes, odd floats and
// zones included).
func TestLeaseDecodeJSONRoundTrip(t *testing.T) {
	lease := func(seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 3))
		l := Lease{LeaseID: randString(r), Kind: randString(r), Pool: randString(r), Budget: randString(r), TaskID: randString(r),
			Priority: r.IntN(200) - 100, Slots: r.IntN(3), TTLSeconds: randFloat(r), GrantedAt: randTime(r), ExpiresAt: randTime(r),
			ScanRingBytes: r.Uint64() >> r.IntN(64), DeltaCacheBytes: uint64(r.IntN(2)) << 40, Spill: r.IntN(2) == 0, RequestID: randString(r)}
		b, err := l.AppendJSON(nil)
		if err != nil {
			return true // json.Marshal refuses it too (AppendJSON's test): nothing to decode
		}
		var got, want Lease
		gotErr, wantErr := got.DecodeJSON(b), json.Unmarshal(b, &want)
		// json.Marshal writes invalid UTF-8 as U+FFFD, and RFC 3339 drops
		// a zone offset's seconds: such a lease comes back another one.
		_, og := l.GrantedAt.Zone()
		_, oe := l.ExpiresAt.Zone()
		lossless := og%60 == 0 && oe%60 == 0
		for _, s := range []string{l.LeaseID, l.Kind, l.Pool, l.Budget, l.TaskID, l.RequestID} {
			lossless = lossless && utf8.ValidString(s)
		}
		if !lossless {
			l = got
		}
		if gotErr != nil || wantErr != nil || !sameLease(got, want) || !sameLease(got, l) {
			t.Errorf("%s:\n DecodeJSON %+v, %v\n json.Unmarshal %+v, %v\n encoded %+v", b, got, gotErr, want, wantErr, l)
			return false
		}
		return true
	}
	if err := quick.Check(lease, &quick.Config{MaxCount: 5000}); err != nil {
		t.Fatal(err)
	}
}

// decodeCases are bodies the fast path takes and ones it leaves to
// encoding/json; either way the outcome must be json.Unmarshal's.
var decodeCases = []string{
	`{"lease_id":"load/r-1","kind":"pool","pool":"load","task_id":"bench","priority":0,"slots":1,"ttl_seconds":60,"granted_at":"2026-11-27T05:00:00.123456789Z","expires_at":"2026-11-27T05:01:00.123456789Z","request_id":"0f8f"}`,
	` { "lease_id" : "a" , "priority" : -3 , "spill" : true , "scan_ring_bytes" : 18446744073709551615 } `,
	`{"lease_id":"a","extra":{"x":[1,2.5e3,{"y":null}],"z":"w"},"more":[],"obj":{},"t":true,"f":false,"n":null,"num":-0.5E-3}`,
	`{"lease_id":"a\"b\\c\/d\n\t\r\b\f"}`,
	`{"lease_id":"\u00fc"}`,
	`{"lease_id":"\ud800"}`,
	`{"lease_id":"ü\u2028"}`,
	"{\"lease_id\":\"\xff\"}",
	`{"LEASE_ID":"a"}`,
	`{"Lease_Id":"a","lease_id":"b"}`,
	"{\"leaſe_id\":\"a\"}",
	`{"lease\u005fid":"a"}`,
	`{"lease_id":"a","lease_id":"b"}`,
	`{"lease_id":null}`,
	`{"lease_id":1}`,
	`{"priority":1.0}`,
	`{"priority":1e2}`,
	`{"priority":9223372036854775808}`,
	`{"priority":"1"}`,
	`{"slots":-1}`,
	`{"scan_ring_bytes":-1}`,
	`{"ttl_seconds":1e400}`,
	`{"ttl_seconds":01}`,
	`{"ttl_seconds":1.}`,
	`{"ttl_seconds":-}`,
	`{"spill":null}`,
	`{"spill":"true"}`,
	`{"granted_at":null}`,
	`{"granted_at":"2026-11-27T05:00:00+05:30"}`,
	`{"granted_at":"2026-11-27 05:00:00Z"}`,
	`{"granted_at":"2026-11-27T05:00:00Z","expires_at":1}`,
	`{"expires_at":"2026-11-27T05:00:00\u005a"}`,
	`{"lease_id":"a"} x`,
	`{"lease_id":"a"}{}`,
	`{"lease_id":"a",}`,
	`{"lease_id" "a"}`,
	`{"lease_id":"a`,
	"{\"lease_id\":\"a\x01\"}",
	`{"lease_id":"\x"}`,
	`{"x":[1,]}`,
	`{"x":tru}`,
	`{"x":nul}`,
	`{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
	`{"x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
	`[]`,
	`null`,
	``,
	`   `,
	`{}`,
	`{"error":{"code":"unavailable","message":"pool \"load\" has no free slot; retry with wait_seconds","kind":"","leader":"http://10.0.0.1:7070"}}`,
	`{"error":{"code":"not_leader","message":"<x> & y"},"error":{"kind":"global"}}`,
	`{"error":null}`,
	`{"Error":{"code":"x"}}`,
	`{"error":{"Code":"x","status":7}}`,
	`{"error":{"code":"x","extra":[{"a":1}]},"other":1}`,
	`{"error":"x"}`,
}

func checkDecode(t *testing.T, body []byte) {
	t.Helper()
	// Decoded into zero values and into set ones (json.Unmarshal merges).
	seeds := []Lease{{}, {LeaseID: "old", Priority: 7, GrantedAt: time.Unix(1, 0).UTC(), Spill: true}}
	for _, seed := range seeds {
		got, want := seed, seed
		gotErr, wantErr := got.DecodeJSON(body), json.Unmarshal(body, &want)
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() || !reflect.DeepEqual(got, want) {
			t.Errorf("Lease %q:\n DecodeJSON %+v, %v\n json.Unmarshal %+v, %v", body, got, gotErr, want, wantErr)
		}
	}
	for _, seed := range []ErrorBody{{}, {Error: Error{Code: "old", Status: 409}}} {
		got, want := seed, seed
		gotErr, wantErr := got.DecodeJSON(body), json.Unmarshal(body, &want)
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() || !reflect.DeepEqual(got, want) {
			t.Errorf("ErrorBody %q:\n DecodeJSON %+v, %v\n json.Unmarshal %+v, %v", body, got, gotErr, want, wantErr)
		}
	}
}

func TestDecodeJSONIsJSONUnmarshal(t *testing.T) {
	for _, c := range decodeCases {
		checkDecode(t, []byte(c))
	}
}

// Any input decodes as json.Unmarshal decodes it, error for error; none
// panics. Without -fuzz it runs the cases above.
func FuzzDecodeJSON(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkDecode(t, body) })
}

func BenchmarkLeaseDecodeJSON(b *testing.B) {
	body := []byte(`{"lease_id":"load/r-0f8fad5bd9cb469fa16570867728950e","kind":"pool","pool":"load","task_id":"bench","priority":0,"slots":1,"ttl_seconds":60,"granted_at":"2026-11-27T05:00:00.123456789Z","expires_at":"2026-11-27T05:01:00.123456789Z","request_id":"0f8fad5bd9cb469fa16570867728950e"}`)
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var l Lease
			if err := json.Unmarshal(body, &l); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json-v2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var l Lease
			if err := jsonv2.Unmarshal(body, &l); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var l Lease
			if err := l.DecodeJSON(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
