package api

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/quick"
	"time"
)

// randString draws from plain IDs and from strings json.Marshal escapes.
func randString(r *rand.Rand) string {
	pieces := []string{"", "a", "job-17", "pool/r-", "ü", "<", ">", "&", `"`, `\`, "\n", "\x00", "\u2028", "\xff", " ", "Z", "9"}
	var sb strings.Builder
	for range r.IntN(4) {
		sb.WriteString(pieces[r.IntN(len(pieces))])
	}
	return sb.String()
}

func randFloat(r *rand.Rand) float64 {
	switch r.IntN(8) {
	case 0:
		return 0
	case 1:
		return math.Copysign(0, -1)
	case 2:
		return 1e-7 * r.Float64()
	case 3:
		return 1e21 * (1 + r.Float64())
	case 4:
		return float64(r.IntN(600))
	case 5:
		return []float64{math.Inf(1), math.NaN(), 5e-324, math.MaxFloat64}[r.IntN(4)]
	default:
		return (r.Float64() - 0.5) * 1e6
	}
}

func randTime(r *rand.Rand) time.Time {
	zones := []*time.Location{time.UTC, time.FixedZone("x", 5*3600+30*60), time.FixedZone("y", -7*3600), time.FixedZone("s", 61), time.FixedZone("far", 25*3600)}
	switch r.IntN(6) {
	case 0:
		return time.Time{}
	case 1:
		return time.Date(10000+r.IntN(5), 1, 1, 0, 0, 0, 0, time.UTC)
	case 2:
		return time.Date(-1-r.IntN(5), 1, 1, 0, 0, 0, 0, time.UTC)
	default:
		return time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(zones[r.IntN(len(zones))])
	}
}

// AppendJSON writes what json.Marshal writes, or fails as it fails.
func TestAppendJSONIsJSONMarshal(t *testing.T) {
	same := func(name string, v any, got []byte, gotErr error) bool {
		want, wantErr := json.Marshal(v)
		if (gotErr != nil) != (wantErr != nil) || gotErr == nil && string(got) != string(want) {
			t.Errorf("%s %+v:\n AppendJSON %s, %v\n json.Marshal %s, %v", name, v, got, gotErr, want, wantErr)
			return false
		}
		return true
	}
	acquire := func(seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 1))
		req := AcquireRequest{TaskID: randString(r), PriorityName: randString(r), Slots: r.IntN(5) - 1, WaitSeconds: randFloat(r), TTLSeconds: randFloat(r), RequestID: randString(r)}
		if r.IntN(2) == 0 {
			p := r.IntN(200) - 100
			req.Priority = &p
		}
		got, err := req.AppendJSON([]byte("prefix"))
		if err == nil && !strings.HasPrefix(string(got), "prefix") {
			t.Errorf("the prefix is lost: %s", got)
			return false
		}
		return same("AcquireRequest", req, []byte(strings.TrimPrefix(string(got), "prefix")), err)
	}
	lease := func(seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 2))
		l := Lease{LeaseID: randString(r), Kind: randString(r), Pool: randString(r), Budget: randString(r), TaskID: randString(r),
			Priority: r.IntN(200) - 100, Slots: r.IntN(3), TTLSeconds: randFloat(r), GrantedAt: randTime(r), ExpiresAt: randTime(r),
			ScanRingBytes: r.Uint64() >> r.IntN(64), DeltaCacheBytes: uint64(r.IntN(2)) << 40, Spill: r.IntN(2) == 0, RequestID: randString(r)}
		got, err := l.AppendJSON(nil)
		return same("Lease", l, got, err)
	}
	cfg := &quick.Config{MaxCount: 5000}
	if err := quick.Check(acquire, cfg); err != nil {
		t.Fatal(err)
	}
	if err := quick.Check(lease, cfg); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkLeaseJSON(b *testing.B) {
	l := Lease{LeaseID: "load/l-123456", Kind: KindPool, Pool: "load", TaskID: "bench", Slots: 1, TTLSeconds: 60, ExpiresAt: time.Now()}
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(l)
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 512)
		for b.Loop() {
			buf, _ = l.AppendJSON(buf[:0])
		}
	})
}
