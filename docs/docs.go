// Package docs holds the project's documentation. Its command reference,
// cli.md, is also what `backfill help COMMAND` prints: one text for the
// page and the terminal, which cannot say different things.
package docs

import (
	_ "embed"
	"regexp"
	"strings"
)

//go:embed cli.md
var cliMD string

// FlagsMark is the line of a help text after which the command lists its
// flags (internal/cli renders them from the flag set).
const FlagsMark = "Flags:"

var (
	link = regexp.MustCompile(`\[([^\]]+)\]\(([^)]+)\)`)
	bold = regexp.MustCompile(`\*\*([^*]+)\*\*`)
)

// Help returns the section of cli.md headed "### `backfill NAME`" as
// plain text, "" when there is none. The first code block is the usage
// ("Usage: backfill ..."), later ones are indented by a tab; a link to a
// page beside cli.md names it as docs/PAGE, other links keep their text,
// backquotes and bold marks are dropped, and so are HTML comments. The line
// FlagsMark goes before the paragraph "Exit status:", or at the end.
func Help(name string) string {
	head := "### `backfill " + name + "`\n"
	at := strings.Index(cliMD, head)
	if at < 0 {
		return ""
	}
	sec := cliMD[at+len(head):]
	if end := strings.Index(sec, "\n### "); end >= 0 {
		sec = sec[:end+1]
	}
	var b strings.Builder
	usage, inCode, marked := 0, false, false
	for _, l := range strings.Split(strings.Trim(sec, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "```"):
			inCode = !inCode
			if !inCode && usage == 1 {
				usage = 2
			}
			continue
		case inCode && usage < 2:
			if usage == 0 {
				b.WriteString("Usage: " + l + "\n")
				usage = 1
			} else {
				b.WriteString("       " + l + "\n")
			}
			continue
		case inCode:
			b.WriteString("\t" + l + "\n")
			continue
		case strings.HasPrefix(l, "<!--") && strings.HasSuffix(l, "-->"):
			continue // a note to the page's tests (docs-test markers)
		case l == "Exit status:" && !marked:
			b.WriteString(FlagsMark + "\n\n")
			marked = true
		}
		if usage == 0 && strings.TrimSpace(l) != "" { // a command without a usage block
			b.WriteString("Usage: backfill " + name + "\n\n")
			usage = 2
		}
		l = link.ReplaceAllStringFunc(l, linkText)
		l = bold.ReplaceAllString(l, "$1")
		b.WriteString(strings.ReplaceAll(l, "`", "") + "\n")
	}
	if !marked {
		b.WriteString("\n" + FlagsMark + "\n\n")
	}
	return b.String()
}

// linkText is a Markdown link as plain text: [ooid.md](ooid.md) is
// docs/ooid.md, [the rule](design.md#rule) is "the rule (docs/design.md)",
// a link elsewhere is its text.
func linkText(l string) string {
	m := link.FindStringSubmatch(l)
	text, target := m[1], m[2]
	page, _, _ := strings.Cut(target, "#")
	switch {
	case !strings.HasSuffix(page, ".md") || strings.Contains(page, "/"):
		return text
	case text == target || text == page:
		return "docs/" + page
	}
	return text + " (docs/" + page + ")"
}
