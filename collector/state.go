package collector

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// stateMagic is the first line of a state file, with its version.
const stateMagic = "backfill collector state v1"

// state is what a state file records: whose it is, and the high-water
// second: no ID of a second after Mark was ever handed out.
type state struct {
	CollectorID uint8
	Mark        uint32
}

// maxStateSize bounds a state file read.
const maxStateSize = 4096

// ErrState is wrapped by every error about a state file's content.
var ErrState = errors.New("collector state file")

// encode gives the state file's bytes: text, versioned, with a CRC-32 of
// the lines before it.
func (s state) encode() []byte {
	body := fmt.Sprintf("%s\ncollector_id %d\nmark %d\n", stateMagic, s.CollectorID, s.Mark)
	return fmt.Appendf([]byte(body), "crc32 %08x\n", crc32.ChecksumIEEE([]byte(body)))
}

// parseState reads a state file's bytes. A file cut short, changed by
// hand or of another version is an error that says so, never a state.
func parseState(b []byte) (state, error) {
	var s state
	if len(b) > maxStateSize {
		return s, fmt.Errorf("%w: %d bytes, more than a state file holds", ErrState, len(b))
	}
	i := bytes.LastIndex(b, []byte("crc32 "))
	if i < 0 || !bytes.HasSuffix(b, []byte("\n")) {
		return s, fmt.Errorf("%w: no crc32 line at its end: it is cut short or not a state file", ErrState)
	}
	body, tail := b[:i], strings.TrimSuffix(string(b[i+len("crc32 "):]), "\n")
	sum, err := strconv.ParseUint(tail, 16, 32)
	if err != nil || len(tail) != 8 {
		return s, fmt.Errorf("%w: bad crc32 line %q", ErrState, tail)
	}
	if uint32(sum) != crc32.ChecksumIEEE(body) {
		return s, fmt.Errorf("%w: its CRC-32 does not match its content: it was changed or damaged", ErrState)
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(lines) != 3 || lines[0] != stateMagic {
		return s, fmt.Errorf("%w: not a %q file", ErrState, stateMagic)
	}
	id, err := field(lines[1], "collector_id", 8)
	if err != nil {
		return s, err
	}
	mark, err := field(lines[2], "mark", 32)
	if err != nil {
		return s, err
	}
	s.CollectorID, s.Mark = uint8(id), uint32(mark)
	return s, nil
}

func field(line, name string, bits int) (uint64, error) {
	v, ok := strings.CutPrefix(line, name+" ")
	if !ok {
		return 0, fmt.Errorf("%w: want a %s line, got %q", ErrState, name, line)
	}
	n, err := strconv.ParseUint(v, 10, bits)
	if err != nil || strconv.FormatUint(n, 10) != v {
		return 0, fmt.Errorf("%w: %s %q is not a number of %d bits", ErrState, name, v, bits)
	}
	return n, nil
}
