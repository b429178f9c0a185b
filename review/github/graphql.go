package github

// A small GraphQL client: go-github speaks REST only, and two things gilf
// needs exist only in GitHub's GraphQL API — the review threads of a pull
// request with their resolved state, and resolveReviewThread. Requests go
// through the same installation token, retry loop and error classes as
// every REST call; an answer that carries "errors" is an error.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v84/github"

	"github.com/gilf-review/gilf/internal/logkey"
)

const (
	// maxThreadPages bounds the review-thread listing (100 a page).
	maxThreadPages = 20
	// threadsPerPage and threadComments size one page of threads and
	// the comments read of each thread (a longer thread's later comments
	// are not read: gilf's own comment is its first).
	threadsPerPage = "100"
	threadComments = "50"
)

// graphqlURL is the GraphQL endpoint next to the REST root: api.github.com
// serves /graphql, GitHub Enterprise Server /api/graphql beside /api/v3.
func (c *Client) graphqlURL() string {
	u := *c.base
	if p, ok := strings.CutSuffix(u.Path, "/api/v3/"); ok {
		u.Path = p + "/api/graphql"
	} else {
		u.Path += "graphql"
	}
	return u.String()
}

// GraphQLError is an answer whose "errors" is not empty.
type GraphQLError struct {
	Messages []string
}

func (e *GraphQLError) Error() string { return "graphql: " + strings.Join(e.Messages, "; ") }

// graphql posts one query with variables and decodes data into out.
func (c *Client) graphql(ctx context.Context, r Repo, op, query string, vars map[string]any, out any) error {
	g, err := c.forRepo(r)
	if err != nil {
		return err
	}
	var answer struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	err = c.call(ctx, op, func(ctx context.Context) (*gh.Response, error) {
		req, err := g.NewRequest(http.MethodPost, c.graphqlURL(), map[string]any{"query": query, "variables": vars})
		if err != nil {
			return nil, err
		}
		answer.Data, answer.Errors = nil, nil
		return g.Do(ctx, req, &answer)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if len(answer.Errors) > 0 {
		e := &GraphQLError{}
		for _, m := range answer.Errors {
			e.Messages = append(e.Messages, m.Message)
		}
		return fmt.Errorf("%s: %w", op, e)
	}
	if len(answer.Data) == 0 || string(answer.Data) == "null" {
		return fmt.Errorf("%s: answer has no data", op)
	}
	if err := json.Unmarshal(answer.Data, out); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// Thread is one review thread of a pull request.
type Thread struct {
	ID       string // the node id resolveReviewThread takes
	Resolved bool
	Outdated bool
	Path     string
	Line     int // the line now, 0 when GitHub lost it (outdated)
	Comments []ThreadComment
}

// ThreadComment is one comment of a thread, oldest first.
type ThreadComment struct {
	DatabaseID int64 // the REST id, to reply to
	Author     string
	// Bot: the author is a bot account (GraphQL's Bot type).
	Bot  bool
	Body string
}

const threadsQuery = `query($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: ` + threadsPerPage + `, after: $after) {
        pageInfo { hasNextPage endCursor }
        nodes {
          id isResolved isOutdated path line
          comments(first: ` + threadComments + `) { nodes { databaseId body author { __typename login } } }
        }
      }
    }
  }
}`

// ReviewThreads lists the pull request's review threads (at most
// maxThreadPages × threadsPerPage of them, threadComments comments each).
func (c *Client) ReviewThreads(ctx context.Context, r Repo, number int) ([]Thread, error) {
	var out []Thread
	var after any
	for range maxThreadPages {
		var data struct {
			Repository *struct {
				PullRequest *struct {
					ReviewThreads struct {
						PageInfo struct {
							HasNextPage bool   `json:"hasNextPage"`
							EndCursor   string `json:"endCursor"`
						} `json:"pageInfo"`
						Nodes []struct {
							ID         string `json:"id"`
							IsResolved bool   `json:"isResolved"`
							IsOutdated bool   `json:"isOutdated"`
							Path       string `json:"path"`
							Line       *int   `json:"line"`
							Comments   struct {
								Nodes []struct {
									DatabaseID int64  `json:"databaseId"`
									Body       string `json:"body"`
									Author     *struct {
										Type  string `json:"__typename"`
										Login string `json:"login"`
									} `json:"author"`
								} `json:"nodes"`
							} `json:"comments"`
						} `json:"nodes"`
					} `json:"reviewThreads"`
				} `json:"pullRequest"`
			} `json:"repository"`
		}
		err := c.graphql(ctx, r, "list review threads", threadsQuery,
			map[string]any{"owner": r.Owner, "name": r.Name, "number": number, "after": after}, &data)
		if err != nil {
			return nil, fmt.Errorf("%s#%d: %w", r, number, err)
		}
		if data.Repository == nil || data.Repository.PullRequest == nil {
			return nil, fmt.Errorf("%s#%d: list review threads: no such pull request", r, number)
		}
		rt := data.Repository.PullRequest.ReviewThreads
		for _, n := range rt.Nodes {
			t := Thread{ID: n.ID, Resolved: n.IsResolved, Outdated: n.IsOutdated, Path: n.Path}
			if n.Line != nil {
				t.Line = *n.Line
			}
			for _, cm := range n.Comments.Nodes {
				tc := ThreadComment{DatabaseID: cm.DatabaseID, Body: cm.Body}
				if cm.Author != nil { // a deleted account is null
					tc.Author, tc.Bot = cm.Author.Login, cm.Author.Type == "Bot"
				}
				t.Comments = append(t.Comments, tc)
			}
			out = append(out, t)
		}
		if !rt.PageInfo.HasNextPage || rt.PageInfo.EndCursor == "" {
			return out, nil
		}
		after = rt.PageInfo.EndCursor
	}
	c.log.Warn("review threads past the listing cap are not read", logkey.Repo, r.String(), logkey.PR, number, "pages", maxThreadPages)
	return out, nil
}

const resolveMutation = `mutation($threadId: ID!) {
  resolveReviewThread(input: {threadId: $threadId}) { thread { id isResolved } }
}`

// ResolveThread resolves a review thread. Resolving a resolved thread is
// not an error (GitHub answers it as done).
func (c *Client) ResolveThread(ctx context.Context, r Repo, threadID string) error {
	if threadID == "" {
		return fmt.Errorf("resolve review thread: %w: empty thread id", ErrInvalidInput)
	}
	var data struct {
		Resolve *struct {
			Thread *struct {
				ID         string `json:"id"`
				IsResolved bool   `json:"isResolved"`
			} `json:"thread"`
		} `json:"resolveReviewThread"`
	}
	if err := c.graphql(ctx, r, "resolve review thread", resolveMutation, map[string]any{"threadId": threadID}, &data); err != nil {
		return fmt.Errorf("%s: %w", r, err)
	}
	if data.Resolve == nil || data.Resolve.Thread == nil || !data.Resolve.Thread.IsResolved {
		return fmt.Errorf("%s: resolve review thread %s: the answer does not say it is resolved", r, threadID)
	}
	return nil
}

// IsBotLogin says whether login (REST's "name[bot]" or GraphQL's "name")
// is the App's bot account botLogin ("<slug>[bot]").
func IsBotLogin(login, botLogin string) bool {
	if botLogin == "" || login == "" {
		return false
	}
	return strings.EqualFold(login, botLogin) || strings.EqualFold(login+"[bot]", botLogin)
}
