// Package rediskit reads REDIS_URL (one Redis or a Redis Cluster) into the
// clients the apps and asynq need, and scans keys on every master of a
// cluster. The apps reach it through the knowledge facade's re-exports.
package rediskit
