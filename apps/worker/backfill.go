package main

import "time"

// switchConfig is a model switch's part of the worker's environment
// (docs/embeddings.md, "Model switch"); the passes are jobs' (switch.go).
type switchConfig struct {
	rate     float64       // EMBEDDINGS_BACKFILL_RATE: entries a second, all workers together
	interval time.Duration // WORKER_BACKFILL_INTERVAL: how often a worker offers a pass
}
