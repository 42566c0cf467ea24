module github.com/agentfleet/orchestrator/apps/dashboard

go 1.26.0


