package review

import (
	"bufio"
	"bytes"
	"strings"
)

// DiffClass is what a pull request's changed files are, for the
// codeChangesOnly fast path (SPEC §3.1).
type DiffClass string

const (
	DiffCode          DiffClass = "code"
	DiffDocsOnly      DiffClass = "docs-only"
	DiffGeneratedOnly DiffClass = "generated-only"
	// DiffEmpty is a pull request with no changed files listed. It is
	// validated like code: nothing proves it harmless.
	DiffEmpty DiffClass = "empty"
)

// Skips reports whether the class lets codeChangesOnly skip validation.
func (c DiffClass) Skips() bool { return c == DiffDocsOnly || c == DiffGeneratedOnly }

// docsPatterns are documentation files: changing only these cannot change
// what the package.json scripts do.
var docsPatterns = []string{
	"*.md", "*.mdx", "*.markdown", "*.rst", "*.adoc",
	"docs/**", "doc/**",
	"LICENSE", "LICENSE.*", "LICENSE-*", "LICENCE", "LICENCE.*", "COPYING",
	"AUTHORS", "CODEOWNERS", ".github/CODEOWNERS",
	".github/ISSUE_TEMPLATE/**", ".github/PULL_REQUEST_TEMPLATE/**",
}

// generatedPatterns are files tools write: lockfiles and build output.
var generatedPatterns = []string{
	"package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml",
	"bun.lock", "bun.lockb", "dist/**",
}

// ChangedFile is one entry of a pull request's file list. Previous is set
// for renames: both names are classified.
type ChangedFile struct {
	Name     string
	Previous string
	Status   string // added, modified, renamed, … ("" when unknown)
	Patch    string // the file's unified diff, when GitHub gives one
}

// ClassifyDiff classifies the changed files. gitattributes is the base
// branch's .gitattributes (may be nil); files it marks linguist-generated
// count as generated.
func ClassifyDiff(files []ChangedFile, gitattributes []byte) DiffClass {
	if len(files) == 0 {
		return DiffEmpty
	}
	generated := parseGenerated(gitattributes)
	docs, gen := true, true
	for _, f := range files {
		for _, name := range []string{f.Name, f.Previous} {
			if name == "" {
				continue
			}
			if !matchAny(docsPatterns, name) {
				docs = false
			}
			if !matchAny(generatedPatterns, name) && !generated.match(name) {
				gen = false
			}
		}
	}
	switch {
	case docs:
		return DiffDocsOnly
	case gen:
		return DiffGeneratedOnly
	default:
		return DiffCode
	}
}

type attrRule struct {
	pattern string
	set     bool
}

type attrRules []attrRule

// match applies .gitattributes semantics: the last matching line wins.
func (r attrRules) match(name string) bool {
	set := false
	for _, rule := range r {
		if matchGlob(rule.pattern, name) {
			set = rule.set
		}
	}
	return set
}

// maxAttrLines bounds how much of a hostile .gitattributes is read.
const maxAttrLines = 10_000

func parseGenerated(b []byte) attrRules {
	var rules attrRules
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 0; sc.Scan() && n < maxAttrLines; n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		for _, attr := range fields[1:] {
			switch attr {
			case "linguist-generated", "linguist-generated=true":
				rules = append(rules, attrRule{fields[0], true})
			case "-linguist-generated", "linguist-generated=false", "!linguist-generated":
				rules = append(rules, attrRule{fields[0], false})
			}
		}
	}
	return rules
}
