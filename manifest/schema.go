package manifest

// compiledSchema is a version's schema ready to default and validate specs.
type compiledSchema struct{}
