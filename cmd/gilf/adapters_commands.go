package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/gilf-review/gilf/review"
	"github.com/gilf-review/gilf/review/github"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// This file adapts the store and the GitHub client to the command
// worker (review/commands.go).

// pendingBatch is how many pending commands one claim reads at most.
const pendingBatch = 10

// storeCommands is review.CommandQueue and review.CommandRuns over the
// store.
type storeCommands struct {
	db    *store.DB
	owner string
}

var (
	_ review.CommandQueue = storeCommands{}
	_ review.CommandRuns  = storeCommands{}
)

// Next claims the oldest pending command another worker has not taken.
func (s storeCommands) Next(ctx context.Context, since, retryBefore time.Time) (review.CommandDelivery, bool, error) {
	pending, err := s.db.PendingCommands(ctx, since, retryBefore, pendingBatch)
	if err != nil {
		return review.CommandDelivery{}, false, err
	}
	for _, p := range pending {
		token, err := claimToken(s.owner)
		if err != nil {
			return review.CommandDelivery{}, false, err
		}
		ok, err := s.db.ClaimCommand(ctx, p, token)
		if err != nil {
			return review.CommandDelivery{}, false, err
		}
		if ok {
			return review.CommandDelivery{ID: p.ID, Token: token, InstallationID: p.InstallationID, Repo: p.Repo,
				PR: p.PR, ReceivedAt: p.ReceivedAt, Body: p.Body}, true, nil
		}
	}
	return review.CommandDelivery{}, false, nil
}

// claimToken is unique per claim: the worker's owner and random bytes.
func claimToken(owner string) (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("claim token: %w", err)
	}
	return "running on " + owner + " (" + hex.EncodeToString(b) + ")", nil
}

func (s storeCommands) Done(ctx context.Context, c review.CommandDelivery, status validation.DeliveryStatus, reason string) error {
	return s.db.FinishCommand(ctx, c.ID, c.Token, status, reason)
}

func (s storeCommands) Activity(ctx context.Context, j review.Job, since time.Time) (review.Activity, error) {
	a, err := s.db.PRActivity(ctx, j.FullName(), j.Number, since)
	return review.Activity{Runs: a.Runs, Commands: a.Commands}, err
}

func (s storeCommands) Rerun(ctx context.Context, j review.Job, reason string) (int64, bool, bool, error) {
	id, found, err := s.db.PRJob(ctx, j.FullName(), j.Number, j.HeadSHA)
	if err != nil || !found {
		return 0, false, false, err
	}
	_, queued, err := s.db.RerunJob(ctx, id, reason)
	if errors.Is(err, store.ErrNotFound) {
		return 0, false, false, nil
	}
	return id, true, queued, err
}

func (s storeCommands) LastRecord(ctx context.Context, j review.Job) (validation.Record, bool, error) {
	id, found, err := s.db.PRJob(ctx, j.FullName(), j.Number, j.HeadSHA)
	if err != nil || !found {
		return validation.Record{}, false, err
	}
	page, err := s.db.RunList(ctx, store.RunQuery{Job: id, Limit: 1})
	if err != nil || len(page.Runs) == 0 {
		return validation.Record{}, false, err
	}
	v, err := s.db.RunView(ctx, page.Runs[0].ID)
	if err != nil {
		return validation.Record{}, false, err
	}
	return v.Record, true, nil
}

// githubCommands is review.CommandGitHub over the client.
type githubCommands struct {
	c *github.Client
}

var _ review.CommandGitHub = githubCommands{}

func (g githubCommands) Permission(ctx context.Context, j review.Job, login string) (string, error) {
	return g.c.Permission(ctx, repoOf(j), login)
}

func (g githubCommands) React(ctx context.Context, j review.Job, commentID int64) error {
	return g.c.React(ctx, repoOf(j), commentID, github.ReactionEyes)
}

func (g githubCommands) Comment(ctx context.Context, j review.Job, body string) error {
	return g.c.CommentOnPR(ctx, repoOf(j), j.Number, body)
}
