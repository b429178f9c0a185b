package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gilf-review/gilf/review"
)

// maxRunsPerHour bounds GILF_COMMAND_RUNS_PER_HOUR.
const maxRunsPerHour = 1000

// slugRe is a GitHub App slug: lower-case letters, digits and dashes.
var slugRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// CommandsConfig is the commands in pull-request comments (issue 33).
type CommandsConfig struct {
	// Enabled is GILF_COMMANDS (default on; "0" turns it off): intake
	// queues comments addressed to gilf and a worker answers them.
	Enabled bool
	// Slug is GILF_GITHUB_APP_SLUG, the App's slug: "@<slug> <command>"
	// is accepted besides "/gilf <command>" (empty: the slash form only).
	Slug string
	// RunsPerHour is GILF_COMMAND_RUNS_PER_HOUR (default
	// review.DefaultRunsPerHour): a rerun or review command is refused
	// once the pull request had this many runs in the last hour.
	RunsPerHour int
}

func loadCommands(getenv func(string) string, errs []error) (CommandsConfig, []error) {
	c := CommandsConfig{Enabled: true, RunsPerHour: review.DefaultRunsPerHour}
	switch v := strings.TrimSpace(getenv("GILF_COMMANDS")); v {
	case "", "1":
	case "0":
		c.Enabled = false
	default:
		errs = append(errs, fmt.Errorf("GILF_COMMANDS=%q: want 0 or 1", v))
	}
	if v := strings.TrimSpace(getenv("GILF_GITHUB_APP_SLUG")); v != "" {
		if !slugRe.MatchString(v) {
			errs = append(errs, fmt.Errorf("GILF_GITHUB_APP_SLUG=%q: want the App's slug (lower-case letters, digits, dashes), without @ or [bot]", v))
		} else {
			c.Slug = v
		}
	}
	if v := strings.TrimSpace(getenv("GILF_COMMAND_RUNS_PER_HOUR")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxRunsPerHour {
			errs = append(errs, fmt.Errorf("GILF_COMMAND_RUNS_PER_HOUR=%q: want a whole number from 1 to %d", v, maxRunsPerHour))
		} else {
			c.RunsPerHour = n
		}
	}
	return c, errs
}

// botLogin is the App's bot account for its slug, "" when not configured.
func botLogin(slug string) string {
	if slug == "" {
		return ""
	}
	return slug + "[bot]"
}
