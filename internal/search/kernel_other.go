//go:build !amd64 || purego

package search

// Without the assembly kernels the references run.
const hasAVX2 = false

var (
	dotF32 = dotF32Go
	dotsI8 = dotsI8Go
)

// dotF32Asm and dotsI8Asm stand in for the assembly kernels in the tests.
var (
	dotF32Asm = dotF32Go
	dotsI8Asm = dotsI8Go
)
