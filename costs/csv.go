package costs

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Row is one line of a cost export: the spans of one executor's lane on
// one UTC day, of one repository when the export is by repository.
type Row struct {
	Day        string // YYYY-MM-DD, UTC
	Repository string // owner/name; "" when not grouped by repository
	Executor   string
	Lane       string
	Spans      int
	Priced     int      // spans with a known cost
	USD        *float64 // nil: no span of the row had a price
	Seconds    float64
	// InputTokens and OutputTokens are the semantic lane's.
	InputTokens  int64
	OutputTokens int64
}

// CSVHeader is the first line of WriteCSV's output; repository is its
// second column only when the export is by repository.
func CSVHeader(byRepo bool) []string {
	h := []string{"day", "repository", "executor", "lane", "spans", "priced_spans", "usd", "seconds",
		"input_tokens", "output_tokens", "method"}
	if !byRepo {
		h = append(h[:1], h[2:]...)
	}
	return h
}

// WriteCSV writes rows as RFC 4180 CSV with CSVHeader. An unknown cost is
// an empty cell, never 0. A cell a spreadsheet would read as a formula
// (one that starts with =, +, -, @, a tab or a carriage return: a
// repository or model name is not gilf's to trust) is written with a
// leading apostrophe.
func WriteCSV(w io.Writer, rows []Row, byRepo bool) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader(byRepo)); err != nil {
		return fmt.Errorf("write costs csv: %w", err)
	}
	for _, r := range rows {
		usd := ""
		if r.USD != nil {
			usd = strconv.FormatFloat(*r.USD, 'f', -1, 64)
		}
		rec := []string{r.Day, cell(r.Repository), cell(r.Executor), cell(r.Lane), strconv.Itoa(r.Spans),
			strconv.Itoa(r.Priced), usd, strconv.FormatFloat(r.Seconds, 'f', 3, 64),
			strconv.FormatInt(r.InputTokens, 10), strconv.FormatInt(r.OutputTokens, 10), MethodFor(r.Lane)}
		if !byRepo {
			rec = append(rec[:1], rec[2:]...)
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("write costs csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write costs csv: %w", err)
	}
	return nil
}

// cell keeps a spreadsheet from reading s as a formula.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
