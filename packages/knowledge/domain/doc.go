// Package domain holds what every capability of the knowledge module shares
// and none owns: the types of its calls and answers (Caller, Entry, Hit,
// the inputs and results of every tool), the SPEC's limits, and the
// validation that turns an input into checked arguments (ValidateStore,
// ValidateSearch, CheckCaller, ...). It imports no driver and no
// capability, so every capability can import it; the facade re-exports its
// types under their old names (knowledge.Entry is domain.Entry).
package domain
