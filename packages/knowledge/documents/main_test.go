package documents_test

import (
	"testing"

	"github.com/agentfleet/orchestrator/packages/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
