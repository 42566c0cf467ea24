// Command ctl is filled in by its issue.
package main

func main() {}
