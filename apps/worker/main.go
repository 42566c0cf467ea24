// Command worker is filled in by its issue.
package main

func main() {}
