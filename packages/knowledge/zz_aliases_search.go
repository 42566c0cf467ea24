package knowledge

import "github.com/agentfleet/orchestrator/packages/knowledge/search"

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

var DefaultVectorCalibration = search.DefaultVectorCalibration
var LikePattern = search.LikePattern

type ListHit = search.ListHit
type Lists = search.Lists

const MaxCompletions = search.MaxCompletions
const MaxListDepth = search.MaxListDepth
const MaxListLimit = search.MaxListLimit
const MaxQueryTerms = search.MaxQueryTerms
const MinTermPostings = search.MinTermPostings
const PerTermPostings = search.PerTermPostings

type QueryIDF = search.QueryIDF

const QueryVectorCacheSize = search.QueryVectorCacheSize
const QueryVectorTTL = search.QueryVectorTTL
const RRFK = search.RRFK

var RRFScore = search.RRFScore

const ScoreStrong = search.ScoreStrong
const ScoreWeak = search.ScoreWeak
const TailEntries = search.TailEntries

type TermsOverBound = search.TermsOverBound

const TextVectorCacheSize = search.TextVectorCacheSize

type VectorCalibration = search.VectorCalibration
