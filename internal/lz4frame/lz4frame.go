// Package lz4frame is the LZ4 frame format as the archive holds it: a
// file's chain of frames read as one stream, each frame's ranges reported
// and its damage named (Chain), and a frame's header edited (the
// block-linking flag, and the header checksum any change to the
// descriptor needs).
package lz4frame

// Magic starts every LZ4 frame.
const Magic = 0x184D2204

// flagIndependent is the FLG bit of independent blocks.
const flagIndependent = 0x20

// HeaderLen is the length of a frame header (magic, descriptor and
// checksum byte) whose FLG byte is flg.
func HeaderLen(flg byte) int {
	n := 7
	if flg&0x08 != 0 {
		n += 8 // content size
	}
	if flg&0x01 != 0 {
		n += 4 // dictionary id
	}
	return n
}

// Linked tells whether the FLG byte flg marks the blocks as linked.
func Linked(flg byte) bool { return flg&flagIndependent == 0 }

// HeaderChecksum is the checksum byte of a frame descriptor (the bytes
// from FLG to the checksum): the second byte of its XXH32.
func HeaderChecksum(desc []byte) byte { return byte(xxh32(desc) >> 8) }

// SetLinked marks the blocks of the frame whose header starts hdr as
// linked or independent, and redoes the header checksum. hdr must hold
// the whole header.
func SetLinked(hdr []byte, linked bool) {
	if linked {
		hdr[4] &^= flagIndependent
	} else {
		hdr[4] |= flagIndependent
	}
	n := HeaderLen(hdr[4])
	hdr[n-1] = HeaderChecksum(hdr[4 : n-1])
}
