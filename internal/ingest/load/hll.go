package load

import (
	"errors"
	"math"
	"math/bits"
)

// hllPrecision 14 gives 16384 one-byte registers and a standard error of 1.04/sqrt(2^14) ≈ 0.81%.
const (
	hllPrecision = 14
	hllRegisters = 1 << hllPrecision
)

// Sketch is a HyperLogLog counter of distinct strings. Its bytes are stored as they are, so the
// hash must never change: FNV-1a 64 finalised with the splitmix64 mixer.
type Sketch []byte

// NewSketch returns an empty sketch.
func NewSketch() Sketch { return make(Sketch, hllRegisters) }

// hash64 is the sketches' hash of a string, also the loader's partition of a user.
func hash64(s string) uint64 {
	x := uint64(14695981039346656037) // FNV-1a 64, as hash/fnv computes it, without its allocation
	for i := 0; i < len(s); i++ {
		x = (x ^ uint64(s[i])) * 1099511628211
	}
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Add counts s.
func (sk Sketch) Add(s string) {
	x := hash64(s)
	idx := x >> (64 - hllPrecision)
	rank := uint8(bits.LeadingZeros64(x<<hllPrecision|1<<(hllPrecision-1)) + 1)
	if rank > sk[idx] {
		sk[idx] = rank
	}
}

// Merge folds other into sk.
func (sk Sketch) Merge(other Sketch) error {
	if len(other) != hllRegisters {
		return errors.New("sketch size mismatch")
	}
	for i, r := range other {
		if r > sk[i] {
			sk[i] = r
		}
	}
	return nil
}

// Estimate returns the approximate number of distinct strings added.
func (sk Sketch) Estimate() int64 {
	m := float64(hllRegisters)
	var sum float64
	zeros := 0
	for _, r := range sk {
		sum += 1 / float64(uint64(1)<<r)
		if r == 0 {
			zeros++
		}
	}
	alpha := 0.7213 / (1 + 1.079/m)
	est := alpha * m * m / sum
	if est <= 2.5*m && zeros > 0 {
		est = m * math.Log(m/float64(zeros)) // linear counting for small cardinalities
	}
	return int64(est + 0.5)
}
