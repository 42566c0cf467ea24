// Command mcp is filled in by its issue.
package main

func main() {}
