package spec

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
)

// ErrSyntax is wrapped by ParseSize and ParseDuration when their input is not
// a size or duration at all (as opposed to one out of range).
var ErrSyntax = errors.New("invalid syntax")

// sizeUnits maps every accepted unit suffix to its multiplier. Decimal units
// (KB, MB, …) are powers of 1000, binary units (KiB, MiB, …) powers of 1024.
var sizeUnits = map[string]uint64{
	"B":   1,
	"KB":  1000,
	"MB":  1000 * 1000,
	"GB":  1000 * 1000 * 1000,
	"TB":  1000 * 1000 * 1000 * 1000,
	"KiB": 1 << 10,
	"MiB": 1 << 20,
	"GiB": 1 << 30,
	"TiB": 1 << 40,
}

// ParseSize parses a byte size: a non-negative number followed by an optional
// unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), such as "4GiB", "512MiB",
// "200MB", "1.5GiB" or "1024" (bytes). Units are case-sensitive, spaces between
// the number and the unit are allowed, and the result must be a whole number
// of bytes that fits in a uint64.
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	if num == "" || len(num) > 40 {
		return 0, fmt.Errorf("%q is not a size: %w", s, ErrSyntax)
	}
	mult := uint64(1)
	if unit != "" {
		m, ok := sizeUnits[unit]
		if !ok {
			return 0, fmt.Errorf("%q is not a size: unknown unit %q: %w", s, unit, ErrSyntax)
		}
		mult = m
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("%q is not a size: %w", s, ErrSyntax)
	}
	r.Mul(r, new(big.Rat).SetUint64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("%q is not a whole number of bytes", s)
	}
	n := r.Num()
	if !n.IsUint64() {
		return 0, fmt.Errorf("%q is too large (the maximum is %d bytes)", s, uint64(math.MaxUint64))
	}
	return n.Uint64(), nil
}

// FormatSize renders n bytes with the largest binary unit that divides it
// exactly ("4GiB", "1536KiB", "1000B"), the inverse of ParseSize.
func FormatSize(n uint64) string {
	for _, u := range []struct {
		name string
		mult uint64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return fmt.Sprintf("%d%s", n/u.mult, u.name)
		}
	}
	return fmt.Sprintf("%dB", n)
}

// ParseDuration parses a duration in Go's syntax ("300ms", "3s", "2m",
// "1h30m") extended with a leading day count ("4d", "14d", "1d12h"), because
// queue retention is naturally written in days. Negative durations are
// rejected.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty duration: %w", ErrSyntax)
	}
	if strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("%q is negative: durations must be zero or more", s)
	}
	var days time.Duration
	if i := strings.IndexByte(t, 'd'); i >= 0 {
		n := int64(0)
		for _, c := range t[:i] {
			if c < '0' || c > '9' || n > 1_000_000 {
				return 0, fmt.Errorf("%q is not a duration: %w", s, ErrSyntax)
			}
			n = n*10 + int64(c-'0')
		}
		if i == 0 {
			return 0, fmt.Errorf("%q is not a duration: %w", s, ErrSyntax)
		}
		if n > maxDays {
			return 0, fmt.Errorf("%q is too long (at most %dd)", s, maxDays)
		}
		days = time.Duration(n) * 24 * time.Hour
		t = t[i+1:]
		if t == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: %w", s, ErrSyntax)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative: durations must be zero or more", s)
	}
	if days > 0 && d > math.MaxInt64-days {
		return 0, fmt.Errorf("%q is too long", s)
	}
	return days + d, nil
}

// maxDays is the longest whole number of days a time.Duration holds.
const maxDays = math.MaxInt64 / int64(24*time.Hour)

// FormatDuration renders d the way ParseDuration reads it and a person
// writes it: days for whole multiples of 24h, and no zero minutes or
// seconds after a larger unit ("4d", "10m", "1h30m", "1m30s", "500ms").
func FormatDuration(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= day && d%day == 0 {
		return fmt.Sprintf("%dd", d/day)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
