// Command stub stands in for the agent binary of the architecture the
// tests cannot run: the image of that architecture is checked, not run.
package main

func main() {}
