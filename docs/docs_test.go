package docs

import (
	"strings"
	"testing"
)

// TestHelp_Render: a command's section of cli.md becomes plain text: the
// usage block, prose without Markdown marks, other code blocks indented,
// and the flags' line before the exit statuses.
func TestHelp_Render(t *testing.T) {
	h := Help("plan")
	for _, want := range []string{
		"Usage: backfill plan --in DIR --shards N [--out FILE]\n       backfill run --plan FILE",
		"\n\tbackfill plan --in s3://",
		"\n" + FlagsMark + "\n\nExit status:\n\n\t0    the plan was written\n",
	} {
		if !strings.Contains(h, want) {
			t.Errorf("help of plan lacks %q:\n%s", want, h)
		}
	}
	for _, mark := range []string{"```", "`", "**", "](", "### ", "<!--"} {
		if strings.Contains(h, mark) {
			t.Errorf("help of plan holds the Markdown %q", mark)
		}
	}
	if h := Help("run"); !strings.Contains(h, "docs/formats.md") || !strings.Contains(h, "docs/design.md §3") {
		t.Errorf("help of run names the pages it links to otherwise:\n%s", h)
	}
	if Help("nosuch") != "" {
		t.Error("a command with no section has a help")
	}
}
