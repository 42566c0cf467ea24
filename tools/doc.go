// Package tools pins the developer tools of the workspace (sqlc, task,
// staticcheck) with go.mod tool directives, so `go tool sqlc`, `go tool task`
// and `go tool staticcheck` need nothing installed by hand. Its one command,
// mcpload, is the Go load of the cluster smoke's end-to-end run.
package tools
