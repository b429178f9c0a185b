package local

import (
	"testing"
	"time"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/executortest"
)

func TestConformance(t *testing.T) {
	executortest.Conformance(t, func(t *testing.T) executors.Executor {
		return newExec(t, Options{KillGrace: 500 * time.Millisecond})
	})
}
