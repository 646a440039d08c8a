// Package units reads and writes sizes in bytes as backfill's flags,
// summaries and progress lines say them: binary multiples (KiB, MiB, GiB),
// never decimal ones.
package units

import (
	"fmt"
	"strconv"
	"strings"
)

// Bytes says n bytes in binary units: 512 B, 3.0 MiB, 1.25 GiB.
func Bytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Size is a flag value of bytes: 1048576, 64k, 64KiB, 1M, 1GiB (binary
// multiples).
type Size int64

// String gives the size as the help and the flags write it: 64MiB, 1GiB,
// or bytes.
func (b *Size) String() string {
	n := int64(*b)
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// Set parses a size as Parse does.
func (b *Size) Set(s string) error {
	n, err := Parse(s)
	if err != nil {
		return err
	}
	*b = Size(n)
	return nil
}

// Parse parses a count of bytes with an optional binary unit: 64k,
// 64KiB, 1M, 1GiB.
func Parse(s string) (int64, error) {
	num := strings.TrimRight(s, "KMGTkmgtiIbB")
	mult := int64(1)
	switch strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(s[len(num):], "B"), "b")) {
	case "":
	case "K", "KI":
		mult = 1 << 10
	case "M", "MI":
		mult = 1 << 20
	case "G", "GI":
		mult = 1 << 30
	case "T", "TI":
		mult = 1 << 40
	default:
		return 0, fmt.Errorf("bad size %q", s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}
