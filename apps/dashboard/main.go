// Command dashboard is filled in by its issue.
package main

func main() {}
