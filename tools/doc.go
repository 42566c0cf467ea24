// Package tools pins the developer tools of the workspace (sqlc, task,
// staticcheck) with go.mod tool directives, so `go tool sqlc`, `go tool task`
// and `go tool staticcheck` need nothing installed by hand. It has no code of
// its own.
package tools
