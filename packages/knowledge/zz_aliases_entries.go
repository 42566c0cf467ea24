package knowledge

import "github.com/agentfleet/orchestrator/packages/knowledge/entries"

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
