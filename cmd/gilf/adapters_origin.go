package main

import (
	"context"

	"github.com/gilf-review/gilf/review"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// baseResults fits the store's base results to review.BaseResults.
type baseResults struct{ db *store.DB }

var _ review.BaseResults = baseResults{}

func (b baseResults) BaseSteps(ctx context.Context, repo, sha, executor string, commands []string) (map[string]validation.BaseStep, error) {
	return b.db.BaseSteps(ctx, store.BaseKey{Repo: repo, SHA: sha, Executor: executor}, commands)
}

func (b baseResults) SaveBaseSteps(ctx context.Context, repo, sha, executor string, steps map[string]validation.BaseStep) error {
	return b.db.SaveBaseSteps(ctx, store.BaseKey{Repo: repo, SHA: sha, Executor: executor}, steps)
}
