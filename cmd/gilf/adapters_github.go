package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/gilf-review/gilf/review"
	"github.com/gilf-review/gilf/review/github"
	"github.com/gilf-review/gilf/store"
)

// This file adapts the GitHub client (package review/github) to the
// pipeline's consumer interfaces. The pipeline never sees go-github or
// the client's types; the client never sees a review.Job.

// truncatedFileList stands for the files GitHub did not list (over
// github.DefaultMaxChangedFiles): it is not documentation nor generated,
// so a truncated diff is always validated as code.
const truncatedFileList = "(gilf: the changed-file list was truncated; unlisted files count as code)"

// repoOf names a job's repository for the client; every call is made
// with a token scoped to it.
func repoOf(j review.Job) github.Repo {
	return github.Repo{InstallationID: j.InstallationID, Owner: j.Owner, Name: j.Repo}
}

// githubPRs reads pull requests, base files and head tarballs.
type githubPRs struct {
	c *github.Client
}

var (
	_ review.PullRequests = githubPRs{}
	_ review.Checkouts    = githubPRs{}
)

// PullRequest reads the pull request. A deleted head fork is not an
// error here: the pipeline applies policy and records the refusal.
func (g githubPRs) PullRequest(ctx context.Context, j review.Job) (review.PR, error) {
	pr, err := g.c.PullRequest(ctx, repoOf(j), j.Number)
	var missing *github.HeadRepoMissingError
	switch {
	case errors.As(err, &missing):
		pr = missing.PR
	case err != nil:
		return review.PR{}, err
	}
	return review.PR{
		HeadSHA:         pr.HeadSHA,
		HeadRepoMissing: missing != nil || pr.HeadRepoGone,
		BaseRef:         pr.BaseRef,
		BaseSHA:         pr.BaseSHA,
		CloneURL:        pr.CloneURL,
		Draft:           pr.Draft,
		Author:          pr.Author,
		Labels:          pr.Labels,
		Title:           pr.Title,
		Body:            pr.Body,
	}, nil
}

// ChangedFiles lists the changed files; a truncated list ends with an
// entry that counts as code.
func (g githubPRs) ChangedFiles(ctx context.Context, j review.Job) ([]review.ChangedFile, error) {
	cf, err := g.c.ChangedFiles(ctx, repoOf(j), j.Number)
	if err != nil {
		return nil, err
	}
	out := make([]review.ChangedFile, 0, len(cf.Files)+1)
	for _, f := range cf.Files {
		out = append(out, review.ChangedFile{Name: f.Name, Previous: f.Previous, Status: f.Status, Patch: f.Patch})
	}
	if cf.Truncated {
		out = append(out, review.ChangedFile{Name: truncatedFileList})
	}
	return out, nil
}

// BaseFile reads a file of the base branch.
func (g githubPRs) BaseFile(ctx context.Context, j review.Job, ref, path string) ([]byte, bool, error) {
	return g.c.BaseFile(ctx, repoOf(j), ref, path)
}

// Checkout downloads and extracts the head tarball.
func (g githubPRs) Checkout(ctx context.Context, j review.Job, sha, dst string) (string, error) {
	return g.c.Checkout(ctx, repoOf(j), sha, dst)
}

// postedRecorder records what was posted; *store.DB implements it.
type postedRecorder interface {
	MarkPosted(ctx context.Context, p store.Posted) error
}

// githubPublisher posts the review and the check run, then records their
// ids at once: a worker that takes the job over after a crash sees them.
// Posting is idempotent in the client (the job marker and external_id),
// so a retry after a failed record does not post twice.
type githubPublisher struct {
	c      *github.Client
	posted postedRecorder
}

var (
	_ review.Publisher         = githubPublisher{}
	_ review.ProgressPublisher = githubPublisher{}
	_ review.CheckFinisher     = githubPublisher{}
)

// FinishCheck completes the job's check run only (created when missing),
// without re-reading the head: nothing is posted to the conversation.
func (g githubPublisher) FinishCheck(ctx context.Context, j review.Job, p review.Publication) error {
	id, _, err := g.c.PostCheckRun(ctx, repoOf(j), github.Publication{
		JobID: j.PublicationID(), HeadSHA: p.HeadSHA, NoReview: true,
		Conclusion: p.Conclusion, Title: p.Title, Summary: p.Summary, Text: p.Text, DetailsURL: p.DetailsURL,
	})
	if id != 0 {
		if merr := g.posted.MarkPosted(ctx, store.Posted{JobID: j.ID, CheckRunID: id, HeadSHA: p.HeadSHA}); merr != nil {
			return errors.Join(err, fmt.Errorf("record posted check run: %w", merr))
		}
	}
	return err
}

// Progress creates the job's check run (queued) or moves it on
// (in_progress, the step now running); a completed one is left alone.
func (g githubPublisher) Progress(ctx context.Context, j review.Job, p review.CheckProgress) error {
	_, err := g.c.StartCheckRun(ctx, repoOf(j), github.CheckStart{
		JobID: j.PublicationID(), HeadSHA: p.HeadSHA, Status: p.Status, StartedAt: p.StartedAt,
		Title: p.Title, Summary: p.Summary, DetailsURL: p.DetailsURL,
	})
	return err
}

func (g githubPublisher) Publish(ctx context.Context, j review.Job, p review.Publication) error {
	annotations := make([]github.Annotation, len(p.Annotations))
	for i, a := range p.Annotations {
		annotations[i] = github.Annotation(a)
	}
	comments := make([]github.ReviewComment, len(p.Comments))
	for i, c := range p.Comments {
		comments[i] = github.ReviewComment{Path: c.Path, Line: c.Line, Side: "RIGHT", Body: c.Body, Fingerprint: c.Fingerprint}
	}
	got, err := g.c.Publish(ctx, repoOf(j), j.Number, github.Publication{
		JobID:        j.PublicationID(),
		HeadSHA:      p.HeadSHA,
		Body:         p.Body,
		Event:        p.Event,
		NoReview:     p.NoReview,
		Conclusion:   p.Conclusion,
		Title:        p.Title,
		Summary:      p.Summary,
		Text:         p.Text,
		DetailsURL:   p.DetailsURL,
		Annotations:  annotations,
		Comments:     comments,
		SemanticHead: p.SemanticHead,
	})
	if errors.Is(err, github.ErrStaleHead) {
		return fmt.Errorf("%w: %w", review.ErrStaleHead, err)
	}
	if got.ReviewID != 0 || got.CheckRunID != 0 {
		// Recorded even when the check run failed after the review
		// landed: what is on GitHub is a fact.
		if merr := g.posted.MarkPosted(ctx, store.Posted{
			JobID: j.ID, ReviewID: got.ReviewID, CheckRunID: got.CheckRunID, HeadSHA: p.HeadSHA,
		}); merr != nil {
			return errors.Join(err, fmt.Errorf("record posted review: %w", merr))
		}
	}
	return err
}
