module github.com/agentfleet/orchestrator/packages/errs

go 1.26.0
