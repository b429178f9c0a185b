package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gilf-review/gilf/validation"
)

// The lanes of the failure-origin runs (SPEC §3.4.1): the base's
// validation and the retry of a head's failed steps.
const (
	LaneBase  Lane = "base"
	LaneRetry Lane = "retry"
)

// BaseKey names a base validated for failure origin: the repository
// (owner/name), the base commit and the executor that ran it.
type BaseKey struct {
	Repo, SHA, Executor string
}

// MaxBaseCommands bounds the commands one BaseSteps call asks for: a plan
// has install and at most four scripts.
const MaxBaseCommands = 16

// storedBaseStep is a base step's row, with each failure's comparison key
// (which the record does not show).
type storedBaseStep struct {
	Name     string              `json:"name"`
	Status   validation.Status   `json:"status"`
	ExitCode *int                `json:"exitCode"`
	Reason   string              `json:"reason,omitempty"`
	Failures []storedBaseFailure `json:"failures,omitempty"`
}

type storedBaseFailure struct {
	Name string `json:"name"`
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
	Key  string `json:"key"`
}

// BaseSteps returns the stored results of the base at key for each of
// commands (a step's name and command, as SaveBaseSteps was given them),
// by command; a command never stored is absent.
func (d *DB) BaseSteps(ctx context.Context, key BaseKey, commands []string) (map[string]validation.BaseStep, error) {
	if len(commands) > MaxBaseCommands {
		return nil, fmt.Errorf("base steps of %s@%s: %d commands, over the limit of %d", key.Repo, key.SHA, len(commands), MaxBaseCommands)
	}
	out := map[string]validation.BaseStep{}
	if len(commands) == 0 {
		return out, nil
	}
	args := []any{key.Repo, key.SHA, key.Executor}
	for _, c := range commands {
		args = append(args, c)
	}
	rows, err := queryRows(ctx, d.r, scanPair[string, string], `SELECT command, result FROM base_results
		WHERE repo = ? AND base_sha = ? AND executor = ? AND command IN (?`+strings.Repeat(", ?", len(commands)-1)+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("base steps of %s@%s: %w", key.Repo, key.SHA, err)
	}
	for _, r := range rows {
		var s storedBaseStep
		if err := json.Unmarshal([]byte(r.b), &s); err != nil {
			return nil, fmt.Errorf("base step %q of %s@%s: %w", r.a, key.Repo, key.SHA, err)
		}
		b := validation.BaseStep{Name: s.Name, Status: s.Status, ExitCode: s.ExitCode, Reason: s.Reason}
		for _, f := range s.Failures {
			b.Failures = append(b.Failures, validation.StepFailure{Name: f.Name, File: f.File, Line: f.Line, Key: f.Key})
		}
		out[r.a] = b
	}
	return out, nil
}

// SaveBaseSteps stores the base's results at key by command. A command
// stored already keeps its first result: the base is one commit, and
// what it did once is what it does.
func (d *DB) SaveBaseSteps(ctx context.Context, key BaseKey, steps map[string]validation.BaseStep) error {
	if len(steps) > MaxBaseCommands {
		return fmt.Errorf("save base steps of %s@%s: %d commands, over the limit of %d", key.Repo, key.SHA, len(steps), MaxBaseCommands)
	}
	if key.Repo == "" || key.SHA == "" || key.Executor == "" {
		return fmt.Errorf("save base steps: incomplete key %+v", key)
	}
	now := d.nowMs()
	err := d.writeTx(ctx, func(tx *sql.Tx) error {
		for command, b := range steps {
			s := storedBaseStep{Name: b.Name, Status: b.Status, ExitCode: b.ExitCode, Reason: b.Reason}
			for _, f := range b.Failures {
				s.Failures = append(s.Failures, storedBaseFailure{Name: f.Name, File: f.File, Line: f.Line, Key: f.Key})
			}
			result, err := json.Marshal(s)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO base_results (repo, base_sha, executor, step, command, result, created_at)
				VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (repo, base_sha, executor, step, command) DO NOTHING`,
				key.Repo, key.SHA, key.Executor, b.Name, command, string(result), now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save base steps of %s@%s: %w", key.Repo, key.SHA, err)
	}
	return nil
}

// pruneBaseResults deletes the base results stored before cutoff (Unix
// milliseconds), for Prune.
func (d *DB) pruneBaseResults(ctx context.Context, cutoff int64, res *PruneResult) error {
	return d.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM base_results WHERE created_at < ?`, cutoff)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		res.BaseResults = int(n)
		return err
	})
}
