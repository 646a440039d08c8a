package collisions

import (
	"fmt"
	"os"
)

// spillAt is how many bytes of textnames a Resolver keeps in memory before
// it moves them to its file: a run of up to about 60,000 reports never
// makes one; the full archive's 3.6 M textnames (about 440 MB) keep 8 MiB
// in memory.
var spillAt = 8 << 20

// names holds a Resolver's textnames, by ref, one after the other: the
// newest in memory, the others in a temporary file, removed from its
// folder as soon as it is made (the system frees it when the process ends
// or the file is closed). A textname is read back only to order two
// reports that collide and to name a winner, so reading them from the file
// costs a run nothing when nothing collides.
type names struct {
	off      []uint64 // where each textname starts
	size     uint64   // where the next one goes
	mem      []byte   // the textnames from memStart on
	memStart uint64
	f        *os.File // nil until the first spill
	err      error    // the file's first error
}

func (s *names) add(name string) {
	s.off = append(s.off, s.size)
	s.mem = append(s.mem, name...)
	s.size += uint64(len(name))
	if len(s.mem) >= spillAt {
		s.spill()
	}
}

// spill moves the textnames in memory to the file.
func (s *names) spill() {
	if s.err != nil {
		return
	}
	if s.f == nil {
		f, err := os.CreateTemp("", "backfill-textnames-*")
		if err != nil {
			s.err = fmt.Errorf("collisions: the textnames' file: %w", err)
			return
		}
		s.f = f
		if err := os.Remove(f.Name()); err != nil {
			s.err = fmt.Errorf("collisions: the textnames' file: %w", err)
			return
		}
	}
	if _, err := s.f.WriteAt(s.mem, int64(s.memStart)); err != nil {
		s.err = fmt.Errorf("collisions: the textnames' file: %w", err)
		return
	}
	s.memStart += uint64(len(s.mem))
	s.mem = s.mem[:0]
}

func (s *names) len() int { return len(s.off) }

// get returns textname i; "" once the file has failed (see Resolver.Err).
func (s *names) get(i uint32) string {
	start, end := s.off[i], s.size
	if int(i)+1 < len(s.off) {
		end = s.off[i+1]
	}
	if start >= s.memStart {
		return string(s.mem[start-s.memStart : end-s.memStart])
	}
	if s.err != nil {
		return ""
	}
	b := make([]byte, end-start)
	if _, err := s.f.ReadAt(b, int64(start)); err != nil {
		s.err = fmt.Errorf("collisions: the textnames' file: %w", err)
		return ""
	}
	return string(b)
}

// close closes the file, if there is one.
func (s *names) close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
