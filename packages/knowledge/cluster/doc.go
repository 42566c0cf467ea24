// Package cluster holds the operations that exist only because the
// database may be a Citus cluster: giving a big org a shard of its own
// (IsolateOrg, `ctl isolate-org`), reading and keeping up the tables' parts
// (each shard on its worker, UpkeepParts and UpkeepRun) and indexing an
// org's queued entries on its worker (IndexOrg).
//
// It is the one package besides internal/data that asks whether the
// database is a Citus coordinator (data.DB.Citus): the capabilities above
// (maintenance) ask it for what they need and never test which database
// they are on. It sits just above internal/data and domain and below every
// capability, and imports none of them: what a caller decides with (the
// tables to keep up, the indexer's statement and its parameters) comes in
// as arguments.
package cluster
