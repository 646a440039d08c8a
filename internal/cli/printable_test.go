package cli

import "testing"

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, tabs\tand ünïcode", "plain text, tabs\tand ünïcode"},
		{"a\nb\rc", `a\nb\rc`},
		{"\x1b[31mred", `\x1b[31mred`},
		{"\u202egnp.exe", `\u202egnp.exe`},
		{"\u0085next line", `\u0085next line`},
		{"bad \xff byte", `bad \xff byte`},
		{"\x00\x7f", `\x00\x7f`},
	} {
		if got := Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
