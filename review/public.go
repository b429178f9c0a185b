package review

import (
	"regexp"
	"slices"
	"strings"

	"github.com/gilf-review/gilf/validation"
)

// workerSetting matches the names of the worker's settings. What is
// posted names none of them: which setting is wrong is the operator's to
// read in the log, not the author's on the pull request.
var workerSetting = regexp.MustCompile(`\bGILF_[A-Z0-9_]+`)

// publicWords is s as the pull request may read it: worker settings named
// as such, and each of the worker's own paths (internals) withheld.
func publicWords(s string, internals []string) string {
	if s == "" {
		return s
	}
	s = workerSetting.ReplaceAllString(s, "a worker setting")
	for _, p := range internals {
		if len(p) > 1 {
			s = strings.ReplaceAll(s, p, "(worker path)")
		}
	}
	return s
}

// publicRecord is the record as rendered for the pull request: gilf's own
// words about the worker (notes, reasons, refusal messages, control
// details) pass through publicWords, and the kernel version is left out.
// The pull request's own output is left as it printed it (it is redacted
// and fenced elsewhere). The stored record keeps everything.
func publicRecord(rec validation.Record, internals []string) validation.Record {
	pw := func(s string) string { return publicWords(s, internals) }
	rec.Reason = pw(rec.Reason)
	rec.Platform.Kernel = ""
	rec.Notes = slices.Clone(rec.Notes)
	for i := range rec.Notes {
		rec.Notes[i] = pw(rec.Notes[i])
	}
	if rec.Refusal != nil {
		r := *rec.Refusal
		r.Msg = pw(r.Msg)
		rec.Refusal = &r
	}
	if rec.Gap != nil {
		g := *rec.Gap
		g.Msg = pw(g.Msg)
		rec.Gap = &g
	}
	rec.Integrity = pw(rec.Integrity)
	rec.Steps = slices.Clone(rec.Steps)
	for i := range rec.Steps {
		rec.Steps[i].Reason = pw(rec.Steps[i].Reason)
	}
	rec.Controls = slices.Clone(rec.Controls)
	for i := range rec.Controls {
		rec.Controls[i].Detail = pw(rec.Controls[i].Detail)
	}
	return rec
}
