package github

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	gh "github.com/google/go-github/v84/github"
)

// filesPerPage is the page size of the changed-file listing (GitHub's
// maximum).
const filesPerPage = 100

// PullRequest is what gilf reads of a pull request.
type PullRequest struct {
	Number   int
	Title    string
	Body     string // the description, as the author wrote it (untrusted)
	State    string
	HeadSHA  string
	HeadRef  string
	HeadRepo string // owner/name of head.repo
	BaseRef  string
	BaseSHA  string
	// CloneURL is the base repository's public clone URL.
	CloneURL     string
	Draft        bool
	Author       string
	Labels       []string
	FromFork     bool // head.repo differs from the base repository
	Mergeable    *bool
	HeadRepoGone bool // head.repo is null; PullRequest also returns *HeadRepoMissingError
}

// PullRequest reads pull request number of r. When head.repo is null (the
// fork was deleted) it returns a *HeadRepoMissingError carrying what was
// read; errors.Is(err, ErrHeadRepoMissing) holds.
func (c *Client) PullRequest(ctx context.Context, r Repo, number int) (PullRequest, error) {
	g, err := c.forRepo(r)
	if err != nil {
		return PullRequest{}, err
	}
	var pr *gh.PullRequest
	err = c.call(ctx, "get pull request", func(ctx context.Context) (*gh.Response, error) {
		var resp *gh.Response
		var err error
		pr, resp, err = g.PullRequests.Get(ctx, r.Owner, r.Name, number)
		return resp, err
	})
	if err != nil {
		return PullRequest{}, fmt.Errorf("%s#%d: %w", r, number, err)
	}
	out := PullRequest{
		Number:    pr.GetNumber(),
		Title:     pr.GetTitle(),
		Body:      pr.GetBody(),
		State:     pr.GetState(),
		HeadSHA:   pr.GetHead().GetSHA(),
		HeadRef:   pr.GetHead().GetRef(),
		BaseRef:   pr.GetBase().GetRef(),
		BaseSHA:   pr.GetBase().GetSHA(),
		CloneURL:  pr.GetBase().GetRepo().GetCloneURL(),
		Draft:     pr.GetDraft(),
		Author:    pr.GetUser().GetLogin(),
		Mergeable: pr.Mergeable,
	}
	for _, l := range pr.Labels {
		out.Labels = append(out.Labels, l.GetName())
	}
	if out.HeadSHA == "" || out.BaseRef == "" {
		return PullRequest{}, fmt.Errorf("%s#%d: response has no head sha or base ref", r, number)
	}
	head := pr.GetHead().GetRepo()
	if head == nil {
		out.HeadRepoGone = true
		return PullRequest{}, &HeadRepoMissingError{PR: out}
	}
	out.HeadRepo = head.GetFullName()
	out.FromFork = !strings.EqualFold(out.HeadRepo, pr.GetBase().GetRepo().GetFullName())
	return out, nil
}

// HeadSHA re-reads the pull request's current head (the post-time guard).
func (c *Client) HeadSHA(ctx context.Context, r Repo, number int) (string, error) {
	pr, err := c.PullRequest(ctx, r, number)
	var missing *HeadRepoMissingError
	if errors.As(err, &missing) {
		return missing.PR.HeadSHA, nil
	}
	if err != nil {
		return "", err
	}
	return pr.HeadSHA, nil
}

// ChangedFile is one entry of the pull request's file list. Previous is
// the old name of a renamed file.
type ChangedFile struct {
	Name     string
	Previous string
	Status   string // added, removed, modified, renamed, copied, changed, unchanged
	// Patch is the file's unified diff as GitHub gives it (absent for
	// binary or very large files), cut at MaxPatchBytes.
	Patch string
}

// MaxPatchBytes is the most of one file's patch kept: the semantic
// review budgets its input further, and a hostile diff cannot fill memory.
const MaxPatchBytes = 256 << 10

// ChangedFiles is the pull request's file list. Truncated is true when the
// list was cut at Config.MaxChangedFiles: a classifier must then assume
// code changed.
type ChangedFiles struct {
	Files     []ChangedFile
	Truncated bool
}

// ChangedFiles lists the files of pull request number, page by page, up
// to Config.MaxChangedFiles.
func (c *Client) ChangedFiles(ctx context.Context, r Repo, number int) (ChangedFiles, error) {
	g, err := c.forRepo(r)
	if err != nil {
		return ChangedFiles{}, err
	}
	var out ChangedFiles
	opts := &gh.ListOptions{PerPage: filesPerPage, Page: 1}
	for {
		var page []*gh.CommitFile
		var next int
		err := c.call(ctx, "list changed files", func(ctx context.Context) (*gh.Response, error) {
			var resp *gh.Response
			var err error
			page, resp, err = g.PullRequests.ListFiles(ctx, r.Owner, r.Name, number, opts)
			if resp != nil {
				next = resp.NextPage
			}
			return resp, err
		})
		if err != nil {
			return ChangedFiles{}, fmt.Errorf("%s#%d: %w", r, number, err)
		}
		for _, f := range page {
			if len(out.Files) == c.cfg.MaxChangedFiles {
				out.Truncated = true
				return out, nil
			}
			patch := f.GetPatch()
			if len(patch) > MaxPatchBytes {
				patch = patch[:MaxPatchBytes]
			}
			out.Files = append(out.Files, ChangedFile{Name: f.GetFilename(), Previous: f.GetPreviousFilename(), Status: f.GetStatus(), Patch: patch})
		}
		if next == 0 {
			return out, nil
		}
		if len(out.Files) == c.cfg.MaxChangedFiles {
			out.Truncated = true
			return out, nil
		}
		opts.Page = next
	}
}

// BaseFile reads path at ref (a base branch, never the PR head) through
// the Contents API. found is false when the file does not exist (404).
// A file over 1 MB, which the Contents API returns without content, is
// read again with the raw media type. Anything other than a regular file
// gives ErrNotAFile; over Config.MaxBaseFileBytes gives ErrTooLarge.
func (c *Client) BaseFile(ctx context.Context, r Repo, ref, path string) (data []byte, found bool, err error) {
	g, err := c.forRepo(r)
	if err != nil {
		return nil, false, err
	}
	var file *gh.RepositoryContent
	var dir []*gh.RepositoryContent
	err = c.call(ctx, "get contents", func(ctx context.Context) (*gh.Response, error) {
		var resp *gh.Response
		var err error
		file, dir, resp, err = g.Repositories.GetContents(ctx, r.Owner, r.Name, path, &gh.RepositoryContentGetOptions{Ref: ref})
		return resp, err
	})
	if statusOf(err) == http.StatusNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s %s@%s: %w", r, path, ref, err)
	}
	if file == nil || dir != nil {
		return nil, false, fmt.Errorf("%s %s@%s: a directory: %w", r, path, ref, ErrNotAFile)
	}
	if t := file.GetType(); t != "file" {
		return nil, false, fmt.Errorf("%s %s@%s: a %s: %w", r, path, ref, t, ErrNotAFile)
	}
	if int64(file.GetSize()) > c.cfg.MaxBaseFileBytes {
		return nil, false, fmt.Errorf("%s %s@%s: %d bytes, over %d: %w", r, path, ref, file.GetSize(), c.cfg.MaxBaseFileBytes, ErrTooLarge)
	}
	if file.GetEncoding() == "base64" {
		// The API wraps base64 at 60 columns: drop all whitespace first.
		var raw string
		if file.Content != nil {
			raw = *file.Content
		}
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(raw), ""))
		if err != nil {
			return nil, false, fmt.Errorf("%s %s@%s: decode content: %w", r, path, ref, err)
		}
		return b, true, nil
	}
	if file.GetSize() == 0 {
		return []byte{}, true, nil
	}
	// encoding "none": over 1 MB, ask for the raw bytes.
	b, err := c.rawFile(ctx, g, r, ref, path)
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}

func (c *Client) rawFile(ctx context.Context, g *gh.Client, r Repo, ref, path string) ([]byte, error) {
	u := fmt.Sprintf("repos/%s/%s/contents/%s?ref=%s", url.PathEscape(r.Owner), url.PathEscape(r.Name), escapePath(path), url.QueryEscape(ref))
	var data []byte
	err := c.call(ctx, "get raw contents", func(ctx context.Context) (*gh.Response, error) {
		req, err := g.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/vnd.github.raw")
		resp, err := g.BareDo(ctx, req)
		if err != nil {
			return resp, err
		}
		defer resp.Body.Close()
		data, err = io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxBaseFileBytes+1))
		return resp, err
	})
	if err != nil {
		return nil, fmt.Errorf("%s %s@%s: %w", r, path, ref, err)
	}
	if int64(len(data)) > c.cfg.MaxBaseFileBytes {
		return nil, fmt.Errorf("%s %s@%s: over %d bytes: %w", r, path, ref, c.cfg.MaxBaseFileBytes, ErrTooLarge)
	}
	return data, nil
}

func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}
