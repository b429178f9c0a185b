package github

import (
	"context"
	"encoding/json"
	"fmt"

	gh "github.com/google/go-github/v84/github"
)

// App is the GitHub App gilf authenticates as, as GET /app describes it.
type App struct {
	ID   int64
	Slug string
	Name string
	// Permissions are the App's permissions by name ("checks",
	// "pull_requests", …): "read", "write" or "admin".
	Permissions map[string]string
	// Events are the webhook events the App subscribes to.
	Events []string
}

// App fetches the authenticated App (GET /app with the App JWT): the
// call that proves the App id and private key belong together. A wrong
// key or id is GitHub's 401, returned as a *gh.ErrorResponse.
func (c *Client) App(ctx context.Context) (App, error) {
	var a *gh.App
	err := c.call(ctx, "get app", func(ctx context.Context) (*gh.Response, error) {
		var resp *gh.Response
		var err error
		a, resp, err = c.appClient.Apps.Get(ctx, "")
		return resp, err
	})
	if err != nil {
		return App{}, err
	}
	out := App{ID: a.GetID(), Slug: a.GetSlug(), Name: a.GetName(), Events: a.Events, Permissions: map[string]string{}}
	if a.Permissions != nil {
		// InstallationPermissions is a struct of optional strings named
		// by their JSON keys: its JSON is the map.
		b, err := json.Marshal(a.Permissions)
		if err != nil {
			return App{}, fmt.Errorf("get app: permissions: %w", err)
		}
		if err := json.Unmarshal(b, &out.Permissions); err != nil {
			return App{}, fmt.Errorf("get app: permissions: %w", err)
		}
	}
	return out, nil
}
