module github.com/agentfleet/orchestrator/apps/worker

go 1.26.0

require github.com/agentfleet/orchestrator/db v0.0.0

require github.com/agentfleet/orchestrator/packages/tenancy v0.0.0

require github.com/agentfleet/orchestrator/packages/knowledge v0.0.0

require github.com/agentfleet/orchestrator/packages/testenv v0.0.0

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/hibiken/asynq v0.26.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/spf13/cast v1.10.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/time v0.14.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/agentfleet/orchestrator/db => ../../db

replace github.com/agentfleet/orchestrator/packages/tenancy => ../../packages/tenancy

replace github.com/agentfleet/orchestrator/packages/knowledge => ../../packages/knowledge

replace github.com/agentfleet/orchestrator/packages/testenv => ../../packages/testenv
