package docs_test

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// linkRE is an inline Markdown link or image: [text](target) or
// [text](target "title").
var linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

var (
	headingRE    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	inlineCodeRE = regexp.MustCompile("`+[^`]*`+")
	mdLinkTextRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	htmlTagRE    = regexp.MustCompile(`<[^>]+>`)
)

// prose returns the lines of a page outside fenced code blocks, with their
// numbers.
func prose(text string) map[int]string {
	out := map[int]string{}
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out[i+1] = line
		}
	}
	return out
}

// withoutCode blanks a page's fenced blocks and inline code spans (which
// may run over a line break), keeping its lines where they were.
func withoutCode(text string) []string {
	lines := strings.Split(text, "\n")
	p := prose(text)
	for i := range lines {
		if _, ok := p[i+1]; !ok {
			lines[i] = ""
		}
	}
	joined := inlineCodeRE.ReplaceAllStringFunc(strings.Join(lines, "\n"), func(code string) string {
		return strings.Repeat("\n", strings.Count(code, "\n"))
	})
	return strings.Split(joined, "\n")
}

// slug is the anchor GitHub gives a heading: lower case, every character
// that is not a letter, digit, space, '-' or '_' dropped, spaces made '-'.
func slug(heading string) string {
	h := mdLinkTextRE.ReplaceAllString(heading, "$1")
	h = htmlTagRE.ReplaceAllString(h, "")
	h = strings.ReplaceAll(h, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// anchors returns the anchors of a page's headings, repeats numbered as
// GitHub numbers them (-1, -2, ...).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	lines := prose(text)
	for n := 1; n <= len(strings.Split(text, "\n")); n++ {
		line, ok := lines[n]
		if !ok {
			continue
		}
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if k := seen[s]; k > 0 {
			out[s+"-"+strconv.Itoa(k)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Signed commits":                                "signed-commits",
		"End to end: `make bench-e2e`":                  "end-to-end-make-bench-e2e",
		"Several agents, stopping, manual reconciles":   "several-agents-stopping-manual-reconciles",
		"Signed commits (`git.verify`)":                 "signed-commits-gitverify",
		"Host check (DNS rebinding) and browser writes": "host-check-dns-rebinding-and-browser-writes",
		"The [exec](actions/exec.md) action":            "the-exec-action",
		"sources[].git.auth":                            "sourcesgitauth",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
	got := anchors("# A\n\n## A\n\n```\n# not a heading\n```\n\n### A\n")
	for _, a := range []string{"a", "a-1", "a-2"} {
		if !got[a] {
			t.Errorf("anchors: no %q in %v", a, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a line in a code block was taken for a heading")
	}
}

// TestLinksResolve: every relative link in README.md and docs/ names a file
// or folder that exists, and every #anchor a heading of the page it names.
func TestLinksResolve(t *testing.T) {
	checked := 0
	for _, page := range pages(t) {
		text := read(t, page)
		for i, line := range withoutCode(text) {
			n := i + 1
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, anchor, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = path.Clean(path.Join(path.Dir(page), file))
					if strings.HasPrefix(dest, "../") {
						t.Errorf("%s:%d: %s leaves the repository", page, n, target)
						continue
					}
					info, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest)))
					if err != nil {
						t.Errorf("%s:%d: %s: no such file", page, n, target)
						continue
					}
					if info.IsDir() {
						if anchor != "" {
							t.Errorf("%s:%d: %s: an anchor into a folder", page, n, target)
						}
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: %s: an anchor into a file that is not Markdown", page, n, target)
					continue
				}
				if !anchors(read(t, dest))[anchor] {
					t.Errorf("%s:%d: %s: %s has no heading with the anchor #%s", page, n, target, dest, anchor)
				}
			}
		}
	}
	if checked < 30 {
		t.Errorf("checked only %d links: the link pattern is broken", checked)
	}
}
