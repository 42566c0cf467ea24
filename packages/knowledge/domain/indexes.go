package domain

// VectorIndexState is one of an org's own HNSW indexes (of the org, or of
// one of its metadata pairs), as an operator
// sees it: in an org's search index status and in the report of its
// isolation on a Citus cluster.
type VectorIndexState struct {
	Name string `json:"name"`
	// Valid is false while the index is being built (CONCURRENTLY), or
	// after a build that failed, which Upkeep drops and builds again.
	Valid bool `json:"valid"`
	// Pair is the metadata pair of a pair's index (a one-pair JSON object,
	// {"team": "t3"}): Upkeep gives the pairs an org's searches filter by
	// an index of their own. Empty for the org's index.
	Pair string `json:"pair,omitempty"`
}

// DefaultTextSearchConfig is the text search configuration an org's
// lexical index is built with in a deployment that sets none.
const DefaultTextSearchConfig = "english"
