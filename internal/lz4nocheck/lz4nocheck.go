// Package lz4nocheck decodes LZ4 frames without hashing what it decodes:
// the block and content checksums (XXH32) are read and skipped. It is for
// a reader that proves the data otherwise, as backfill run does with the
// CRC-32 of each compressed file and of each report that the canned index
// gives, and that reads the data again with a checking decoder whenever
// anything is wrong. Skipping the content checksum halves the CPU time of
// decoding.
//
// It decodes the frames of the LZ4 frame format with independent blocks
// (one frame or several back to back, skippable frames skipped); frames
// with linked blocks, a dictionary id, or the legacy format are errors, as
// is any damage: it never panics on bad input and allocates no more than
// two blocks (at most 4 MiB each).
package lz4nocheck

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/pierrec/lz4/v4"

	"github.com/backfill-dev/backfill/internal/lz4frame"
)

// ErrUnsupported is returned (wrapped) for a valid frame this decoder
// does not decode: linked blocks, a dictionary, the legacy format.
var ErrUnsupported = errors.New("lz4nocheck: unsupported frame")

// ErrCorrupt is returned (wrapped) for a frame that breaks the format.
var ErrCorrupt = errors.New("lz4nocheck: corrupt frame")

// Decoder is an io.Reader of the decompressed bytes of an LZ4 stream.
// Reset it for each stream; it reuses its buffers.
type Decoder struct {
	r        io.Reader
	src, dst []byte
	out      []byte // the part of dst not read yet
	err      error
	inFrame  bool
	flg      byte
	blockMax int
	claimed  uint64 // content size field, when flg has it
	produced uint64
	hdr      [4 + 2 + 8 + 4 + 1]byte
}

// NewDecoder returns a decoder with no stream; call Reset.
func NewDecoder() *Decoder { return &Decoder{} }

// Reset starts decoding r.
func (d *Decoder) Reset(r io.Reader) {
	d.r, d.out, d.err, d.inFrame, d.produced = r, nil, nil, false, 0
}

// Read implements io.Reader. At the end of the stream after whole frames
// it returns io.EOF; a stream cut inside a frame gives
// io.ErrUnexpectedEOF.
func (d *Decoder) Read(p []byte) (int, error) {
	for len(d.out) == 0 {
		if d.err != nil {
			return 0, d.err
		}
		d.err = d.next()
	}
	n := copy(p, d.out)
	d.out = d.out[n:]
	return n, nil
}

// full reads exactly len(b) bytes; an end of stream is unexpected.
func (d *Decoder) full(b []byte) error {
	if _, err := io.ReadFull(d.r, b); err != nil {
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

// next decodes the next block into d.out, or reads a frame header or end.
func (d *Decoder) next() error {
	if !d.inFrame {
		return d.header()
	}
	var sz [4]byte
	if err := d.full(sz[:]); err != nil {
		return err
	}
	size := binary.LittleEndian.Uint32(sz[:])
	if size == 0 { // end mark
		if d.flg&0x04 != 0 {
			var sum [4]byte // content checksum, not checked
			if err := d.full(sum[:]); err != nil {
				return err
			}
		}
		if d.flg&0x08 != 0 && d.produced != d.claimed {
			return fmt.Errorf("%w: the frame's content size is %d, it holds %d", ErrCorrupt, d.claimed, d.produced)
		}
		d.inFrame = false
		return nil
	}
	raw := size&0x80000000 != 0
	size &^= 0x80000000
	if int(size) > d.blockMax {
		return fmt.Errorf("%w: a block of %d bytes, over the frame's maximum of %d", ErrCorrupt, size, d.blockMax)
	}
	if cap(d.src) < d.blockMax {
		d.src = make([]byte, d.blockMax)
	}
	src := d.src[:size]
	if err := d.full(src); err != nil {
		return err
	}
	if d.flg&0x10 != 0 {
		var sum [4]byte // block checksum, not checked
		if err := d.full(sum[:]); err != nil {
			return err
		}
	}
	if raw {
		d.out = src
	} else {
		if cap(d.dst) < d.blockMax {
			d.dst = make([]byte, d.blockMax)
		}
		n, err := lz4.UncompressBlock(src, d.dst[:d.blockMax])
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		d.out = d.dst[:n]
	}
	d.produced += uint64(len(d.out))
	if d.flg&0x08 != 0 && d.produced > d.claimed {
		return fmt.Errorf("%w: the frame's content size is %d, it holds more", ErrCorrupt, d.claimed)
	}
	return nil
}

// header reads the next frame's header, skipping skippable frames. A clean
// end of stream between frames is io.EOF.
func (d *Decoder) header() error {
	for {
		m := d.hdr[:4]
		if _, err := io.ReadFull(d.r, m); err != nil {
			return err // io.EOF only when no byte was read: a clean end
		}
		magic := binary.LittleEndian.Uint32(m)
		switch {
		case magic == lz4frame.Magic:
		case magic&0xFFFFFFF0 == 0x184D2A50: // skippable frame
			var n [4]byte
			if err := d.full(n[:]); err != nil {
				return err
			}
			if _, err := io.CopyN(io.Discard, d.r, int64(binary.LittleEndian.Uint32(n[:]))); err != nil {
				if errors.Is(err, io.EOF) {
					return io.ErrUnexpectedEOF
				}
				return err
			}
			continue
		case magic == 0x184C2102:
			return fmt.Errorf("%w: the legacy format", ErrUnsupported)
		default:
			return fmt.Errorf("%w: magic %#08x", ErrCorrupt, magic)
		}
		desc := d.hdr[4:6]
		if err := d.full(desc); err != nil {
			return err
		}
		flg, bd := desc[0], desc[1]
		if flg>>6 != 1 || flg&0x02 != 0 || bd&0x8F != 0 {
			return fmt.Errorf("%w: descriptor %#02x %#02x", ErrCorrupt, flg, bd)
		}
		rest := d.hdr[6:lz4frame.HeaderLen(flg)]
		if err := d.full(rest); err != nil {
			return err
		}
		descAll := d.hdr[4 : lz4frame.HeaderLen(flg)-1]
		if got := lz4frame.HeaderChecksum(descAll); got != rest[len(rest)-1] {
			return fmt.Errorf("%w: header checksum %#02x, the header says %#02x", ErrCorrupt, got, rest[len(rest)-1])
		}
		if flg&0x01 != 0 {
			return fmt.Errorf("%w: a dictionary id", ErrUnsupported)
		}
		if lz4frame.Linked(flg) {
			return fmt.Errorf("%w: linked blocks", ErrUnsupported)
		}
		id := bd >> 4 & 0x7
		if id < 4 {
			return fmt.Errorf("%w: block size id %d", ErrCorrupt, id)
		}
		d.blockMax = 1 << (8 + 2*id) // 4: 64 KiB … 7: 4 MiB
		d.flg, d.produced, d.claimed = flg, 0, 0
		if flg&0x08 != 0 {
			d.claimed = binary.LittleEndian.Uint64(d.hdr[6:14])
		}
		d.inFrame = true
		return nil
	}
}
