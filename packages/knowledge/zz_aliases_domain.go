package knowledge

import "github.com/agentfleet/orchestrator/packages/knowledge/domain"

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

type EmbeddingJob = domain.EmbeddingJob

const EmbeddingPending = domain.EmbeddingPending
const EmbeddingReady = domain.EmbeddingReady

type Enqueuer = domain.Enqueuer
type Entry = domain.Entry

var EstimateTokens = domain.EstimateTokens

type Filters = domain.Filters

var FitSearch = domain.FitSearch

type ForgetResult = domain.ForgetResult
type Hit = domain.Hit

const HopDecay = domain.HopDecay
const HopEdgesPerEntry = domain.HopEdgesPerEntry
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

var Modes = domain.Modes
var NormaliseTag = domain.NormaliseTag

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
