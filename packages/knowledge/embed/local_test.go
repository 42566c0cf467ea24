package embed

import (
	"context"
	"math"
	"testing"
)

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

func TestLocalIsDeterministicUnitAndLexical(t *testing.T) {
	t.Parallel()
	l := NewLocal()
	vs, err := l.Embed(context.Background(), []string{
		"postgres connection pool exhausted",
		"Postgres connection pool exhausted!",
		"the connection pool of postgres was exhausted",
		"banana smoothie recipe",
		"",
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs {
		if len(v) != Dimensions {
			t.Fatalf("vector %d has %d dims", i, len(v))
		}
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		if math.Abs(n-1) > 1e-5 {
			t.Fatalf("vector %d has norm^2 %f", i, n)
		}
	}
	if c := cosine(vs[0], vs[1]); c < 0.999 {
		t.Fatalf("case and punctuation changed the vector: cos %f", c)
	}
	related, unrelated := cosine(vs[0], vs[2]), cosine(vs[0], vs[3])
	if related <= unrelated+0.3 {
		t.Fatalf("related %f should clearly beat unrelated %f", related, unrelated)
	}
	again, _ := l.Embed(context.Background(), []string{"postgres connection pool exhausted"})
	for i := range again[0] {
		if again[0][i] != vs[0][i] {
			t.Fatal("not deterministic")
		}
	}
}
