package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The README and the manual in docs/ link to each other by relative paths
// and #anchors; a page moved or a heading reworded must not leave a link
// pointing nowhere.
func TestDocsLinksPointAtExistingFilesAndHeadings(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{"README.md"}, pages...)
	anchors := map[string]map[string]bool{} // page → its headings' anchors
	anchorsOf := func(page string) (map[string]bool, error) {
		if a, ok := anchors[page]; ok {
			return a, nil
		}
		b, err := os.ReadFile(page)
		if err != nil {
			return nil, err
		}
		a := headingAnchors(string(b))
		anchors[page] = a
		return a, nil
	}
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(b)) {
			target, anchor, _ := strings.Cut(l.target, "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file := page
			if target != "" {
				file = filepath.Join(filepath.Dir(page), filepath.FromSlash(target))
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s:%d: link %q: no file %s", page, l.line, l.target, file)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			a, err := anchorsOf(file)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", page, l.line, l.target, err)
				continue
			}
			if !a[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading whose anchor is #%s", page, l.line, l.target, file, anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no relative link in README.md and docs/*.md; the link parser is broken")
	}
}

type mdLink struct {
	target string
	line   int
}

var (
	linkRE        = regexp.MustCompile(`\]\(([^()\s]+)\)`)
	inlineCodeRE  = regexp.MustCompile("`[^`]*`")
	headingLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// markdownLinks returns the targets of the inline links [text](target) of a
// Markdown document, outside fenced code blocks and inline code.
func markdownLinks(doc string) []mdLink {
	var out []mdLink
	fenced := false
	for i, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		line = inlineCodeRE.ReplaceAllString(line, "")
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			out = append(out, mdLink{target: m[1], line: i + 1})
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives a document's headings:
// the heading's text in lower case, without its Markdown, every character
// but letters, digits, spaces, '-' and '_' dropped, spaces turned into '-';
// a repeated anchor takes -1, -2, ….
func headingAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		text = headingLinkRE.ReplaceAllString(text, "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		for n := 1; out[a]; n++ {
			a = fmt.Sprintf("%s-%d", b.String(), n)
		}
		out[a] = true
	}
	return out
}
