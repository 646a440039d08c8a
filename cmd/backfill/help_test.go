package main

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/docs"
	"github.com/backfill-dev/backfill/internal/cli"
)

// TestHelp_Flags: -h prints the command's section of docs/cli.md with
// every flag the command registers, each with its default; a flag without
// a usage of its own (another name of one) is named in the help.
func TestHelp_Flags(t *testing.T) {
	t.Parallel()
	for _, c := range commands() {
		var outb, errb bytes.Buffer
		if err := c.run(context.Background(), []string{"-h"}, cli.Stdio{In: strings.NewReader(""), Out: &outb, Err: &errb}); err != cli.ErrHelp {
			t.Fatalf("%s -h: %v", c.name, err)
		}
		help := outb.String()
		if sec := docs.Help(c.name); errb.Len() > 0 || !strings.HasPrefix(help, sec[:strings.Index(sec, "\n"+docs.FlagsMark+"\n")]) {
			t.Errorf("%s -h does not print its section of docs/cli.md on standard output alone", c.name)
		}
		fs := cli.Made(c.name)
		if fs == nil {
			t.Errorf("%s: no flag set", c.name)
			continue
		}
		fs.VisitAll(func(f *flag.Flag) {
			para, own := flagParagraph(help, f.Name)
			switch {
			case !strings.Contains(help, "--"+f.Name) && !strings.Contains(help, "\t-"+f.Name+" "):
				t.Errorf("%s: --%s is not in the help", c.name, f.Name)
			case own != (f.Usage != ""):
				t.Errorf("%s: --%s has a usage but no paragraph, or a paragraph but no usage", c.name, f.Name)
			case !own, f.DefValue == "", f.DefValue == "false", f.DefValue == "0", f.DefValue == "0s", strings.Contains(para, "(default:"):
				// A default the help describes: the number of CPUs, or
				// one derived from another flag.
			case !strings.Contains(para, "(default "):
				t.Errorf("%s: --%s defaults to %s, its help says:\n%s", c.name, f.Name, f.DefValue, para)
			}
		})
	}
}

// flagParagraph returns the lines of help that describe flag name: its
// line in the Flags section and the ones below it, up to the next flag.
func flagParagraph(help, name string) (string, bool) {
	lines := strings.Split(help, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "\t--"+name+" ") && !strings.HasPrefix(l, "\t-"+name+" ") && l != "\t--"+name && l != "\t-"+name {
			continue
		}
		para := []string{l}
		for _, m := range lines[i+1:] {
			if strings.HasPrefix(strings.TrimLeft(m, "\t "), "-") || strings.TrimSpace(m) == "" {
				break
			}
			para = append(para, m)
		}
		return strings.Join(para, "\n"), true
	}
	return "", false
}
