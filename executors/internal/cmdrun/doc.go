// Package cmdrun runs the marker shell through a local command that
// drives the remote compute (the self-host command, the crabbox CLI): the
// process-group runner with its whole-run and per-step deadlines, the
// observer that watches the output for markers, the rules that turn a
// stopped or broken command into step results, and the command's
// environment.
package cmdrun
