// Package remote holds what the executors that drive a remote sandbox
// share: the step loop that runs one marker shell per step through a
// provider (StepRunner), packing the repository archive, reading the
// platform a setup script prints, bounded HTTP calls and error bodies,
// and the checks on their options. Edge executors do not import each
// other; they import this.
package remote
