package e2b

import (
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/executortest"
)

func TestConformance(t *testing.T) {
	f := newFixture(t, nil)
	executortest.Conformance(t, func(t *testing.T) executors.Executor {
		return f.exec(t, nil)
	})
	f.srv.CheckClean(t, 5*time.Second)
}
