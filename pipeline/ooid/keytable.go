package ooid

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
)

// HashSipHash and HashSHA1Window name the two ways a scheme file may take
// the counter base.
const (
	HashSipHash    = "siphash-2-4"
	HashSHA1Window = "sha1-window"
)

// MaxSeedLen bounds a key family's seed.
const MaxSeedLen = 64

// DeriveKey returns key i of the family named by seed: the first 16 bytes
// of SHA-256("backfill-ooid-key" 0x00 seed 0x00 i), i as 8 big-endian
// bytes. Anyone can recompute a key from its seed and index, so a scheme
// file names keys by index and a search over a key range is repeatable.
func DeriveKey(seed string, i uint64) Key {
	h := sha256.New()
	h.Write([]byte("backfill-ooid-key\x00"))
	h.Write([]byte(seed))
	var b [9]byte
	binary.BigEndian.PutUint64(b[1:], i)
	h.Write(b[:])
	var k [16]byte
	copy(k[:], h.Sum(nil))
	return KeyFromBytes(k)
}

// Override gives the reports of one timestamp the key of index Index of
// the family instead of the default key.
type Override struct {
	TS    uint32
	Index uint64
}

// KeyTable is the keys of a keyed scheme: one default key of a seeded
// family, and for the few timestamps whose reports collide under it
// another key of the same family. Collisions happen only between reports
// that share a timestamp, so a key per timestamp keeps every ID a pure
// function of (textname, ndx, scheme). It is immutable once made.
type KeyTable struct {
	seed      string
	def       uint64
	overrides []Override
	defKey    Key
	byTS      map[uint32]Key
	id        string
}

// NewKeyTable checks and builds a key table. The overrides are sorted by
// timestamp; two for one timestamp, or one that repeats the default key,
// are refused, so that a table has one canonical form.
func NewKeyTable(seed string, def uint64, overrides []Override) (*KeyTable, error) {
	if err := checkSeed(seed); err != nil {
		return nil, err
	}
	ov := slices.Clone(overrides)
	slices.SortFunc(ov, func(a, b Override) int { return cmpU32(a.TS, b.TS) })
	t := &KeyTable{seed: seed, def: def, overrides: ov, defKey: DeriveKey(seed, def), byTS: make(map[uint32]Key, len(ov))}
	for i, o := range ov {
		if i > 0 && ov[i-1].TS == o.TS {
			return nil, fmt.Errorf("key table: two keys for timestamp %d", o.TS)
		}
		if o.Index == def {
			return nil, fmt.Errorf("key table: timestamp %d overridden with the default key %d", o.TS, def)
		}
		t.byTS[o.TS] = DeriveKey(seed, o.Index)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\nseed %s\nkey %d\n", HashSipHash, seed, def)
	for _, o := range ov {
		fmt.Fprintf(h, "override %d %d\n", o.TS, o.Index)
	}
	t.id = hex.EncodeToString(h.Sum(nil)[:8])
	return t, nil
}

func cmpU32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func checkSeed(seed string) error {
	if seed == "" || len(seed) > MaxSeedLen {
		return fmt.Errorf("key seed %q: want 1..%d characters", seed, MaxSeedLen)
	}
	for _, c := range []byte(seed) {
		if c <= ' ' || c > '~' {
			return fmt.Errorf("key seed %q: want printable ASCII without spaces", seed)
		}
	}
	return nil
}

// ID names the table: 16 hex digits of the SHA-256 of its canonical form
// (seed, default key, overrides). Outputs record it; two tables with one
// ID give the same keys.
func (t *KeyTable) ID() string { return t.id }

// Seed returns the seed of the key family.
func (t *KeyTable) Seed() string { return t.seed }

// Default returns the index of the default key.
func (t *KeyTable) Default() uint64 { return t.def }

// Overrides returns the per-timestamp keys, by timestamp.
func (t *KeyTable) Overrides() []Override { return slices.Clone(t.overrides) }

// KeyFor returns the key of the reports of timestamp ts.
func (t *KeyTable) KeyFor(ts uint32) Key {
	if len(t.byTS) > 0 {
		if k, ok := t.byTS[ts]; ok {
			return k
		}
	}
	return t.defKey
}
