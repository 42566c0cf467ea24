// Package search answers the reads of an org's entries: the hybrid search
// (search_knowledge: three ranked lists fused by evidence-weighted RRF,
// the hops over relations, snippets and the token budget), the ranking's
// lists for evaluations (SearchLists), the listing (list_knowledge), the
// completions of ids and tags, the lexical index's reach (SharesAWord,
// CountTermsOverBound), the document references of hits, the vector
// neighbours the duplicate check of a store compares with, and the warm-up
// of a new connection's search statements (WarmConn).
//
// It owns the ranking statements (sql/search_candidates.sql,
// sql/search_vector.sql; queries/search.sql for the rest) and the caches
// of a Searcher: the query vectors (queryvec.go, in this process and in
// Redis), the table's size for the vector plan, the vector statement of
// the embedder's space, the listing's cursor key, the filters found common
// lately, and which model serves each org during a model switch
// (modelserve.go: the next model's Searcher). It writes nothing.
//
// It sits above domain, internal/data and the relations catalogue (hops
// follow relations) and below the facade (package knowledge) and the
// capabilities that write entries, whose duplicate check ranks with it
// (VectorNeighbours, EmbedNewText, NewTextVectorAtHand, ServedBy). Every method's ctx carries
// the caller's org: the facade sets it once (data.AsOrg).
package search
