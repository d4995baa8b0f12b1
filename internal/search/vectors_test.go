package search

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomUnit is a random unit vector (Gaussian direction).
func randomUnit(rng *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	var s float64
	for i := range v {
		x := rng.NormFloat64()
		v[i] = float32(x)
		s += x * x
	}
	inv := 1 / math.Sqrt(s)
	for i := range v {
		v[i] = float32(float64(v[i]) * inv)
	}
	return v
}

// clustered makes n vectors around a few centres (many near ties, like products made from a
// few templates), with exact duplicates among them.
func clustered(rng *rand.Rand, n, dims, centres int, spread float64) [][]float32 {
	cs := make([][]float32, centres)
	for i := range cs {
		cs[i] = randomUnit(rng, dims)
	}
	out := make([][]float32, n)
	for i := range out {
		c := cs[rng.IntN(centres)]
		if rng.IntN(5) == 0 {
			out[i] = slices.Clone(c) // exact duplicates: ties broken by id
			continue
		}
		v := make([]float32, dims)
		for j := range v {
			v[j] = c[j] + float32(rng.NormFloat64()*spread)
		}
		out[i] = v
	}
	return out
}

func fill(dims int, vecs [][]float32, firstID int64) *vectors {
	v := newVectors(dims, len(vecs))
	for i, x := range vecs {
		v.upsert(firstID+int64(i), x)
	}
	return v
}

// TestTopKEqualsPlainScan is the differential test: the index's scan (quantised prefilter, all
// goroutines) returns exactly what the plain single-threaded float32 scan returns, for random and
// clustered data, vector sizes with and without padding and beyond the quantised range, several
// k, with and without a filter, after updates and removals.
func TestTopKEqualsPlainScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	type shape struct {
		name string
		dims int
		vecs [][]float32
	}
	var shapes []shape
	for _, dims := range []int{384, 100, 1536, 9000} {
		n := 10_000
		if dims > 1000 {
			n = 3000
		}
		rnd := make([][]float32, n)
		for i := range rnd {
			rnd[i] = randomUnit(rng, dims)
		}
		shapes = append(shapes, shape{fmt.Sprintf("random/%d", dims), dims, rnd})
		shapes = append(shapes, shape{fmt.Sprintf("clustered/%d", dims), dims, clustered(rng, n, dims, 30, 0.01)})
	}
	shapes = append(shapes, shape{"tiny/384", 384, clustered(rng, 7, 384, 2, 0.001)})
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			v := fill(sh.dims, sh.vecs, 1000)
			check := func(t *testing.T, label string) {
				t.Helper()
				for qi := range 9 {
					var qv []float32
					switch qi % 3 {
					case 0:
						qv = randomUnit(rng, sh.dims)
					case 1: // right on a stored vector: its duplicates tie at the top
						qv = slices.Clone(sh.vecs[rng.IntN(len(sh.vecs))])
					default: // a stored vector, perturbed and not of unit length
						src := sh.vecs[rng.IntN(len(sh.vecs))]
						qv = make([]float32, sh.dims)
						for j := range qv {
							qv[j] = 3 * (src[j] + float32(rng.NormFloat64()*0.02))
						}
					}
					q, ok := v.prepare(qv)
					if !ok {
						t.Fatal("prepare refused a good query")
					}
					even := func(id int64) bool { return id%2 == 0 }
					for _, k := range []int{1, 5, 20, 100, v.Len() + 3} {
						for _, allow := range []func(int64) bool{nil, even} {
							want := v.scanExact(&q, k, allow)
							for _, parts := range []int{1, 2, 3} {
								got := v.topK(&q, k, allow, parts)
								if !slices.Equal(got, want) {
									t.Fatalf("%s query %d k=%d filtered=%v parts=%d:\n got %v\nwant %v", label, qi, k, allow != nil, parts, head(got), head(want))
								}
							}
							if len(want) != min(k, countAllowed(v, allow)) {
								t.Fatalf("%s: %d matches for k=%d", label, len(want), k)
							}
						}
					}
				}
			}
			check(t, "loaded")
			// Updates, removals and re-additions move vectors between slots (in the mapped file:
			// cur is what each product's float32 values must be, kept on the heap by the test).
			cur := map[int64][]float32{}
			for i, x := range sh.vecs {
				cur[1000+int64(i)] = x
			}
			for i := 0; i < len(sh.vecs); i += 3 {
				v.remove(1000 + int64(i))
				delete(cur, 1000+int64(i))
			}
			for i := 1; i < len(sh.vecs); i += 7 {
				x := randomUnit(rng, sh.dims)
				v.upsert(1000+int64(i), x)
				cur[1000+int64(i)] = x
			}
			for i := 0; i < len(sh.vecs); i += 6 {
				v.upsert(1000+int64(i), sh.vecs[i])
				cur[1000+int64(i)] = sh.vecs[i]
			}
			v.remove(-5) // not held
			if len(v.pos) != v.Len() || v.Len() != len(cur) {
				t.Fatalf("pos has %d entries for %d vectors, want %d", len(v.pos), v.Len(), len(cur))
			}
			for id, x := range cur {
				want := make([]float32, v.f32Stride)
				copy(want, x)
				normalize(want[:sh.dims])
				i := int(v.pos[id])
				if got := v.f32[i*v.f32Stride : (i+1)*v.f32Stride]; !slices.Equal(got, want) {
					t.Fatalf("product %d: the file holds %v..., want %v...", id, got[:4], want[:4])
				}
			}
			check(t, "changed")
		})
	}
}

func countAllowed(v *vectors, allow func(int64) bool) int {
	if allow == nil {
		return v.Len()
	}
	n := 0
	for _, id := range v.ids {
		if allow(id) {
			n++
		}
	}
	return n
}

func head(ms []Match) []Match { return ms[:min(len(ms), 8)] }

// TestQuantizeBound: the bound topK relies on holds for every vector: the float32 score is
// within the estimate's bound.
func TestQuantizeBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dims := range []int{3, 384, 1536, 8192} {
		vecs := clustered(rng, 500, dims, 5, 0.05)
		vecs = append(vecs, make([]float32, dims)) // a zero vector
		spike := make([]float32, dims)
		spike[dims/2] = 1
		vecs = append(vecs, spike)
		v := fill(dims, vecs, 1)
		for range 20 {
			q, ok := v.prepare(randomUnit(rng, dims))
			if !ok {
				t.Fatal("prepare")
			}
			dots := make([]int32, v.Len())
			dotsI8(q.i16, v.i8, v.i8Stride, dots)
			slack := v.scoreSlack(&q)
			for i := range v.Len() {
				score := float64(dotF32(q.f32, v.f32[i*v.f32Stride:(i+1)*v.f32Stride]))
				a := q.scale * float64(v.scale[i]) * float64(dots[i])
				b := q.norm*float64(v.qerr[i]) + q.err*v.maxQNorm + slack
				if math.Abs(score-a) > b {
					t.Fatalf("dims %d vector %d: score %v, estimate %v, bound %v", dims, i, score, a, b)
				}
			}
		}
	}
}

// TestVectorsSanitize: vectors that are not unit length are normalised, non-finite ones and
// zero ones score 0, a query of the wrong size or zero is refused.
func TestVectorsSanitize(t *testing.T) {
	v := newVectors(4, 0)
	v.upsert(1, []float32{2, 0, 0, 0})
	v.upsert(2, []float32{float32(math.NaN()), 1, 0, 0})
	v.upsert(3, []float32{0, 0, 0, 0})
	v.upsert(4, []float32{0, 1, 0, 0})
	q, ok := v.prepare([]float32{5, 0, 0, 0})
	if !ok {
		t.Fatal("prepare refused")
	}
	got := v.topK(&q, 10, nil, 2)
	want := []Match{{1, 1}, {2, 0}, {3, 0}, {4, 0}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range [][]float32{{1, 0, 0}, {0, 0, 0, 0}, {float32(math.Inf(1)), 0, 0, 0}} {
		if _, ok := v.prepare(bad); ok {
			t.Errorf("prepare accepted %v", bad)
		}
	}
	if got := v.topK(&q, 0, nil, 2); len(got) != 0 {
		t.Errorf("k=0: %v", got)
	}
}
