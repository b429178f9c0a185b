package store_test

import (
	"testing"

	"github.com/gilf-review/gilf/store/storetest"
)

// TestConformance runs the store's conformance suite (store/storetest) on
// SQLite and on PostgreSQL.
func TestConformance(t *testing.T) {
	for _, e := range []storetest.Engine{lite, postgres} {
		t.Run(e.Name, func(t *testing.T) { storetest.Run(t, e) })
	}
}
