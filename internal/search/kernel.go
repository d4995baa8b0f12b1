package search

// The scan's two arithmetic kernels. Each has a pure-Go reference and, on amd64 with AVX2, an
// assembly version that computes the very same bits (kernel_amd64.s); the tests compare them.
//
// dotF32 is the exact score: the float32 dot product of a query and a vector, both padded with
// zeros to a multiple of 32. Its arithmetic is fixed so that every implementation returns the same
// float32: 32 partial sums, sum l adding the products of elements l, l+32, l+64 ... in order (each
// product rounded to float32 on its own, no fused multiply-add), then a fixed tree: the four groups
// of eight sums are added pairwise (0+1, 2+3, then those two), the eight results fold in half
// three times (l + l+4, l + l+2, l + l+1).
//
// dotsI8 is the prefilter: the exact integer dot products of an int16 query with int8 vectors,
// both padded with zeros to a multiple of 64. Integer sums do not depend on their order.

// Padding of the two layouts, in elements.
const (
	f32Block = 32
	i8Block  = 64
)

// dotF32Go is the reference of dotF32. len(q) == len(v), a multiple of f32Block.
func dotF32Go(q, v []float32) float32 {
	var s [f32Block]float32
	v = v[:len(q)]
	for b := 0; b+f32Block <= len(q); b += f32Block {
		qb, vb := q[b:b+f32Block:b+f32Block], v[b:b+f32Block:b+f32Block]
		for l := range f32Block {
			// The conversion rounds the product on its own: Go may not fuse it into an FMA.
			s[l] += float32(qb[l] * vb[l])
		}
	}
	var t [8]float32
	for l := range 8 {
		t[l] = (s[l] + s[8+l]) + (s[16+l] + s[24+l])
	}
	for l := range 4 {
		t[l] += t[l+4]
	}
	for l := range 2 {
		t[l] += t[l+2]
	}
	return t[0] + t[1]
}

// dotsI8Go is the reference of dotsI8: out[i] is the dot product of q with data[i*stride :
// (i+1)*stride] for i < len(out). len(q) == stride, a multiple of i8Block.
func dotsI8Go(q []int16, data []int8, stride int, out []int32) {
	q = q[:stride]
	for i := range out {
		v := data[i*stride : (i+1)*stride : (i+1)*stride]
		var s int32
		for j, x := range v {
			s += int32(q[j]) * int32(x)
		}
		out[i] = s
	}
}
