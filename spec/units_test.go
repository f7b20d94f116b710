package spec

import (
	"errors"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
	}{
		{"0", 0}, {"1024", 1024}, {"1B", 1}, {"1KB", 1000}, {"200MB", 200_000_000},
		{"1GB", 1_000_000_000}, {"2TB", 2_000_000_000_000}, {"1KiB", 1024},
		{"512MiB", 512 << 20}, {"4GiB", 4 << 30}, {"1TiB", 1 << 40},
		{"1.5GiB", 3 << 29}, {" 4 GiB ", 4 << 30}, {"0.5KB", 500},
		{"18446744073709551615", math.MaxUint64},
	} {
		got, err := ParseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		in     string
		syntax bool
	}{
		{"", true}, {"lots", true}, {"4gb", true}, {"4 GiBs", true}, {"-1", true},
		{"GiB", true}, {"1.2.3MB", true}, {"1e3", true}, {"0.3B", false},
		{"18446744073709551616", false}, {"16777216TiB", false},
		{"1234567890123456789012345678901234567890123", true},
	} {
		_, err := ParseSize(tc.in)
		if err == nil {
			t.Errorf("ParseSize(%q) succeeded", tc.in)
			continue
		}
		if errors.Is(err, ErrSyntax) != tc.syntax {
			t.Errorf("ParseSize(%q) = %v; ErrSyntax want %v", tc.in, err, tc.syntax)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"0s", 0}, {"0", 0}, {"300ms", 300 * time.Millisecond}, {"3s", 3 * time.Second},
		{"2m", 2 * time.Minute}, {"1h30m", 90 * time.Minute}, {"4d", 96 * time.Hour},
		{"14d", 14 * 24 * time.Hour}, {"1d12h", 36 * time.Hour}, {" 5s ", 5 * time.Second}, {"106751d", 106751 * 24 * time.Hour},
	} {
		got, err := ParseDuration(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "3", "-3s", "d", "4dd", "1.5d", "xd", "3 seconds", "99999999999999999d", "106752d", "106751d9999999h", "1d-3s"} {
		if d, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, d)
		}
	}
}

func TestFormatRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.Uint64().Draw(t, "n")
		if n%4 == 0 {
			n = n >> rapid.IntRange(0, 63).Draw(t, "shift") << rapid.IntRange(0, 40).Draw(t, "unit")
		}
		s := FormatSize(n)
		got, err := ParseSize(s)
		if err != nil || got != n {
			t.Fatalf("ParseSize(FormatSize(%d)=%q) = %d, %v", n, s, got, err)
		}
		d := time.Duration(rapid.Int64Range(0, math.MaxInt64).Draw(t, "d"))
		if rapid.Bool().Draw(t, "days") {
			d = d / (24 * time.Hour) * 24 * time.Hour
		}
		ds := FormatDuration(d)
		gd, err := ParseDuration(ds)
		if err != nil || gd != d {
			t.Fatalf("ParseDuration(FormatDuration(%d)=%q) = %v, %v", d, ds, gd, err)
		}
	})
}

func TestFormatDurationAsWritten(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {30 * time.Second, "30s"}, {10 * time.Minute, "10m"}, {90 * time.Second, "1m30s"},
		{time.Hour, "1h"}, {90 * time.Minute, "1h30m"}, {time.Hour + time.Second, "1h0m1s"},
		{500 * time.Millisecond, "500ms"}, {96 * time.Hour, "4d"}, {25 * time.Hour, "25h"},
	} {
		if got := FormatDuration(tc.d); got != tc.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
