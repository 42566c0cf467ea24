package vecspace

import "testing"

// TestBuildMemory: an HNSW build gets the memory its graph needs, within
// the floor, the server's own setting and the deployment's ceiling, and
// says when the ceiling leaves the graph without room.
func TestBuildMemory(t *testing.T) {
	const mb, gb = int64(1) << 20, int64(1) << 30
	v768 := Space{Model: "m", Dims: 768}
	// The estimate against pgvector 0.8.0 itself: with 1 GB a build of 768
	// dimensions had written its graph out before its 300,000th element
	// (its progress on the 1M-row benchmark fell to a sixth), and pgvector's
	// own accounting (hnswbuild.c) puts 3,700-3,800 bytes in an element.
	if g := GraphBytes(v768, 280_000); g < gb*95/100 || g > gb*105/100 {
		t.Errorf("GraphBytes(768 dims, 280,000) = %d MB, want about 1,024 MB", g/mb)
	}
	if g := GraphBytes(v768, 300_000); g < gb {
		t.Errorf("GraphBytes(768 dims, 300,000) = %d MB: says 1 GB held them, and it did not", g/mb)
	}
	// halfvec past 2,000 dimensions: two bytes a dimension.
	if a, b := GraphBytes(Space{Dims: 3072}, 1000), GraphBytes(Space{Dims: 1536}, 1000); a != b {
		t.Errorf("3,072 dimensions as halfvec take %d bytes, 1,536 as vector %d: want the same", a, b)
	}
	for _, c := range []struct {
		name               string
		n, server, ceiling int64
		wantMin, wantMax   int64
		wantCapped         bool
	}{
		{"small: the floor", 1000, 64 * mb, 4 * gb, 64 * mb, 64 * mb, false},
		{"1M entries of 768 dims fit 4 GB (the default ceiling)", 1_000_000, 64 * mb, 4 * gb, 4 * gb * 9 / 10, 4 * gb, false},
		{"100k org", 100_000, 64 * mb, 4 * gb, 380 * mb, 450 * mb, false},
		{"the server gives more", 1000, 8 * gb, 4 * gb, 8 * gb, 8 * gb, false},
		{"over the ceiling", 1_000_000, 64 * mb, 1 * gb, 1 * gb, 1 * gb, true},
		{"over the ceiling, the server gives enough", 1_000_000, 6 * gb, 1 * gb, 6 * gb, 6 * gb, false},
	} {
		mem, capped := BuildMemory(v768, c.n, c.server, c.ceiling)
		if mem < c.wantMin || mem > c.wantMax || capped != c.wantCapped {
			t.Errorf("%s: %d MB (capped %v), want %d-%d MB (capped %v)", c.name, mem/mb, capped, c.wantMin/mb, c.wantMax/mb, c.wantCapped)
		}
	}
}
