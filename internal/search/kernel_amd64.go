//go:build amd64 && !purego

package search

import "golang.org/x/sys/cpu"

// The AVX2 kernels (kernel_amd64.s) run when the CPU and the OS support AVX2.

//go:noescape
func dotF32AVX2(q, v *float32, n int) float32

//go:noescape
func dotsI8AVX2(q *int16, data *int8, stride, count int, out *int32)

// hasAVX2 says whether the assembly kernels run here.
var hasAVX2 = cpu.X86.HasAVX2

// dotF32 and dotsI8 are the kernels in use.
var (
	dotF32 = pick(hasAVX2, dotF32Asm, dotF32Go)
	dotsI8 = pick(hasAVX2, dotsI8Asm, dotsI8Go)
)

func pick[F any](fast bool, asm, ref F) F {
	if fast {
		return asm
	}
	return ref
}

func dotF32Asm(q, v []float32) float32 {
	if len(q) == 0 {
		return 0
	}
	_ = v[len(q)-1]
	return dotF32AVX2(&q[0], &v[0], len(q))
}

func dotsI8Asm(q []int16, data []int8, stride int, out []int32) {
	if len(out) == 0 {
		return
	}
	if stride == 0 {
		clear(out)
		return
	}
	_ = q[stride-1]
	_ = data[len(out)*stride-1]
	dotsI8AVX2(&q[0], &data[0], stride, len(out), &out[0])
}
