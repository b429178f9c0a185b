package review

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/evidence"
)

func TestConstructorsRefuseMissingParts(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	g := &fakeGitHub{}
	run := runnerFunc(func(context.Context, Job) (Result, error) { return Result{}, nil })
	tests := []struct {
		name string
		make func() error
		want string // "" for none
	}{
		{"pipeline", func() error {
			_, err := NewPipeline(Pipeline{PRs: g, Checkouts: g, Publisher: g, Logger: log})
			return err
		}, ""},
		{"pipeline without parts", func() error { _, err := NewPipeline(Pipeline{PRs: g}); return err }, "pipeline: missing Checkouts, Logger, Publisher"},
		{"worker", func() error {
			_, err := NewWorker(Worker{Queue: &memQueue{}, Runner: run, Owner: "w", Logger: log})
			return err
		}, ""},
		{"worker without parts", func() error { _, err := NewWorker(Worker{Runner: run}); return err }, "worker: missing Logger, Owner, Queue"},
		{"worker with a negative lease", func() error {
			_, err := NewWorker(Worker{Queue: &memQueue{}, Runner: run, Owner: "w", Logger: log, Lease: -time.Second, Concurrency: -1})
			return err
		}, "worker: concurrency -1 is negative\nworker: lease -1s is negative"},
		{"stages", func() error { _, err := NewStages(Stages{Logger: log}); return err }, ""},
		{"stages with evidence and no store", func() error {
			_, err := NewStages(Stages{Logger: log, Evidence: evidence.Options{Enabled: true}})
			return err
		}, "stages: missing EvidenceStore (evidence is enabled)"},
		{"command worker without parts", func() error { _, err := NewCommandWorker(CommandWorker{Logger: log}); return err },
			"command worker: missing GitHub, PRs, Queue, Runs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.make()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
