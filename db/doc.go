// Package db embeds the goose SQL migrations of db/migrations, the one source
// of truth for the schema (sqlc reads the same files), and opens pgx pools
// that know pgvector's types. Apps migrate with Migrate; tests get migrated
// databases from packages/testenv.
package db
