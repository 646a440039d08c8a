package ooid

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func keyedForTest(t testing.TB, bits int, ov ...Override) Scheme {
	t.Helper()
	kt, err := NewKeyTable("test-seed", 7, ov)
	if err != nil {
		t.Fatal(err)
	}
	return KeyedScheme(bits, kt)
}

// refDeriveKey is DeriveKey written from its documentation.
func refDeriveKey(seed string, i uint64) Key {
	msg := append([]byte("backfill-ooid-key\x00"+seed+"\x00"), binary.BigEndian.AppendUint64(nil, i)...)
	sum := sha256.Sum256(msg)
	return Key{binary.LittleEndian.Uint64(sum[0:8]), binary.LittleEndian.Uint64(sum[8:16])}
}

func TestKeyedScheme_IDs(t *testing.T) {
	tn, _ := ParseTextname(goodTimed)
	s := keyedForTest(t, 24, Override{TS: tn.TS, Index: 3})
	other := keyedForTest(t, 24)
	for _, c := range []struct {
		s   Scheme
		key uint64
	}{{s, 3}, {other, 7}} {
		r, err := c.s.Report(goodTimed)
		if err != nil {
			t.Fatal(err)
		}
		base := uint32(SipHash24(refDeriveKey("test-seed", c.key), goodTimed)) & (1<<24 - 1)
		for _, ndx := range []uint32{0, 1, 1<<24 - 1} {
			want := NewBackfilledID(tn.TS, (base+ndx)&(1<<24-1))
			if got := r.ID(ndx); got != want {
				t.Errorf("%v: ID(%d) = %v, want %v", c.s, ndx, got, want)
			}
		}
	}
	if s.Equal(other) || !s.Equal(keyedForTest(t, 24, Override{TS: tn.TS, Index: 3})) {
		t.Error("Equal does not follow the key table")
	}
	if s.Equal(keyedForTest(t, 25, Override{TS: tn.TS, Index: 3})) || s.Equal(DefaultScheme) {
		t.Error("Equal ignores the width or the hash")
	}
	named := Scheme{CounterBits: 24, SHA1Offset: NoSHA1Offset, Table: s.Table}
	if !named.Equal(s) {
		t.Error("a scheme known by name is not Equal to the loaded one")
	}
	if _, err := named.Report(goodTimed); !errors.Is(err, ErrNoKeys) {
		t.Errorf("Report without keys: %v, want ErrNoKeys", err)
	}
}

func TestNewKeyTable_Refuses(t *testing.T) {
	for name, c := range map[string]struct {
		seed string
		ov   []Override
	}{
		"empty seed":     {"", nil},
		"space in seed":  {"a b", nil},
		"long seed":      {strings.Repeat("x", MaxSeedLen+1), nil},
		"two for one ts": {"s", []Override{{5, 1}, {5, 2}}},
		"default again":  {"s", []Override{{5, 7}}},
	} {
		if _, err := NewKeyTable(c.seed, 7, c.ov); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	a, _ := NewKeyTable("s", 7, []Override{{9, 1}, {5, 2}})
	b, _ := NewKeyTable("s", 7, []Override{{5, 2}, {9, 1}})
	if a.ID() != b.ID() {
		t.Error("the order of the overrides changes the table's ID")
	}
}

func TestSchemeFile_RoundTrip(t *testing.T) {
	for _, s := range []Scheme{
		DefaultScheme,
		{CounterBits: 20, SHA1Offset: 0},
		keyedForTest(t, 24),
		keyedForTest(t, 20, Override{TS: 1, Index: 0}, Override{TS: 1354691661, Index: 1 << 40}, Override{TS: 1<<32 - 1, Index: 3}),
	} {
		b, err := MarshalScheme(s, "found by a test", "two\nlines")
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseScheme(b)
		if err != nil {
			t.Fatalf("%v: %v\n%s", s, err, b)
		}
		if !got.Equal(s) || got.String() != s.String() {
			t.Errorf("round trip: %v, want %v", got, s)
		}
		if s.Keyed() && (got.Keys().Seed() != s.Keys().Seed() || len(got.Keys().Overrides()) != len(s.Keys().Overrides())) {
			t.Errorf("keys differ after a round trip")
		}
		again, _ := MarshalScheme(got, "found by a test", "two\nlines")
		if !bytes.Equal(again, b) {
			t.Errorf("marshal is not stable:\n%s\n%s", b, again)
		}
		for _, name := range []string{goodTimed, goodNoRID} {
			r1, _ := s.Report(name)
			r2, _ := got.Report(name)
			if r1.ID(5) != r2.ID(5) {
				t.Errorf("IDs differ after a round trip")
			}
		}
	}
}

func TestSchemeFile_Refused(t *testing.T) {
	good, err := MarshalScheme(keyedForTest(t, 24, Override{TS: 100, Index: 2}))
	if err != nil {
		t.Fatal(err)
	}
	resum := func(b []byte) []byte { // re-checksum an edited body
		i := bytes.LastIndex(b, []byte("sha256 "))
		body := b[:i]
		sum := sha256.Sum256(body)
		return append(append([]byte{}, body...), []byte("sha256 "+hexOf(sum[:])+"\n")...)
	}
	cases := map[string]struct {
		b    []byte
		want string
	}{
		"checksum mismatch":  {bytes.Replace(good, []byte("override 100 2"), []byte("override 100 3"), 1), "checksum mismatch"},
		"unknown version":    {bytes.Replace(good, []byte(schemeMagic+" 1"), []byte(schemeMagic+" 2"), 1), "unknown version"},
		"not a scheme":       {[]byte("hello\n"), "not a backfill scheme file"},
		"empty":              {nil, "empty"},
		"no sha256":          {good[:bytes.LastIndex(good, []byte("sha256"))], "no sha256 line"},
		"truncated mid-line": {good[:len(good)-5], "truncated"},
		"cut in the body":    {good[:bytes.Index(good, []byte("seed"))+3], "truncated"},
		"wrong key hex":      {resum(bytes.Replace(good, []byte("key 7 "), []byte("key 7 00"), 1)), "the file says"},
		"unknown hash":       {resum(bytes.Replace(good, []byte("hash siphash-2-4"), []byte("hash md5"), 1)), "unknown hash"},
		"bits out of range":  {resum(bytes.Replace(good, []byte("counter_bits 24"), []byte("counter_bits 30"), 1)), "counter_bits"},
		"line after sum":     {append(append([]byte{}, good...), "override 5 5\n"...), "follows the checksum"},
		"extra line":         {resum(bytes.Replace(good, []byte("override 100 2\n"), []byte("override 100 2\nfoo bar\n"), 1)), "unexpected line"},
		"decreasing ts":      {resum(bytes.Replace(good, []byte("override 100 2\n"), []byte("override 100 2\noverride 99 2\n"), 1)), "must increase"},
		"too large":          {make([]byte, MaxSchemeFile+1), "larger than"},
	}
	for name, c := range cases {
		_, err := ParseScheme(c.b)
		if !errors.Is(err, ErrSchemeFile) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an ErrSchemeFile saying %q", name, err, c.want)
		}
	}
	// Comments may be added only before the checksum is made.
	if _, err := ParseScheme(append([]byte("# note\n"), good...)); err == nil {
		t.Error("a comment added after writing passed the checksum")
	}
}

func hexOf(b []byte) string {
	const d = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, d[c>>4], d[c&15])
	}
	return string(out)
}

func FuzzParseScheme(f *testing.F) {
	for _, s := range []Scheme{DefaultScheme, keyedForTest(f, 24), keyedForTest(f, 20, Override{TS: 9, Index: 1})} {
		b, err := MarshalScheme(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseScheme(b)
		if err != nil {
			if !errors.Is(err, ErrSchemeFile) {
				t.Fatalf("error %v does not wrap ErrSchemeFile", err)
			}
			return
		}
		again, err := MarshalScheme(s)
		if err != nil {
			t.Fatalf("a parsed scheme does not marshal: %v", err)
		}
		s2, err := ParseScheme(again)
		if err != nil || !s2.Equal(s) {
			t.Fatalf("re-marshalled scheme: %v %v", s2, err)
		}
	})
}
