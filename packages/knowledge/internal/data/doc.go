// Package data is the knowledge module's one way to the data, as river's
// driver executor and asynq's rdb are theirs: the capabilities reach the
// generated SQL (internal/sqlc) through a *DB, and nothing else in the
// module sets the org for row-level security or chooses the route of a
// statement.
//
//   - The org: AsOrg puts it in the context; every statement a DB sends for
//     that context runs as it (db.Scoped sets app.org_id in the statement's
//     own transaction). The facade's entry points call AsOrg once with the
//     caller's org; the maintenance passes that act for one org after
//     another call it per org.
//   - The route: on a single PostgreSQL every statement goes to the one
//     server; on a Citus cluster a read of one org can run on the org's
//     worker (Reads, OnWorker: knowledge_run_org, migration 00033), and a
//     write that locks rows must not span shards (Runs groups work by org).
//     The capabilities ask for what they need and never test which database
//     they are on; the Citus-only operations live in package cluster.
package data
