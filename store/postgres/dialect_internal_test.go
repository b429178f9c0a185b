package postgres

import "testing"

func TestRewriteForPostgres(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"SELECT ? , ?", "SELECT $1 , $2"},
		{"WHERE a = ?1 AND b = ?2 OR c = ?1", "WHERE a = $1 AND b = $2 OR c = $1"},
		{"WHERE a = ?12", "WHERE a = $12"},
		// Literals, quoted identifiers and comments keep their question marks.
		{"SELECT COALESCE(o, '?') || ?", "SELECT COALESCE(o, '?') || $1"},
		{"SELECT 'it''s ?', ?", "SELECT 'it''s ?', $1"},
		{`SELECT "a?b" FROM t WHERE x = ?`, `SELECT "a?b" FROM t WHERE x = $1`},
		{"SELECT ? -- is it?\nFROM t WHERE y = ?", "SELECT $1 -- is it?\nFROM t WHERE y = $2"},
		{"SELECT 'unterminated ?", "SELECT 'unterminated ?"},
		// INDEXED BY hints go, in any case and spacing; look-alikes stay.
		{"UPDATE jobs INDEXED BY jobs_pr SET x = ?", "UPDATE jobs  SET x = $1"},
		{"FROM runs r indexed  by\n runs_unpruned JOIN", "FROM runs r  JOIN"},
		{"SELECT reindexed BY FROM t", "SELECT reindexed BY FROM t"},
		{"SELECT indexed FROM t", "SELECT indexed FROM t"},
		{"SELECT x AS indexed_by FROM t", "SELECT x AS indexed_by FROM t"},
	} {
		if got := rewriteForPostgres(tc.in); got != tc.want {
			t.Errorf("rewriteForPostgres(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestPostgresSQLCaches(t *testing.T) {
	q := "SELECT ?, ? -- cache test"
	first := postgresSQL(q)
	if first != "SELECT $1, $2 -- cache test" {
		t.Fatalf("postgresSQL = %q", first)
	}
	if v, ok := rewritten.Load(q); !ok || v.(string) != first {
		t.Fatalf("not cached: %v %v", v, ok)
	}
}

func FuzzRewriteForPostgres(f *testing.F) {
	for _, s := range []string{"SELECT ?", "'?'", "-- ?\n?", "INDEXED BY x", `"?"?1`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		out := rewriteForPostgres(q)
		if len(out) > len(q)*3+8 {
			t.Fatalf("rewrite grew %d bytes to %d", len(q), len(out))
		}
	})
}
