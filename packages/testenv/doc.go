// Package testenv gives tests real, isolated servers: each call to Postgres
// returns a pool on a fresh database cloned from a migrated template, and
// each call to Redis leases a whole Redis logical database. Both are safe
// under t.Parallel() and across test binaries running at the same time, and
// both are cleaned up when the test ends. A package using them runs its
// tests through Main (its TestMain), which runs more tests at once than Go's
// default and drops the test databases in the background.
//
// TEST_DATABASE_URL and TEST_REDIS_URL choose the servers (loopback defaults).
package testenv
