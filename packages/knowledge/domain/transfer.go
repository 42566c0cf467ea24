package domain

// The settings and reports of an org's export and import (ctl export,
// ctl import; package transfer).

// ExportOptions are the optional settings of Export.
type ExportOptions struct {
	Vectors  bool          // include the vectors of ready entries
	Progress func(n int64) // called with the entries written so far, every page
	PageSize int           // rows per read; default 1000
	_        struct{}      // keyed fields only
}

// ExportReport counts what an export wrote.
type ExportReport struct {
	Agents        int64 `json:"agents"`
	Tasks         int64 `json:"tasks"`
	Entries       int64 `json:"entries"`
	Vectors       int64 `json:"vectors"`
	Supersessions int64 `json:"supersessions"`
	TaskLinks     int64 `json:"taskLinks"`
	RelationTypes int64 `json:"relationTypes"`
	Relations     int64 `json:"relations"`
	Documents     int64 `json:"documents"`
	Sections      int64 `json:"sections"`
}

// ImportOptions are the optional settings of Import.
type ImportOptions struct {
	IgnoreQuota bool          // count the entries against the quota but do not stop at its limit
	Progress    func(n int64) // entries read so far, every batch
}

// ImportReport counts what an import added and what it skipped, and why.
type ImportReport struct {
	Agents        int64            `json:"agents"`
	Tasks         int64            `json:"tasks"`
	Entries       int64            `json:"entries"`
	Vectors       int64            `json:"vectors"`
	Chains        int64            `json:"chains"` // entries given their supersession columns
	Supersessions int64            `json:"supersessions"`
	TaskLinks     int64            `json:"taskLinks"`
	RelationTypes int64            `json:"relationTypes"`
	Relations     int64            `json:"relations"`
	Documents     int64            `json:"documents"`
	Sections      int64            `json:"sections"`
	Skipped       map[string]int64 `json:"skipped"` // reason -> count
}
