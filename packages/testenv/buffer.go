package testenv

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use: what a test hands a
// logger or an app's output, which goroutines write while the test reads.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
