package knowledge

import (
	"github.com/agentfleet/orchestrator/packages/knowledge/cluster"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/maintenance"
)

type AgentCount = maintenance.AgentCount
type BackfillOptions = maintenance.BackfillOptions
type BackfillReport = maintenance.BackfillReport

var CheckModelSwitch = maintenance.CheckModelSwitch
var CheckTextSearchConfig = maintenance.CheckTextSearchConfig

const DefaultVectorIndexMemory = maintenance.DefaultVectorIndexMemory
const IndexBatchSize = maintenance.IndexBatchSize
const IndexVacuumEvery = maintenance.IndexVacuumEvery

const IsolateAuto = cluster.IsolateAuto
const IsolateBlockWrites = cluster.IsolateBlockWrites
const IsolateForceLogical = cluster.IsolateForceLogical

type IsolateReport = cluster.IsolateReport
type OrgStats = maintenance.OrgStats

const OrgVectorIndexMaxShare = maintenance.OrgVectorIndexMaxShare
const OrgVectorIndexMinDocs = maintenance.OrgVectorIndexMinDocs

type SearchIndexStatus = maintenance.SearchIndexStatus
type SwitchCoverage = maintenance.SwitchCoverage
type TagCount = maintenance.TagCount

const UpkeepBaseRows = maintenance.UpkeepBaseRows

type UpkeepReport = maintenance.UpkeepReport

const UpkeepScale = maintenance.UpkeepScale

type VectorIndexState = domain.VectorIndexState
