module github.com/agentfleet/orchestrator/apps/mcp

go 1.26.0

require github.com/agentfleet/orchestrator/db v0.0.0
require github.com/agentfleet/orchestrator/packages/tenancy v0.0.0
require github.com/agentfleet/orchestrator/packages/knowledge v0.0.0
require github.com/agentfleet/orchestrator/packages/testenv v0.0.0

replace github.com/agentfleet/orchestrator/db => ../../db
replace github.com/agentfleet/orchestrator/packages/tenancy => ../../packages/tenancy
replace github.com/agentfleet/orchestrator/packages/knowledge => ../../packages/knowledge
replace github.com/agentfleet/orchestrator/packages/testenv => ../../packages/testenv
