package postgres_test

import (
	"os"
	"testing"

	"github.com/gilf-review/gilf/internal/pgtest"
	"github.com/gilf-review/gilf/store/postgres"
	"github.com/gilf-review/gilf/store/storetest"
)

// pg is the package's PostgreSQL server (TestMain).
var pg *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &pg)) }

// TestConformance runs the store's conformance suite on PostgreSQL: a new
// database on the package's server per test.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Engine{Name: "postgres", Open: postgres.Open,
		NewLocation: func(t testing.TB) string { return pg.NewDatabase(t) }})
}
