package main

import (
	"fmt"
	"strconv"
	"strings"
)

func humanBytes(n int64) string {
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

// byteSize is a flag value of bytes: 1048576, 64k, 64KiB, 1M, 1GiB (binary
// multiples).
type byteSize int64

// String gives the size as the help and the flags write it: 64MiB, 1GiB,
// or bytes.
func (b *byteSize) String() string {
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

func (b *byteSize) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

func parseBytes(s string) (int64, error) {
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

func plural[N int | int64](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// count says n things: "1 bucket", "2 buckets".
func count[N int | int64](n N, one, many string) string {
	return fmt.Sprintf("%d %s", n, plural(n, one, many))
}
