package remote

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// phases is a Lifecycle that records which phases and cleanups ran.
type phases struct {
	prepareErr, startErr, stepsErr, cleanupErr, destroyErr error
	done                                                   bool
	panicInSteps                                           bool
	ran                                                    []string
}

func (p *phases) Prepare(_ context.Context, res *executors.Result) (Staged, error) {
	p.ran = append(p.ran, "prepare")
	if p.done {
		res.Steps = []validation.StepResult{{Name: "test", Status: validation.StatusInconclusive}}
	}
	return Staged{Done: p.done, Cleanup: func() error { p.ran = append(p.ran, "cleanup"); return p.cleanupErr }}, p.prepareErr
}

func (p *phases) Start(context.Context, *executors.Result) (func() error, error) {
	p.ran = append(p.ran, "start")
	if p.startErr != nil {
		return nil, p.startErr
	}
	return func() error { p.ran = append(p.ran, "destroy"); return p.destroyErr }, nil
}

func (p *phases) Steps(_ context.Context, res *executors.Result) error {
	p.ran = append(p.ran, "steps")
	if p.panicInSteps {
		panic("steps")
	}
	res.Steps = []validation.StepResult{{Name: "test", Status: validation.StatusPassed}}
	return p.stepsErr
}

func TestRunPhases(t *testing.T) {
	errX := errors.New("x")
	tests := []struct {
		name      string
		p         phases
		want      string // phases in order
		wantErr   bool
		wantEmpty bool // the result is empty: nothing ran
	}{
		{name: "ok", want: "prepare start steps destroy cleanup"},
		{name: "refused", p: phases{prepareErr: errX}, want: "prepare cleanup", wantErr: true, wantEmpty: true},
		{name: "nothing runnable", p: phases{done: true}, want: "prepare cleanup"},
		{name: "create failed", p: phases{startErr: errX}, want: "prepare start cleanup", wantErr: true, wantEmpty: true},
		{name: "steps failed", p: phases{stepsErr: errX}, want: "prepare start steps destroy cleanup", wantErr: true},
		{name: "never started", p: phases{stepsErr: NotStarted(errX)}, want: "prepare start steps destroy cleanup", wantErr: true, wantEmpty: true},
		{name: "destroy failed", p: phases{destroyErr: errX}, want: "prepare start steps destroy cleanup", wantErr: true},
		{name: "cleanup failed", p: phases{cleanupErr: errX}, want: "prepare start steps destroy cleanup", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			res, err := Run(context.Background(), executors.Result{Executor: "test"}, &p)
			if got := strings.Join(p.ran, " "); got != tc.want {
				t.Errorf("phases %q, want %q", got, tc.want)
			}
			if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, errX)) {
				t.Errorf("err = %v, want error %v", err, tc.wantErr)
			}
			if empty := res.Executor == "" && res.Steps == nil && res.Started.IsZero(); empty != tc.wantEmpty {
				t.Errorf("result %+v, want empty %v", res, tc.wantEmpty)
			}
			if !tc.wantEmpty && (res.Started.IsZero() || res.Finished.Before(res.Started)) {
				t.Errorf("started %v finished %v", res.Started, res.Finished)
			}
		})
	}
}

func TestRunCleansUpOnPanic(t *testing.T) {
	p := phases{panicInSteps: true}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the caller")
			}
		}()
		_, _ = Run(context.Background(), executors.Result{Executor: "test"}, &p)
	}()
	if got, want := strings.Join(p.ran, " "), "prepare start steps destroy cleanup"; got != want {
		t.Errorf("phases %q, want %q", got, want)
	}
}
