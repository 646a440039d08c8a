package ooniuid_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/pipeline/ooniuid"
)

// BenchmarkJSONDate reads the date of every line of the JSON sample
// reports, and of one with a 60 KB HTML body as web_connectivity lines
// hold them (a quote, a newline or a tab escaped every 18 bytes or so),
// at the bytes a second of their lines.
func BenchmarkJSONDate(b *testing.B) {
	files, _ := filepath.Glob("testdata/raw/*/*.json")
	var lines [][]byte
	var size int64
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		for l := range bytes.Lines(data) {
			lines = append(lines, l)
			size += int64(len(l))
		}
	}
	if len(lines) == 0 {
		b.Fatal("no JSON sample reports")
	}
	html := `<div class=\"item\">\n\t<a href=\"/v/1234\" title=\"Some video\">Some video title</a>\n`
	body := `{"measurement_start_time": "2017-06-01 10:00:00", "test_keys": {"requests": [{"response": {"body": "` +
		strings.Repeat(html, 60000/len(html)) + `", "code": 200}}]}}` + "\n"
	for range 4 {
		lines = append(lines, []byte(body))
		size += int64(len(body))
	}
	b.SetBytes(size)
	for b.Loop() {
		for _, l := range lines {
			ooniuid.JSONDate(l)
		}
	}
}
