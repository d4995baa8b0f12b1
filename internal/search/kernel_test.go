package search

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestKernelsMatchReference: the assembly kernels return the same bits as the pure-Go
// references, on random data of every padded length up to a few blocks and on extreme values.
func TestKernelsMatchReference(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 here: the references are the kernels (the purego build runs them)")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	gens := map[string]func() float32{
		"normal": func() float32 { return float32(rng.NormFloat64()) },
		"unit":   func() float32 { return float32(rng.NormFloat64() / 20) },
		"wide":   func() float32 { return float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10))) },
		"sparse": func() float32 {
			if rng.IntN(10) == 0 {
				return float32(rng.NormFloat64())
			}
			return 0
		},
	}
	for name, gen := range gens {
		t.Run("dotF32/"+name, func(t *testing.T) {
			for n := 0; n <= 8*f32Block; n += f32Block {
				for range 200 {
					q, v := make([]float32, n), make([]float32, n)
					for i := range n {
						q[i], v[i] = gen(), gen()
					}
					got, want := dotF32Asm(q, v), dotF32Go(q, v)
					if math.Float32bits(got) != math.Float32bits(want) && !(got == 0 && want == 0) {
						t.Fatalf("n=%d: asm %v (%08x), reference %v (%08x)", n, got, math.Float32bits(got), want, math.Float32bits(want))
					}
				}
			}
		})
	}
	t.Run("dotsI8", func(t *testing.T) {
		for stride := i8Block; stride <= 6*i8Block; stride += i8Block {
			for _, count := range []int{1, 2, 7, 64} {
				q := make([]int16, stride)
				data := make([]int8, stride*count)
				for i := range q {
					q[i] = int16(rng.IntN(65535) - 32767)
				}
				for i := range data {
					data[i] = int8(rng.IntN(255) - 127)
				}
				if stride == 2*i8Block { // the extremes
					for i := range q {
						q[i] = 32767
					}
					for i := range data {
						data[i] = -127
					}
				}
				got, want := make([]int32, count), make([]int32, count)
				dotsI8Asm(q, data, stride, got)
				dotsI8Go(q, data, stride, want)
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("stride %d vector %d: asm %d, reference %d", stride, i, got[i], want[i])
					}
				}
			}
		}
	})
}
