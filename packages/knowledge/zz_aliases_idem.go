package knowledge

import "github.com/agentfleet/orchestrator/packages/knowledge/internal/idem"

var IdempotenceKey = idem.Key
