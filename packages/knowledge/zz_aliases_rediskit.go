package knowledge

import "github.com/agentfleet/orchestrator/packages/knowledge/internal/rediskit"

var ParseRedisURL = rediskit.ParseRedisURL

type RedisConfig = rediskit.RedisConfig
