// Package tools pins the developer tools of the workspace (sqlc, task) with
// go.mod tool directives, so `go tool sqlc` and `go tool task` need nothing
// installed by hand. It has no code of its own.
package tools
