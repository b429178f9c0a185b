package store_test

import (
	"context"
	"testing"

	"github.com/gilf-review/gilf/store"
)

func TestZZDumpPlans(t *testing.T) {
	db := openAt(t, pg.NewDatabase(t), store.Options{})
	plans, err := store.PostgresPipelinePlans(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	for n, p := range plans {
		t.Logf("%s\n%s", n, p)
	}
}
