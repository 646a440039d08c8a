package job_test

import (
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/job"
	"github.com/backfill-dev/backfill/pipeline/reader"
)

// indexReport is a report of an autoclaved index: the lines of its rows.
type indexReport struct {
	textname string
	row, end int   // its report and /report lines
	blobs    []int // its datum and badblob lines, in order
	badblobs int
	cutoff   bool
}

func indexReports(lines []string) []*indexReport {
	var out []*indexReport
	var cur *indexReport
	for i, l := range lines {
		switch {
		case strings.Contains(l, `"type": "report"`):
			_, rest, _ := strings.Cut(l, `"textname": "`)
			name, _, _ := strings.Cut(rest, `"`)
			cur = &indexReport{textname: name, row: i}
			out = append(out, cur)
		case strings.Contains(l, `"type": "datum"`):
			cur.blobs = append(cur.blobs, i)
		case strings.Contains(l, `"type": "badblob"`):
			cur.blobs = append(cur.blobs, i)
			cur.badblobs++
		case strings.Contains(l, `"type": "/report"`):
			cur.end, cur.cutoff = i, strings.Contains(l, `"src_cutoff"`)
		}
	}
	return out
}

var origSHA1 = regexp.MustCompile(`"orig_sha1": "[^"]*"`)

// tamper gives a row another orig_sha1.
func tamper(line string) string {
	sum := sha1.Sum([]byte(line))
	return origSHA1.ReplaceAllLiteralString(line, `"orig_sha1": "`+base64.StdEncoding.EncodeToString(sum[:])+`"`)
}

type deadKey struct{ file, textname, reason string }

func deadKeys(dead []deadletter.Record) []deadKey {
	out := make([]deadKey, 0, len(dead))
	for _, d := range dead {
		out = append(out, deadKey{d.File, d.Textname, d.Reason})
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
	return out
}

// With --canned, a corpus in both forms checks clean: the same IDs and
// dead letters as without it. Each disagreement planted in the index (a
// datum's, a badblob's or a report's orig_sha1, a datum row dropped, a
// cutoff moved) is one canned_mismatch record naming the report, and the
// measurement where one is concerned, while the IDs stay the index's; a
// canned file or bucket that is not there is a record too.
func TestRun_CannedCheck(t *testing.T) {
	dir := genBoth(t, 1, 150)
	canned, auto := filepath.Join(dir, "canned"), filepath.Join(dir, "autoclaved")
	buckets, _ := ingest.ListBuckets(t.Context(), store.Local(auto))
	bucket := buckets[0]

	for _, mode := range []job.Config{{In: store.Local(auto)}, {In: store.Local(auto), FromIndex: true, Ndx: reader.NdxDatums}} {
		plain := runWith(t, mode)
		mode.Canned = store.Local(canned)
		checked := runWith(t, mode)
		sameIDs(t, "with --canned against without", plain.ids, checked.ids)
		if a, b := fmt.Sprint(deadKeys(plain.dead)), fmt.Sprint(deadKeys(checked.dead)); a != b {
			t.Errorf("from-index %v: dead letters with --canned\n%s\nwithout\n%s", mode.FromIndex, b, a)
		}
	}

	// Plant one disagreement in each of five reports.
	lines := indexLines(t, filepath.Join(auto, bucket))
	reps := indexReports(lines)
	used := map[*indexReport]bool{}
	pick := func(what string, ok func(r *indexReport) bool) *indexReport {
		for _, r := range reps {
			if !used[r] && ok(r) {
				used[r] = true
				return r
			}
		}
		t.Fatalf("no report with %s in the corpus", what)
		return nil
	}
	plain := func(r *indexReport) bool { return r.badblobs == 0 && !r.cutoff && len(r.blobs) >= 3 }
	datum := pick("three datums", plain)
	lines[datum.blobs[1]] = tamper(lines[datum.blobs[1]])
	bad := pick("a badblob", func(r *indexReport) bool { return r.badblobs > 0 && !r.cutoff })
	for _, i := range bad.blobs {
		if strings.Contains(lines[i], `"type": "badblob"`) {
			lines[i] = tamper(lines[i])
			break
		}
	}
	report := pick("three datums", plain)
	lines[report.row] = tamper(lines[report.row])
	cut := pick("a cutoff", func(r *indexReport) bool { return r.cutoff })
	lines[cut.end] = strings.Replace(lines[cut.end], `"src_cutoff": `, `"src_cutoff": 1`, 1)
	dropped := pick("three datums", plain)
	last := dropped.blobs[len(dropped.blobs)-1]
	lines = append(lines[:last:last], lines[last+1:]...)

	tampered := copyDir(t, auto)
	writeIndex(t, filepath.Join(tampered, bucket), lines)
	want := map[string]string{
		datum.textname:   "1 of its measurements differ; the first is measurement 1,",
		bad.textname:     "1 of its measurements differ",
		report.textname:  "the report row has orig_sha1",
		cut.textname:     "the index has the slicer give up at byte 1",
		dropped.textname: fmt.Sprintf("the index lists %d measurements, the canned report holds %d", len(dropped.blobs)-1, len(dropped.blobs)),
	}
	ref := runWith(t, job.Config{In: store.Local(auto)})
	for _, fromIndex := range []bool{false, true} {
		o := runWith(t, job.Config{In: store.Local(tampered), FromIndex: fromIndex, Canned: store.Local(canned)})
		got := map[string]string{}
		for _, d := range o.dead {
			if d.Reason != deadletter.CannedMismatch {
				continue
			}
			if _, dup := got[d.Textname]; dup || d.File == "" || d.Bucket != bucket {
				t.Errorf("from-index %v: record %+v: twice, or without its file", fromIndex, d)
			}
			got[d.Textname] = d.Message
		}
		for textname, msg := range want {
			if !strings.Contains(got[textname], msg) {
				t.Errorf("from-index %v: %s: canned_mismatch %q, want one saying %q", fromIndex, textname, got[textname], msg)
			}
		}
		if len(got) != len(want) {
			t.Errorf("from-index %v: %d canned_mismatch records, want %d: %v", fromIndex, len(got), len(want), got)
		}
		// The index numbers the reports: only the dropped row's ID is gone.
		wantIDs := map[mkey]int64{}
		for k, id := range ref.ids {
			if k != (mkey{dropped.textname, int32(len(dropped.blobs) - 1)}) {
				wantIDs[k] = id
			}
		}
		sameIDs(t, fmt.Sprintf("from-index %v: tampered index", fromIndex), wantIDs, o.ids)
	}

	// A canned file that is not there, and a canned bucket that is not.
	partial := copyDir(t, canned)
	ents, _ := os.ReadDir(filepath.Join(partial, bucket))
	var gone string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tar.lz4") {
			gone = e.Name()
			os.Remove(filepath.Join(partial, bucket, gone))
			break
		}
	}
	for _, tc := range []struct {
		canned, file, textname string
	}{{partial, bucket + "/" + gone, ""}, {t.TempDir(), "", ""}} {
		o := runWith(t, job.Config{In: store.Local(auto), FromIndex: true, Canned: store.Local(tc.canned)})
		var got []deadletter.Record
		for _, d := range o.dead {
			if d.Reason == deadletter.CannedMismatch {
				got = append(got, d)
			}
		}
		if len(got) != 1 || got[0].File != tc.file || got[0].Textname != tc.textname || got[0].Message == "" {
			t.Errorf("canned form %s without %q: canned_mismatch records %+v", tc.canned, tc.file, got)
		}
		sameIDs(t, "a canned form missing", ref.ids, o.ids)
	}
}
