package search

import "strconv"

// searchSettings are SearchConfig's settings (queries/search.sql) as
// name, value pairs.
func searchSettings(efSearch int, pinVectorPlan bool) []string {
	st := []string{
		"hnsw.ef_search", strconv.Itoa(efSearch),
		"hnsw.iterative_scan", "relaxed_order",
		"plan_cache_mode", "force_generic_plan",
		"jit", "off",
	}
	if pinVectorPlan {
		st = append(st, "enable_seqscan", "off", "enable_sort", "off", "enable_bitmapscan", "off")
	}
	return st
}
