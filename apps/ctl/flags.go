package main

import (
	"github.com/google/uuid"
)

// uuidFlag parses a required uuid flag value, naming the flag on error.
func uuidFlag(name, v string) (uuid.UUID, error) {
	if v == "" {
		return uuid.Nil, usagef("--%s is required", name)
	}
	id, err := uuid.Parse(v)
	if err != nil {
		return uuid.Nil, usagef("--%s: %q is not a uuid", name, v)
	}
	return id, nil
}

func required(name, v string) error {
	if v == "" {
		return usagef("--%s is required", name)
	}
	return nil
}
