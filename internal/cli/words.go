package cli

import (
	"fmt"
	"strings"
)

// Plural is one when n is 1, else many.
func Plural[N int | int64](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Count says n things: "1 bucket", "2 buckets".
func Count[N int | int64](n N, one, many string) string {
	return fmt.Sprintf("%d %s", n, Plural(n, one, many))
}

// ShellQuote quotes s for a POSIX shell, leaving plain words as they are.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
