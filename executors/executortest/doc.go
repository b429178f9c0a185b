// Package executortest holds what every executor is tested with:
// Conformance, the lifecycle suite written on executors.Executor, and Fake,
// a scriptable executor for the tests of packages that run plans.
package executortest
