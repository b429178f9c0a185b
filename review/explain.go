package review

import (
	"cmp"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gilf-review/gilf/excerpt"
	"github.com/gilf-review/gilf/validation"
)

// Limits of what the check run carries.
const (
	// MaxAnnotations is the most annotations one check run gets; the
	// overflow is counted in its summary. GitHub takes 50 per request,
	// so this is at most ten requests.
	MaxAnnotations = 500
	// FailureExcerptBytes is the most of one failed step's output its
	// finding quotes: the failures whole, then the tail.
	FailureExcerptBytes = 12000
	// maxAnnotationMessage bounds one annotation's message (GitHub allows
	// 64 KiB; a screenful is what helps).
	maxAnnotationMessage = 4000
	// maxAnnotationTitle bounds one annotation's title.
	maxAnnotationTitle = 255
)

// explain turns the output of each failed step into what an author acts
// on, while the checkout still exists: the finding of the step quotes its
// failures first (excerpt), with the first failure's file, and the
// failures that point at a file of the checkout become annotations —
// files the pull request changed first.
func explain(rec *validation.Record, root string, files []ChangedFile) []Annotation {
	exists := func(p string) bool {
		if !filepath.IsLocal(filepath.FromSlash(p)) {
			return false
		}
		st, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p)))
		return err == nil && st.Mode().IsRegular()
	}
	changed := map[string]bool{}
	for _, f := range files {
		changed[f.Name] = true
	}
	var out []Annotation
	for _, st := range rec.Steps {
		if !badEnding(st.Status) {
			continue
		}
		text := outputText(st.Output)
		res := excerpt.Parse(text, excerpt.Options{Root: st.Cwd, Exists: exists})
		// The pull request's failures first, then the others'.
		slices.SortStableFunc(res.Failures, func(a, b excerpt.Failure) int {
			return cmp.Compare(originRank(st, a), originRank(st, b))
		})
		for i := range rec.Findings {
			f := &rec.Findings[i]
			if f.Step != st.Name || !f.ExecutionClaim {
				continue
			}
			f.Body = excerpt.Excerpt(text, res, FailureExcerptBytes)
			if len(res.Failures) > 0 && f.Path == "" && exists(res.Failures[0].Path) {
				f.Path = res.Failures[0].Path
			}
		}
		for _, a := range res.Annotations {
			out = append(out, Annotation{
				Path: a.Path, StartLine: a.StartLine, EndLine: a.EndLine,
				StartColumn: a.StartColumn, EndColumn: a.EndColumn,
				Level:   annotationLevel(st, a),
				Title:   clipText(oneLine(st.Name+": "+a.Title), maxAnnotationTitle),
				Message: clipText(a.Message, maxAnnotationMessage),
			})
		}
	}
	// Files the pull request changed first; otherwise the tools' order.
	slices.SortStableFunc(out, func(a, b Annotation) int {
		return cmp.Compare(rank(changed, a.Path), rank(changed, b.Path))
	})
	return out
}

func rank(changed map[string]bool, p string) int {
	if changed[path.Clean(p)] {
		return 0
	}
	return 1
}

func badEnding(s validation.Status) bool {
	return s == validation.StatusFailed || s == validation.StatusTimedOut || s == validation.StatusKilled
}

// capAnnotations keeps the first max annotations and counts the rest.
func capAnnotations(a []Annotation, max int) ([]Annotation, int) {
	if len(a) <= max {
		return a, 0
	}
	return a[:max], len(a) - max
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	return s
}

// clipText cuts s to at most n bytes on a rune boundary.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:runeStart(s, n-len("…"))] + "…"
}
