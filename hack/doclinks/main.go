// Command doclinks fails when a relative link in the repository's Markdown
// (the README, the book under docs/, every other *.md) points at a file
// that does not exist or at a heading the target page does not have.
// Links to other sites are not followed. `make verify` runs it:
//
//	go run ./hack/doclinks .
package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: doclinks <repository root>")
		os.Exit(2)
	}
	broken, err := check(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "doclinks:", err)
		os.Exit(1)
	}
	for _, b := range broken {
		fmt.Fprintln(os.Stderr, b)
	}
	if len(broken) > 0 {
		fmt.Fprintf(os.Stderr, "doclinks: %d broken links\n", len(broken))
		os.Exit(1)
	}
}

// skipDirs are not documentation: build output, tools, version control.
var skipDirs = map[string]bool{".git": true, "bin": true, "_output": true, "node_modules": true}

// check returns one line per broken link of every Markdown file under root,
// as "file:line: target: why", sorted.
func check(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && skipDirs[d.Name()] {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := headingAnchors(string(data))
		anchors[path] = a
		return a, nil
	}
	var broken []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, file)
		for _, l := range links(string(data)) {
			if why := resolve(file, l.target, anchorsOf); why != "" {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: %s", rel, l.line, l.target, why))
			}
		}
	}
	sort.Strings(broken)
	return broken, nil
}

// resolve says why target, a link in file, is broken, or "" when it is not.
func resolve(file, target string, anchorsOf func(string) (map[string]bool, error)) string {
	path, anchor, _ := strings.Cut(target, "#")
	dest := file
	if path != "" {
		dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
		info, err := os.Stat(dest)
		if err != nil {
			return "no such file"
		}
		if info.IsDir() || anchor == "" {
			return ""
		}
	}
	if anchor == "" || !strings.HasSuffix(dest, ".md") {
		return ""
	}
	a, err := anchorsOf(dest)
	if err != nil {
		return err.Error()
	}
	if !a[anchor] {
		return "no heading #" + anchor
	}
	return ""
}

type link struct {
	line   int
	target string
}

var (
	// inlineLink is [text](target), with an optional "title".
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	external   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// links returns the relative link targets of a Markdown text, outside code
// blocks and code spans.
func links(text string) []link {
	var out []link
	fence := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			if t := m[1]; !external.MatchString(t) {
				out = append(out, link{line: i + 1, target: t})
			}
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown text: lower case, punctuation dropped, spaces as hyphens, and
// -1, -2, ... on repeats.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := slugify(title)
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

func slugify(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
