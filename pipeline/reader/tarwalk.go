package reader

import (
	"archive/tar"
	"io"
	"strings"

	"github.com/backfill-dev/backfill/internal/fasttar"
)

// tarMembers walks the members of a tar: member returns the next one's
// name and type, Read its bytes.
type tarMembers interface {
	io.Reader
	member() (name string, typ byte, err error)
}

// stdTar is archive/tar's walk, the one that reads every form. A regular
// file made sparse by PAX records is given the type of a sparse file: its
// holes would read as zeros up to any size its records claim.
type stdTar struct{ *tar.Reader }

func (t stdTar) member() (string, byte, error) {
	h, err := t.Next()
	if err != nil {
		return "", 0, err
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return h.Name, tar.TypeGNUSparse, nil
		}
	}
	return h.Name, h.Typeflag, nil
}

// fastTar is the walk of the fast read: fasttar's, whose members are all
// regular files.
type fastTar struct{ fasttar.Reader }

func (t *fastTar) member() (string, byte, error) {
	name, err := t.Next()
	return name, tar.TypeReg, err
}
