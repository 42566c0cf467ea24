// Package simkeys computes what the duplicate check knows of an entry's
// words: its word set (the Jaccard measure, CJK text cut into bigrams) and
// sixteen MinHash band keys salted with the org (the similar_keys column and
// its GIN look-up, migration 00009). A store, a correction, a document
// section, an import and the upkeep's backfill all make keys the same way,
// so the computation sits below all of them.
package simkeys
