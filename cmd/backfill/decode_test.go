package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// TestDecode_Decimal: the signed decimal form of every OOID of the test
// vectors, and of IDs from 2039 on (negative bigints), decodes to the
// same line as its hex form, as an argument and from standard input.
func TestDecode_Decimal(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../../testdata/ooid_test_vectors.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ids []ooid.ID
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) < 4 || cols[3] == "" || cols[3] == "expected_ooid_hex" {
			continue
		}
		id, err := ooid.Parse(cols[3])
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	// 2039 and the last second of uint32: negative as bigints.
	for _, ts := range []uint32{2194204416, 1<<31 + 1, 1<<32 - 1} {
		c, err := ooid.NewCollectorID(ts, 0x2a, 99)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ooid.ID(uint64(ts)<<32|0xF<<28|7), c)
	}
	if len(ids) < 8 {
		t.Fatalf("only %d IDs", len(ids))
	}
	negative := 0
	for _, id := range ids {
		dec := strconv.FormatInt(id.Int64(), 10)
		if id.Int64() < 0 {
			negative++
		}
		hexOut := decodeOut(t, []string{"decode", id.String()}, "")
		if !strings.Contains(hexOut, `"ooid":"`+id.String()+`"`) {
			t.Fatalf("decode %s = %q", id, hexOut)
		}
		if got := decodeOut(t, []string{"decode", dec}, ""); got != hexOut {
			t.Errorf("decode %s = %q, want %q (decode %s)", dec, got, hexOut, id)
		}
		if got := decodeOut(t, []string{"decode", "-"}, dec+"\n"); got != hexOut {
			t.Errorf("decode - <<< %s = %q, want %q", dec, got, hexOut)
		}
	}
	if negative < 6 {
		t.Errorf("%d negative bigints, want the 2039+ ones", negative)
	}
}

func decodeOut(t *testing.T, args []string, stdin string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if err := run(context.Background(), args, cli.Stdio{In: strings.NewReader(stdin), Out: &out, Err: &errb}); err != nil {
		t.Fatalf("backfill %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// TestParseAny_Rule: 16 hex digits are hex; 0x and up to 16 hex digits
// are hex; anything else a decimal, signed or unsigned; spaces around are
// ignored.
func TestParseAny_Rule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"50bef44df29c69e2", 0x50bef44df29c69e2, true},
		{"50BEF44DF29C69E2", 0x50bef44df29c69e2, true},
		{"5818356384229255650", 0x50bef44df29c69e2, true},
		{"1234567890123456", 0x1234567890123456, true}, // 16 digits: hex
		{"123456789012345", 123456789012345, true},     // 15: decimal
		{"-1", 1<<64 - 1, true},
		{"-9223372036854775808", 1 << 63, true},
		{"9223372036854775808", 1 << 63, true}, // unsigned
		{"18446744073709551615", 1<<64 - 1, true},
		{"18446744073709551616", 0, false},
		{"-9223372036854775809", 0, false},
		{"", 0, false},
		{"   ", 0, false},
		{"-", 0, false},
		{"+5", 5, true},
		{"+1234567890123456", 1234567890123456, true},       // + makes it decimal
		{"  5818356384229255650", 0x50bef44df29c69e2, true}, // psql's aligned column
		{"5818356384229255650 \r", 0x50bef44df29c69e2, true},
		{"\t50bef44df29c69e2", 0x50bef44df29c69e2, true},
		{"0x50bef44df29c69e2", 0x50bef44df29c69e2, true},
		{"0X50BEF44DF29C69E2", 0x50bef44df29c69e2, true},
		{"0x1f", 0x1f, true}, // to_hex leaves the leading zeros out
		{"0x", 0, false},
		{"0x150bef44df29c69e2", 0, false},
		{"0xg", 0, false},
		{"5 0", 0, false},
		{"50bef44df29c69eg", 0, false},
	} {
		id, err := ooid.ParseAny([]byte(tc.in))
		if (err == nil) != tc.ok || (tc.ok && uint64(id) != tc.want) {
			t.Errorf("ParseAny(%q) = %x, %v; want %x, ok %v", tc.in, uint64(id), err, tc.want, tc.ok)
		}
	}
}
