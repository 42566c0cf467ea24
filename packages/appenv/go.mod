module github.com/agentfleet/orchestrator/packages/appenv

go 1.26.0
