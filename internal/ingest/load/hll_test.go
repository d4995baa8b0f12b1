package load_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"testing"

	"github.com/cohort-dev/cohort/internal/ingest/load"
)

func sketchOf(prefix string, from, to int) load.Sketch {
	sk := load.NewSketch()
	for i := from; i < to; i++ {
		sk.Add(prefix + strconv.Itoa(i))
	}
	return sk
}

func relErr(est int64, n int) float64 { return math.Abs(float64(est)-float64(n)) / float64(n) }

func TestSketchEstimate(t *testing.T) {
	cases := []struct {
		name   string
		prefix string
		n      int
		tol    float64
	}{
		{name: "1", prefix: "user-", n: 1, tol: 0},
		{name: "10", prefix: "user-", n: 10, tol: 0},
		{name: "100", prefix: "user-", n: 100, tol: 0.02},
		{name: "1k", prefix: "user-", n: 1_000, tol: 0.02},
		{name: "10k", prefix: "user-", n: 10_000, tol: 0.02},
		{name: "30k", prefix: "user-", n: 30_000, tol: 0.02},
		{name: "50k", prefix: "user-", n: 50_000, tol: 0.02},
		{name: "50k uuids", prefix: "3f2a9c4e-1b7d-4e8a-9f6c-", n: 50_000, tol: 0.02},
		{name: "100k", prefix: "user-", n: 100_000, tol: 0.02},
		{name: "100k emails", prefix: "customer@example.com+", n: 100_000, tol: 0.02},
		{name: "1M", prefix: "user-", n: 1_000_000, tol: 0.02},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			est := sketchOf(tc.prefix, 0, tc.n).Estimate()
			if e := relErr(est, tc.n); e > tc.tol {
				t.Errorf("estimate %d for %d distinct: error %.2f%%, want at most %.0f%%", est, tc.n, 100*e, 100*tc.tol)
			}
		})
	}
}

// Adding the same strings again changes nothing.
func TestSketchDuplicates(t *testing.T) {
	sk := sketchOf("u", 0, 5000)
	before := append(load.Sketch(nil), sk...)
	for range 3 {
		for i := range 5000 {
			sk.Add("u" + strconv.Itoa(i))
		}
	}
	if !bytes.Equal(before, sk) {
		t.Fatal("re-adding the same strings changed the sketch")
	}
	if e := relErr(sk.Estimate(), 5000); e > 0.02 {
		t.Errorf("estimate %d for 5000 distinct", sk.Estimate())
	}
}

func TestSketchEmpty(t *testing.T) {
	sk := load.NewSketch()
	if got := sk.Estimate(); got != 0 {
		t.Errorf("empty sketch estimates %d", got)
	}
	if len(sk) != 1<<14 {
		t.Errorf("sketch has %d registers, want 16384", len(sk))
	}
	if err := sk.Merge(load.NewSketch()); err != nil || sk.Estimate() != 0 {
		t.Errorf("merging two empty sketches: %v, estimate %d", err, sk.Estimate())
	}
}

func TestSketchMerge(t *testing.T) {
	cases := []struct {
		name        string
		a, b, union [2]int // [from, to) ranges of "user-" ids
	}{
		{name: "disjoint halves", a: [2]int{0, 50_000}, b: [2]int{50_000, 100_000}, union: [2]int{0, 100_000}},
		{name: "overlapping", a: [2]int{0, 60_000}, b: [2]int{40_000, 100_000}, union: [2]int{0, 100_000}},
		{name: "subset", a: [2]int{0, 10_000}, b: [2]int{2_000, 3_000}, union: [2]int{0, 10_000}},
		{name: "with empty", a: [2]int{0, 7_000}, b: [2]int{0, 0}, union: [2]int{0, 7_000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := sketchOf("user-", tc.a[0], tc.a[1])
			b := sketchOf("user-", tc.b[0], tc.b[1])
			want := sketchOf("user-", tc.union[0], tc.union[1])
			ab := append(load.Sketch(nil), a...)
			if err := ab.Merge(b); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ab, want) {
				t.Error("a.Merge(b) differs from the sketch of the union")
			}
			ba := append(load.Sketch(nil), b...)
			if err := ba.Merge(a); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ba, want) {
				t.Error("merge is not commutative")
			}
			if err := ab.Merge(b); err != nil || !bytes.Equal(ab, want) {
				t.Error("merge is not idempotent")
			}
			n := tc.union[1] - tc.union[0]
			if e := relErr(ab.Estimate(), n); e > 0.02 {
				t.Errorf("merged estimate %d for %d", ab.Estimate(), n)
			}
		})
	}
}

func TestSketchMergeSizeMismatch(t *testing.T) {
	cases := []struct {
		name  string
		other load.Sketch
	}{
		{name: "nil", other: nil},
		{name: "empty", other: load.Sketch{}},
		{name: "one short", other: make(load.Sketch, 1<<14-1)},
		{name: "one long", other: make(load.Sketch, 1<<14+1)},
		{name: "precision 12", other: make(load.Sketch, 1<<12)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sk := sketchOf("u", 0, 100)
			before := append(load.Sketch(nil), sk...)
			if err := sk.Merge(tc.other); err == nil {
				t.Fatal("Merge accepted a sketch of the wrong size")
			}
			if !bytes.Equal(before, sk) {
				t.Error("a failed Merge changed the sketch")
			}
		})
	}
}

// Sketches are stored as bytes and merged across releases, so the hash and register layout must
// never change: this pins the bytes of a known sketch.
func TestSketchBytesAreStable(t *testing.T) {
	sk := sketchOf("user-", 0, 1000)
	sum := sha256.Sum256(sk)
	const want = "4098da0c1c94670eb7b7f305e76ca53941ed5542c8e02e39dd73c8dc264953b2"
	if got := hex.EncodeToString(sum[:]); got != want {
		t.Errorf("sketch digest = %s, want %s: the stored sketch format changed", got, want)
	}
	// A spot check that does not depend on the digest: one string sets exactly one register.
	one := load.NewSketch()
	one.Add("user-1")
	set := 0
	for _, r := range one {
		if r != 0 {
			set++
			if r < 1 || r > 51 {
				t.Errorf("register rank %d out of range 1..51", r)
			}
		}
	}
	if set != 1 {
		t.Errorf("one Add set %d registers", set)
	}
}

// refSketch is the format the Sketch doc comment promises, written out independently: FNV-1a 64
// finalised with the splitmix64 mixer; the top 14 bits pick the register, the register keeps the
// largest 1 + leading zeros of the remaining 50 bits (at most 51).
func refSketch(values []string) []byte {
	regs := make([]byte, 1<<14)
	for _, v := range values {
		h := fnv.New64a()
		h.Write([]byte(v))
		x := h.Sum64()
		x ^= x >> 30
		x *= 0xbf58476d1ce4e5b9
		x ^= x >> 27
		x *= 0x94d049bb133111eb
		x ^= x >> 31
		idx := x >> 50
		rest := x << 14
		rank := byte(1)
		for rank <= 50 && rest&(1<<63) == 0 {
			rank++
			rest <<= 1
		}
		regs[idx] = max(regs[idx], rank)
	}
	return regs
}

func TestSketchMatchesDocumentedFormat(t *testing.T) {
	cases := []struct {
		name   string
		values []string
	}{
		{name: "empty string", values: []string{""}},
		{name: "user ids", values: fmtIDs("user", 2000)},
		{name: "unicode", values: []string{"José", "Zoë", "用户", "😀"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sk := load.NewSketch()
			for _, v := range tc.values {
				sk.Add(v)
			}
			if !bytes.Equal(sk, refSketch(tc.values)) {
				t.Error("sketch registers differ from the documented hash and layout")
			}
		})
	}
}

// Around the switch from linear counting to the HyperLogLog estimate (2.5 * 16384 = 40,960) the
// error must stay small too.
func TestSketchEstimateAcrossRange(t *testing.T) {
	for n := 20_000; n <= 120_000; n += 5_000 {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			est := sketchOf("id:", 0, n).Estimate()
			if e := relErr(est, n); e > 0.02 {
				t.Errorf("estimate %d for %d distinct: error %.2f%%", est, n, 100*e)
			}
		})
	}
}
