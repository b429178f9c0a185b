package postgres

import (
	"strconv"
	"strings"
	"sync"
)

// The store's SQL is written once, in the dialect both engines share, with
// SQLite's placeholders (? and ?N). For PostgreSQL, the driver (see
// postgres.go) rewrites each statement's text before it reaches the
// server: placeholders become $N, and SQLite's INDEXED BY hints are
// dropped (PostgreSQL's planner picks the partial indexes itself). The few
// statements that need a function only one engine has take it from
// store.Driver.

// rewritten caches rewriteForPostgres by statement text: the store's
// statements are constants, but for a chain's two inserts, one text per
// chain length (at most Options.MaxBatch each): a few hundred entries.
var rewritten sync.Map // string → string

// postgresSQL returns q in PostgreSQL's dialect, cached.
func postgresSQL(q string) string {
	if v, ok := rewritten.Load(q); ok {
		return v.(string)
	}
	out := rewriteForPostgres(q)
	rewritten.Store(q, out)
	return out
}

// rewriteForPostgres turns SQLite placeholders into PostgreSQL's — ?N
// becomes $N, and each bare ? the next number — and removes
// "INDEXED BY <name>" hints. String literals, quoted identifiers and
// comments are copied as they are.
func rewriteForPostgres(q string) string {
	var b strings.Builder
	b.Grow(len(q) + 16)
	next := 0
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '\'' || c == '"':
			j := closingQuote(q, i)
			b.WriteString(q[i:j])
			i = j
		case c == '-' && strings.HasPrefix(q[i:], "--"):
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				j = len(q) - i
			}
			b.WriteString(q[i : i+j])
			i += j
		case c == '?':
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			b.WriteByte('$')
			if j > i+1 {
				b.WriteString(q[i+1 : j])
			} else {
				next++
				b.WriteString(strconv.Itoa(next))
			}
			i = j
		case (c == 'I' || c == 'i') && wordAt(q, i, "INDEXED"):
			j := skipSpace(q, i+len("INDEXED"))
			if !wordAt(q, j, "BY") {
				b.WriteByte(c)
				i++
				continue
			}
			j = skipSpace(q, j+len("BY"))
			for j < len(q) && (isIdent(q[j])) {
				j++
			}
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// closingQuote returns the index just past the literal or identifier
// opened at q[i] (a doubled quote inside is part of it); an unterminated
// one runs to the end.
func closingQuote(q string, i int) int {
	quote := q[i]
	for j := i + 1; j < len(q); j++ {
		if q[j] != quote {
			continue
		}
		if j+1 < len(q) && q[j+1] == quote {
			j++
			continue
		}
		return j + 1
	}
	return len(q)
}

// wordAt reports whether the keyword w (upper case) stands at q[i] as a
// whole word, in any letter case.
func wordAt(q string, i int, w string) bool {
	if i+len(w) > len(q) || !strings.EqualFold(q[i:i+len(w)], w) {
		return false
	}
	if i > 0 && isIdent(q[i-1]) {
		return false
	}
	return i+len(w) == len(q) || !isIdent(q[i+len(w)])
}

func skipSpace(q string, i int) int {
	for i < len(q) && (q[i] == ' ' || q[i] == '\t' || q[i] == '\n' || q[i] == '\r') {
		i++
	}
	return i
}

func isIdent(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
