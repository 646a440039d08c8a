package lz4frame

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/pierrec/lz4/v4"
)

// Frame is one LZ4 frame of a chain: its compressed range in the file and
// its decompressed range in the file's stream.
type Frame struct {
	FileOff, FileSize int64
	TextOff, TextSize int64
}

// FrameError is a frame that does not parse or decompress.
type FrameError struct {
	Frame     int   // 0-based
	Offset    int64 // in the file, where the frame starts
	Truncated bool  // the file ends inside the frame
	Err       error
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("lz4 frame %d at byte %d: %v", e.Frame, e.Offset, e.Err)
}

func (e *FrameError) Unwrap() error { return e.Err }

// Chain decompresses a chain of LZ4 frames, as an autoclaved file is,
// into one stream, and tells where each frame lies. It walks each frame's
// structure itself (header, block sizes, checksums), so it knows the
// compressed length of every frame without the index, and hands the
// frame's bytes, and no more, to the LZ4 decoder, which checks the content
// checksum and content size. Nothing is buffered beyond one read: a frame
// of any size streams.
type Chain struct {
	// OnFrame, when set, is called after each whole frame.
	OnFrame func(Frame)

	in    countingReader
	br    *bufio.Reader
	lim   frameLimiter
	lz    *lz4.Reader
	cur   Frame
	n     int // frames begun
	text  int64
	err   error
	inFrm bool
}

// AtEnd tells whether the chain has read its file to the end, every frame
// of it whole.
func (fc *Chain) AtEnd() bool { return fc.err == io.EOF }

// NewChain returns a Chain; Reset it onto a file.
func NewChain() *Chain {
	return &Chain{br: bufio.NewReaderSize(nil, peekSize), lz: lz4.NewReader(nil)}
}

// Reset makes fc read the frames of r from the start.
func (fc *Chain) Reset(r io.Reader) {
	fc.in = countingReader{r: r}
	fc.br.Reset(&fc.in)
	fc.n, fc.text, fc.err, fc.inFrm = 0, 0, nil, false
}

// FileOffset is how many bytes of the file the chain has consumed.
func (fc *Chain) FileOffset() int64 { return fc.in.n - int64(fc.br.Buffered()) }

// TextOffset is how many decompressed bytes the chain has returned.
func (fc *Chain) TextOffset() int64 { return fc.text }

// Read returns the decompressed stream; io.EOF comes at the end of the
// file after a whole frame, and any damage is a *FrameError.
func (fc *Chain) Read(p []byte) (int, error) {
	for {
		if fc.err != nil {
			return 0, fc.err
		}
		if !fc.inFrm {
			if _, err := fc.br.Peek(1); err != nil {
				if errors.Is(err, io.EOF) {
					fc.err = io.EOF
				} else {
					fc.err = &FrameError{Frame: fc.n, Offset: fc.FileOffset(), Err: err}
				}
				continue
			}
			fc.cur = Frame{FileOff: fc.FileOffset(), TextOff: fc.text}
			fc.lim = frameLimiter{br: fc.br}
			fc.lz.Reset(&fc.lim)
			fc.inFrm = true
			fc.n++
		}
		n, err := fc.lz.Read(p)
		fc.text += int64(n)
		if err == nil && n > 0 {
			return n, nil
		}
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) && fc.lim.done {
			fc.cur.FileSize = fc.FileOffset() - fc.cur.FileOff
			fc.cur.TextSize = fc.text - fc.cur.TextOff
			fc.inFrm = false
			if fc.OnFrame != nil {
				fc.OnFrame(fc.cur)
			}
			if n > 0 {
				return n, nil
			}
			continue
		}
		fe := &FrameError{Frame: fc.n - 1, Offset: fc.cur.FileOff, Err: err}
		switch {
		case fc.lim.err != nil: // the layout walk failed first
			fe.Err = fc.lim.err
		case errors.Is(err, io.EOF): // the decoder stopped before the frame's end
			fe.Err = io.ErrUnexpectedEOF
		}
		fe.Truncated = errors.Is(fe.Err, io.ErrUnexpectedEOF)
		fc.err = fe
		return n, nil
	}
}

// peekSize is the chain's read buffer: a header, a block of the largest
// size with its size field and checksum, and the end mark fit in it.
const peekSize = 4<<20 + 64

// frameLimiter passes on the bytes of exactly one LZ4 frame: it parses the
// frame's layout as the bytes go by and reports io.EOF after its end.
//
// A frame of linked blocks that holds a single block (an autoclaved frame
// of up to 4 MiB always does) is passed on marked as independent blocks
// (SetLinked): the decoding is the same, and the decoder then
// does not copy each block into the dictionary that only a next block of
// the frame would use (a quarter of the data path's CPU time).
type frameLimiter struct {
	br       *bufio.Reader
	left     int // bytes of the current segment not yet passed on
	state    uint8
	blockMax int
	blockSum bool
	sumLen   int // content checksum
	done     bool
	err      error
	hdr      []byte // a rewritten header, passed on instead of the file's
	hdrBuf   [19]byte
}

const (
	limHeader = iota
	limBlock
	limDone
)

func (l *frameLimiter) Read(p []byte) (int, error) {
	for l.left == 0 {
		if l.state == limDone {
			l.done = true
			return 0, io.EOF
		}
		if err := l.next(); err != nil {
			l.err = err
			return 0, err
		}
	}
	if len(l.hdr) > 0 {
		n := copy(p[:min(len(p), l.left)], l.hdr[len(l.hdr)-l.left:])
		_, _ = l.br.Discard(n) // n bytes were peeked: they are buffered
		if l.left -= n; l.left == 0 {
			l.hdr = nil
		}
		return n, nil
	}
	n, err := l.br.Read(p[:min(len(p), l.left)])
	l.left -= n
	if err != nil && errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		l.err = err
	}
	return n, err
}

// singleBlock tells whether the frame whose header is hl bytes holds
// exactly one block, as far as the buffered bytes show.
func (l *frameLimiter) singleBlock(hl int) bool {
	h, err := l.br.Peek(hl + 4)
	if err != nil {
		return false
	}
	size := binary.LittleEndian.Uint32(h[hl:])
	data := int(size &^ (1 << 31))
	if size == 0 || data > l.blockMax {
		return false
	}
	end := hl + 4 + data
	if l.blockSum {
		end += 4
	}
	h, err = l.br.Peek(end + 4)
	return err == nil && binary.LittleEndian.Uint32(h[end:]) == 0
}

// next sizes the next segment of the frame: its header, or one block with
// its size field and checksum, or the end mark with the content checksum.
func (l *frameLimiter) next() error {
	peek := func(n int) ([]byte, error) {
		b, err := l.br.Peek(n)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return b, nil
	}
	switch l.state {
	case limHeader:
		h, err := peek(7)
		if err != nil {
			return err
		}
		if magic := binary.LittleEndian.Uint32(h); magic != Magic {
			return fmt.Errorf("not an LZ4 frame (magic %#08x)", magic)
		}
		flg, bd := h[4], h[5]
		if flg>>6 != 1 {
			return fmt.Errorf("LZ4 frame version %d", flg>>6)
		}
		id := bd >> 4 & 7
		if id < 4 {
			return fmt.Errorf("LZ4 block size id %d", id)
		}
		l.blockMax = 1 << (2*int(id) + 8)
		l.blockSum = flg&0x10 != 0
		if flg&0x04 != 0 {
			l.sumLen = 4
		}
		l.left = HeaderLen(flg)
		l.state = limBlock
		if Linked(flg) && l.singleBlock(l.left) {
			h, _ := l.br.Peek(l.left)
			l.hdr = append(l.hdrBuf[:0], h...)
			SetLinked(l.hdr, false)
		}
	case limBlock:
		h, err := peek(4)
		if err != nil {
			return err
		}
		size := binary.LittleEndian.Uint32(h)
		if size == 0 {
			l.left, l.state = 4+l.sumLen, limDone
			return nil
		}
		data := int(size &^ (1 << 31))
		if data > l.blockMax {
			return fmt.Errorf("LZ4 block of %d bytes, over the frame's %d-byte maximum", data, l.blockMax)
		}
		l.left = 4 + data
		if l.blockSum {
			l.left += 4
		}
	}
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
