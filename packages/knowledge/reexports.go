package knowledge

// The facade's re-exports: the types, limits and helpers of the capability
// packages that the apps, the worker's jobs and the facade's callers use,
// under the names they have always had (knowledge.Entry,
// knowledge.MaxBodyChars, knowledge.Outbox...). A type alias is the same
// type, so a value crosses the facade unconverted. Add a name here when an
// app needs it; the capability keeps owning it.

import (
	"github.com/agentfleet/orchestrator/packages/knowledge/cluster"
	"github.com/agentfleet/orchestrator/packages/knowledge/documents"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/entries"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/idem"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/rediskit"
	"github.com/agentfleet/orchestrator/packages/knowledge/maintenance"
	"github.com/agentfleet/orchestrator/packages/knowledge/outbox"
	"github.com/agentfleet/orchestrator/packages/knowledge/search"
)

// From package documents.

// What the apps and tests read of package documents, re-exported: the
// limits and words of documents and uploads in parts.

const DefaultDocumentKind = documents.DefaultDocumentKind
const DefaultMaxStagedBytes = documents.DefaultMaxStagedBytes
const FormatHTML = documents.FormatHTML
const FormatMarkdown = documents.FormatMarkdown
const FormatText = documents.FormatText
const MaxDocumentBytes = documents.MaxDocumentBytes
const MaxDocumentSections = documents.MaxDocumentSections
const MaxSectionChars = documents.MaxSectionChars
const MaxStagedUploads = documents.MaxStagedUploads
const MaxUploadBytes = documents.MaxUploadBytes
const MaxUploadPartBytes = documents.MaxUploadPartBytes
const SectionChanged = documents.SectionChanged
const SectionKept = documents.SectionKept
const SectionNew = documents.SectionNew
const UploadTTL = documents.UploadTTL

// From package domain.

const BytesPerToken = domain.BytesPerToken

type Caller = domain.Caller
type CorrectResult = domain.CorrectResult

const DefaultConf = domain.DefaultConf
const DefaultEfSearch = domain.DefaultEfSearch
const DefaultKind = domain.DefaultKind
const DefaultLimit = domain.DefaultLimit
const DefaultRelationsLimit = domain.DefaultRelationsLimit
const DirBoth = domain.DirBoth
const DirIn = domain.DirIn
const DirOut = domain.DirOut

type DocumentInput = domain.DocumentInput
type DocumentResult = domain.DocumentResult

const EmbeddingFailed = domain.EmbeddingFailed

type ErasureNeedle = domain.ErasureNeedle
type ErasureReport = domain.ErasureReport
type ErasureReportInput = domain.ErasureReportInput
type ErasureTrace = domain.ErasureTrace

const DefaultErasureReportTimeout = domain.DefaultErasureReportTimeout
const MaxErasureReportTimeout = domain.MaxErasureReportTimeout
const MaxErasureRows = domain.MaxErasureRows
const MaxErasureTextChars = domain.MaxErasureTextChars
const MinErasureTextChars = domain.MinErasureTextChars

type EmbeddingJob = domain.EmbeddingJob

const EmbeddingPending = domain.EmbeddingPending
const EmbeddingReady = domain.EmbeddingReady

type Enqueuer = domain.Enqueuer
type Entry = domain.Entry
type EntrySimilar = domain.EntrySimilar

var EstimateTokens = domain.EstimateTokens

type Filters = domain.Filters

var FitSearch = domain.FitSearch

type ForgetResult = domain.ForgetResult
type Hit = domain.Hit

const HopDecay = domain.HopDecay
const HopEdgesPerEntry = domain.HopEdgesPerEntry
const IfSimilarReport = domain.IfSimilarReport
const IfSimilarSkip = domain.IfSimilarSkip
const IfSimilarStore = domain.IfSimilarStore
const KindEpisodic = domain.KindEpisodic
const KindProcedural = domain.KindProcedural
const KindReference = domain.KindReference
const KindSemantic = domain.KindSemantic

var Kinds = domain.Kinds

type LinkInput = domain.LinkInput
type LinkKind = domain.LinkKind

const LinkProduced = domain.LinkProduced
const LinkReferences = domain.LinkReferences

type ListInput = domain.ListInput
type ListResult = domain.ListResult

const MaxBodyChars = domain.MaxBodyChars
const MaxConfidence = domain.MaxConfidence
const MaxEfSearch = domain.MaxEfSearch
const MaxForgetReason = domain.MaxForgetReason
const MaxHops = domain.MaxHops
const MaxLimit = domain.MaxLimit
const MaxMaxTokens = domain.MaxMaxTokens
const MaxMetadataBytes = domain.MaxMetadataBytes
const MaxMetadataKeyChars = domain.MaxMetadataKeyChars
const MaxMetadataKeys = domain.MaxMetadataKeys
const MaxQueryChars = domain.MaxQueryChars
const MaxRelationNote = domain.MaxRelationNote
const MaxRelationTypeChars = domain.MaxRelationTypeChars
const MaxRelationTypes = domain.MaxRelationTypes
const MaxRelationsLimit = domain.MaxRelationsLimit
const MaxRelationsPerEntry = domain.MaxRelationsPerEntry
const MaxSourceChars = domain.MaxSourceChars
const MaxTagChars = domain.MaxTagChars
const MaxTags = domain.MaxTags
const MaxTitleChars = domain.MaxTitleChars
const MetadataKeyPattern = domain.MetadataKeyPattern
const MinConfidence = domain.MinConfidence
const MinMaxTokens = domain.MinMaxTokens
const MinRelationTypeChars = domain.MinRelationTypeChars
const ModeHybrid = domain.ModeHybrid
const ModeLexical = domain.ModeLexical
const ModeSemantic = domain.ModeSemantic
const RerankBreakerOpen = domain.RerankBreakerOpen
const RerankError = domain.RerankError
const RerankNoHits = domain.RerankNoHits
const RerankNotConfigured = domain.RerankNotConfigured
const RerankNotRequested = domain.RerankNotRequested
const RerankTimeout = domain.RerankTimeout

var Modes = domain.Modes
var NormaliseTag = domain.NormaliseTag
var NormaliseRelationType = domain.NormaliseRelationType

const OriginAgent = domain.OriginAgent
const OriginOperator = domain.OriginOperator

type PurgeOptions = domain.PurgeOptions
type PurgeReport = domain.PurgeReport
type PurgeScope = domain.PurgeScope
type Relation = domain.Relation
type RelationChange = domain.RelationChange

const RelationSummaryFirst = domain.RelationSummaryFirst

var RelationTypePattern = domain.RelationTypePattern

type RelationsInput = domain.RelationsInput
type RelationsResult = domain.RelationsResult
type SearchInput = domain.SearchInput
type SearchResult = domain.SearchResult
type Similar = domain.Similar
type SimilarCheckJob = domain.SimilarCheckJob

const SimilarDone = domain.SimilarDone
const SimilarPending = domain.SimilarPending

const SnippetChars = domain.SnippetChars
const StateExpired = domain.StateExpired
const StateForgotten = domain.StateForgotten
const StateHead = domain.StateHead
const StateSuperseded = domain.StateSuperseded

type StoreInput = domain.StoreInput
type StoreResult = domain.StoreResult
type SupersedeResult = domain.SupersedeResult
type TaskEntry = domain.TaskEntry
type TaskLink = domain.TaskLink
type TaskRef = domain.TaskRef
type Tombstone = domain.Tombstone
type UploadAppendInput = domain.UploadAppendInput
type UploadAppendResult = domain.UploadAppendResult
type UploadFinishInput = domain.UploadFinishInput
type UploadStartInput = domain.UploadStartInput
type UploadStartResult = domain.UploadStartResult

// From package entries.

// What the apps and tests read of package entries, re-exported.

var InReplacement = entries.InReplacement

const MaxSimilar = entries.MaxSimilar

var MeaningScore = entries.MeaningScore

const ReplayWindow = entries.ReplayWindow
const SimilarCheckMeaning = entries.SimilarCheckMeaning
const SimilarCheckNone = entries.SimilarCheckNone
const SimilarCheckWords = entries.SimilarCheckWords
const SimilarCheckWordsMeaning = entries.SimilarCheckWordsMeaning

var SimilarScore = entries.SimilarScore

const SimilarThreshold = entries.SimilarThreshold
const SkipThreshold = entries.SkipThreshold

// From package idem.

var IdempotenceKey = idem.Key

// From package maintenance.

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

// From package outbox.

// The embeddings pipeline's view of the tables and how it cuts and embeds
// bodies (package outbox), re-exported for the apps and package jobs.
type (
	Outbox            = outbox.Outbox
	PendingEntry      = outbox.PendingEntry
	VectorsWritten    = outbox.VectorsWritten
	Backlog           = outbox.Backlog
	ChunkOptions      = outbox.ChunkOptions
	ChunkOverlapError = outbox.ChunkOverlapError
	Span              = outbox.Span
	EntryText         = outbox.EntryText
	EntryVectors      = outbox.EntryVectors
)

// Limits and defaults of the cut (package outbox).
const (
	MaxEmbeddingErrorChars = outbox.MaxEmbeddingErrorChars
	DefaultChunkChars      = outbox.DefaultChunkChars
	DefaultMaxInputChars   = outbox.DefaultMaxInputChars
	MinChunkChars          = outbox.MinChunkChars
	MaxChunkChars          = outbox.MaxChunkChars
	MaxChunks              = outbox.MaxChunks
)

// The outbox's constructor and the cut (package outbox).
var (
	NewOutbox       = outbox.NewOutbox
	ChunkOptionsFor = outbox.ChunkOptionsFor
	ChunkSettings   = outbox.ChunkSettings
	ChunkText       = outbox.ChunkText
	Chunks          = outbox.Chunks
	EmbedEntries    = outbox.EmbedEntries
)

// From package rediskit.

var ParseRedisURL = rediskit.ParseRedisURL

type RedisConfig = rediskit.RedisConfig

// From package search.

// What the apps and tests read of package search, re-exported.

const BM25B = search.BM25B
const BM25K1 = search.BM25K1

var CalibrationFor = search.CalibrationFor

type Candidate = search.Candidate

const CompleteAgent = search.CompleteAgent
const CompleteEntry = search.CompleteEntry
const CompleteTag = search.CompleteTag
const CompleteTask = search.CompleteTask
const DefaultListLimit = search.DefaultListLimit
const DefaultMinScore = search.DefaultMinScore
const DefaultQueryEmbedBudget = search.DefaultQueryEmbedBudget
const DefaultRerankBudget = search.DefaultRerankBudget

var DefaultRerankCalibration = search.DefaultRerankCalibration

const DefaultRerankTopN = search.DefaultRerankTopN

var DefaultVectorCalibration = search.DefaultVectorCalibration
var LikePattern = search.LikePattern

type ListHit = search.ListHit
type Lists = search.Lists

const MaxCompletions = search.MaxCompletions
const MaxListDepth = search.MaxListDepth
const MaxListLimit = search.MaxListLimit
const MaxQueryTerms = search.MaxQueryTerms
const MaxRerankTopN = search.MaxRerankTopN
const MinTermPostings = search.MinTermPostings
const PerTermPostings = search.PerTermPostings

type QueryIDF = search.QueryIDF

const QueryVectorCacheSize = search.QueryVectorCacheSize
const QueryVectorTTL = search.QueryVectorTTL
const RRFK = search.RRFK
const RerankPassageChars = search.RerankPassageChars

type RerankCalibration = search.RerankCalibration

var RerankCalibrationFor = search.RerankCalibrationFor

var RRFScore = search.RRFScore

const ScoreStrong = search.ScoreStrong
const ScoreWeak = search.ScoreWeak
const TailEntries = search.TailEntries

type TermsOverBound = search.TermsOverBound

const TextVectorCacheSize = search.TextVectorCacheSize

type VectorCalibration = search.VectorCalibration
