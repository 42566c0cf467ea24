package domain

// VectorIndexState is one of an org's own HNSW indexes, as an operator
// sees it: in an org's search index status and in the report of its
// isolation on a Citus cluster.
type VectorIndexState struct {
	Name string `json:"name"`
	// Valid is false while the index is being built (CONCURRENTLY), or
	// after a build that failed, which Upkeep drops and builds again.
	Valid bool `json:"valid"`
}

// DefaultTextSearchConfig is the text search configuration an org's
// lexical index is built with in a deployment that sets none.
const DefaultTextSearchConfig = "english"
