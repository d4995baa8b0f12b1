package search

import (
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// Match is a product and its cosine similarity to the query.
type Match struct {
	ProductID int64
	Score     float32
}

// worse orders matches: a lower score, then a higher product id, is worse.
func worse(a, b Match) bool {
	if a.Score != b.Score {
		return a.Score < b.Score
	}
	return a.ProductID > b.ProductID
}

// sortMatches orders matches best first.
func sortMatches(ms []Match) {
	slices.SortFunc(ms, func(a, b Match) int {
		switch {
		case worse(b, a):
			return -1
		case worse(a, b):
			return 1
		}
		return 0
	})
}

// maxQuantDims is the largest vector size that gets the quantised prefilter; longer vectors are
// scanned in float32 only. The int16 query's range shrinks with the size (prepare), so no integer
// sum can overflow; beyond this size it would be too coarse to prune well.
const maxQuantDims = 8192

// vectors is one tenant's vectors of one model and size. Vector i belongs to product ids[i] and
// is stored twice, contiguously:
//
//   - i8[i*i8Stride:], in memory: the vector quantised to int8 with its own scale
//     (v ≈ scale[i]*v8), zero-padded to i8Stride, and qerr[i] >= ‖v - scale[i]*v8‖. The scan reads
//     these to bound every score and computes the exact score only of the vectors whose bound can
//     reach the top k (see topK). This is all a vector keeps on the heap: about dims+44 bytes
//     (residentPerVector).
//   - f32[i*f32Stride:], in the set's file (f32File, memory-mapped, outside the heap): the float32
//     values (as stored in Postgres, renormalised only when their length is not 1), zero-padded to
//     f32Stride. The scores come from these alone.
//
// Not safe for concurrent use: the index guards it with a RWMutex. close releases the file.
type vectors struct {
	dims, f32Stride, i8Stride int // i8Stride 0: no quantised copy
	ids                       []int64
	f32                       []float32 // a view of file's mapping, len = Len()*f32Stride
	file                      *f32File
	scratch                   []float32 // one padded vector: upsert prepares it before writing
	i8                        []int8
	scale, qerr               []float32
	pos                       map[int64]int32
	// Upper bounds over every vector ever stored (removals do not lower them): ‖v‖ and
	// ‖scale*v8‖.
	maxNorm, maxQNorm float64
	capHint           int // vectors to make room for at the first write
}

// newVectors makes an empty set whose float32 file goes in the system's temporary directory.
func newVectors(dims, capacity int) *vectors { return newVectorsIn("", dims, capacity) }

// newVectorsIn makes an empty set whose float32 file goes in dir ("" for the temporary
// directory), with room for capacity vectors in memory.
func newVectorsIn(dir string, dims, capacity int) *vectors {
	v := &vectors{dims: dims, f32Stride: roundUp(dims, f32Block), pos: make(map[int64]int32, capacity), capHint: capacity}
	v.file = &f32File{dir: dir}
	v.scratch = make([]float32, v.f32Stride)
	v.ids = make([]int64, 0, capacity)
	if dims <= maxQuantDims {
		v.i8Stride = roundUp(dims, i8Block)
		v.i8 = make([]int8, 0, capacity*v.i8Stride)
		v.scale = make([]float32, 0, capacity)
		v.qerr = make([]float32, 0, capacity)
	}
	// A set nobody holds any more (a load that failed half-way, a test's) gives its file back.
	runtime.AddCleanup(v, func(ff *f32File) { ff.close() }, v.file)
	return v
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// Len is the number of vectors.
func (v *vectors) Len() int { return len(v.ids) }

// residentPerVector is the heap one vector of dims takes in a set: its id (in ids and the id
// map), its int8 codes, scale and error bound. The float32 values are in the file.
func residentPerVector(dims int) int64 {
	const idAndMap = 8 + mapEntry
	if dims > maxQuantDims {
		return idAndMap
	}
	return idAndMap + int64(roundUp(dims, i8Block)) + 8
}

// mapEntry is the id map's estimated share per entry (key, value and the table's own).
const mapEntry = 24

// bytes is the heap the vectors hold, the id map estimated; the float32 file is not in it
// (fileBytes).
func (v *vectors) bytes() int64 {
	return int64(cap(v.ids))*8 + int64(cap(v.i8)) + int64(cap(v.scale)+cap(v.qerr))*4 + int64(len(v.pos))*mapEntry +
		int64(cap(v.scratch))*4
}

// fileBytes is the size of the float32 values in the file.
func (v *vectors) fileBytes() int64 { return int64(len(v.f32)) * 4 }

// close releases the file; the set must not be used afterwards.
func (v *vectors) close() {
	v.file.close()
	v.f32 = nil
}

// upsert stores the vector of product id (len(vec) == dims). A vector with a value that is not
// finite is stored as zeros; one whose length is not 1 is scaled to length 1 (cosine similarity is
// the dot product of unit vectors); a zero vector stays zero and scores 0. An error (the file
// could not grow or be written) leaves the set as it was for a new id; for a held one its float32
// values are then undefined, and the caller drops the set.
func (v *vectors) upsert(id int64, vec []float32) error {
	dst := v.scratch
	copy(dst, vec[:v.dims])
	clear(dst[v.dims:])
	norm := normalize(dst[:v.dims])
	i, held := v.pos[id]
	if !held {
		i = int32(len(v.ids))
		if err := v.reserve(int(i) + 1); err != nil {
			return err
		}
	}
	if err := v.file.write(int(i)*v.f32Stride, dst); err != nil {
		return err
	}
	if !held {
		v.pos[id] = i
		v.ids = append(v.ids, id)
		v.f32 = v.file.floats()[:len(v.f32)+v.f32Stride]
		if v.i8Stride > 0 {
			v.i8 = slices.Grow(v.i8, v.i8Stride)[:len(v.i8)+v.i8Stride]
			v.scale = append(v.scale, 0)
			v.qerr = append(v.qerr, 0)
		}
	}
	v.maxNorm = max(v.maxNorm, norm)
	if v.i8Stride > 0 {
		q8 := v.i8[int(i)*v.i8Stride : (int(i)+1)*v.i8Stride]
		var qnorm float64
		v.scale[i], v.qerr[i], qnorm = quantize(dst[:v.dims], q8)
		v.maxQNorm = max(v.maxQNorm, qnorm)
	}
	return nil
}

// reserve makes the file hold at least n vectors, doubling it when it must grow.
func (v *vectors) reserve(n int) error {
	have := len(v.file.floats()) / v.f32Stride
	if n <= have {
		return nil
	}
	want := max(n, 2*have, v.capHint, 1024)
	if err := v.file.grow(want * v.f32Stride * 4); err != nil {
		return err
	}
	v.f32 = v.file.floats()[:len(v.f32)]
	return nil
}

// remove drops the vector of product id, if held; the last vector takes its slot. An error
// (the file could not be written) leaves the set unusable: the caller drops it.
func (v *vectors) remove(id int64) error {
	i, ok := v.pos[id]
	if !ok {
		return nil
	}
	last := int32(len(v.ids) - 1)
	if i != last {
		copy(v.scratch, v.f32[int(last)*v.f32Stride:])
		if err := v.file.write(int(i)*v.f32Stride, v.scratch); err != nil {
			return err
		}
		moved := v.ids[last]
		v.ids[i] = moved
		v.pos[moved] = i
		if v.i8Stride > 0 {
			copy(v.i8[int(i)*v.i8Stride:(int(i)+1)*v.i8Stride], v.i8[int(last)*v.i8Stride:])
			v.scale[i], v.qerr[i] = v.scale[last], v.qerr[last]
		}
	}
	delete(v.pos, id)
	v.ids = v.ids[:last]
	v.f32 = v.f32[:int(last)*v.f32Stride]
	if v.i8Stride > 0 {
		v.i8 = v.i8[:int(last)*v.i8Stride]
		v.scale, v.qerr = v.scale[:last], v.qerr[:last]
	}
	return nil
}

// normalize makes x a unit vector in place unless it is one already (within float32 rounding),
// and returns an upper bound of its length afterwards. Values that are not finite make it zero.
func normalize(x []float32) float64 {
	var sum float64
	for _, f := range x {
		sum += float64(f) * float64(f)
	}
	if math.IsNaN(sum) || math.IsInf(sum, 0) {
		clear(x)
		return 0
	}
	if sum == 0 {
		return 0
	}
	if math.Abs(sum-1) > 1e-5 {
		inv := 1 / math.Sqrt(sum)
		sum = 0
		for i, f := range x {
			x[i] = float32(float64(f) * inv)
			sum += float64(x[i]) * float64(x[i])
		}
	}
	return math.Sqrt(sum) * (1 + 1e-9)
}

// quantize writes v's int8 form to dst (zero beyond len(v)) and returns its scale, an upper
// bound of the quantisation error ‖v - scale*dst‖ and one of ‖scale*dst‖.
func quantize(v []float32, dst []int8) (scale, qerr float32, qnorm float64) {
	var maxAbs float64
	for _, f := range v {
		maxAbs = max(maxAbs, math.Abs(float64(f)))
	}
	clear(dst)
	if maxAbs == 0 {
		return 0, 0, 0
	}
	scale = float32(maxAbs / 127)
	if scale == 0 {
		scale = math.SmallestNonzeroFloat32
	}
	s := float64(scale)
	var e2, n2 float64
	for i, f := range v {
		x := min(127, max(-127, math.Round(float64(f)/s)))
		dst[i] = int8(x)
		r := s * x // exact: 24 by 7 bits
		d := float64(f) - r
		e2 += d * d
		n2 += r * r
	}
	return scale, roundUp32(math.Sqrt(e2)*(1+1e-9) + 1e-12), math.Sqrt(n2) * (1 + 1e-9)
}

// roundUp32 is the smallest float32 >= x.
func roundUp32(x float64) float32 {
	f := float32(x)
	if float64(f) < x {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

// query is a search vector prepared for one vectors set.
type query struct {
	f32  []float32 // unit, zero-padded to f32Stride
	norm float64   // upper bound of ‖f32‖
	// The int16 form for the prefilter: f32 ≈ scale*i16, ‖f32 - scale*i16‖ <= err.
	i16        []int16
	scale, err float64
}

// prepare pads and normalises q for v; false for a vector of the wrong size, zero or not finite.
func (v *vectors) prepare(q []float32) (query, bool) {
	if len(q) != v.dims {
		return query{}, false
	}
	out := query{f32: make([]float32, v.f32Stride)}
	copy(out.f32, q)
	var sum float64
	for _, f := range q {
		sum += float64(f) * float64(f)
	}
	if sum == 0 || math.IsNaN(sum) || math.IsInf(sum, 0) {
		return query{}, false
	}
	inv := 1 / math.Sqrt(sum)
	sum = 0
	var maxAbs float64
	for i := range q {
		out.f32[i] = float32(float64(q[i]) * inv)
		sum += float64(out.f32[i]) * float64(out.f32[i])
		maxAbs = max(maxAbs, math.Abs(float64(out.f32[i])))
	}
	out.norm = math.Sqrt(sum) * (1 + 1e-9)
	if v.i8Stride == 0 {
		return out, true
	}
	// |i16| <= qmax keeps every partial sum of the integer dot product within int32:
	// sum |i16*v8| <= i8Stride*qmax*127 < 2^31.
	qmax := float64(min(32767, math.MaxInt32/(127*v.i8Stride)))
	out.scale = maxAbs / qmax
	out.i16 = make([]int16, v.i8Stride)
	var e2 float64
	for i := range q {
		x := min(qmax, max(-qmax, math.Round(float64(out.f32[i])/out.scale)))
		out.i16[i] = int16(x)
		d := float64(out.f32[i]) - out.scale*x
		e2 += d * d
	}
	out.err = math.Sqrt(e2)*(1+1e-9) + 1e-12
	return out, true
}

// scoreSlack bounds how far the float32 score dotF32 computes can be from the exact dot product
// of the same float32 values: every product is rounded once and passes through at most
// f32Stride/32 lane additions and 5 additions of the reduction tree, so the error is at most
// γ(m)·Σ|q_i·v_i| <= γ(m)·‖q‖·‖v‖ with m = f32Stride/32 + 6 and γ(m) = m·u/(1-m·u), u = 2^-24.
// Doubled, plus a little, to cover the float64 arithmetic of the bounds themselves.
func (v *vectors) scoreSlack(q *query) float64 {
	const u = 1.0 / (1 << 24)
	m := float64(v.f32Stride/f32Block + 6)
	gamma := m * u / (1 - m*u)
	return 2*gamma*q.norm*v.maxNorm + 1e-12
}

// topK returns the k best matches of q among the vectors that allow admits (nil: all), best
// first, using up to parts goroutines. The result is exactly scanExact's: the same matches with
// the same float32 scores in the same order.
//
// With the quantised copy it is a bounded prefilter. For every vector, the integer dot product I
// of q's int16 form with the vector's int8 form gives an estimate a = q.scale·scale_i·I of the
// score, and
//
//	|score_i - a| <= b_i = ‖q‖·qerr_i + q.err·maxQNorm + slack
//
// because q·v = (q.scale·i16 + e_q)·(scale_i·v8) + q·e_v, so the difference is at most
// ‖e_q‖·‖scale_i·v8‖ + ‖q‖·‖e_v‖ (Cauchy–Schwarz), and the float32 score is within slack of the
// exact q·v (scoreSlack). Let L be the k-th largest lower bound a-b among the admitted vectors:
// at least k of them score L or more, so a vector whose upper bound a+b is below L scores below
// the k-th best score and is not in the result, whatever the tie order. Each partition keeps the
// k largest lower bounds it has seen (its running L never exceeds the global one) and the
// candidates whose upper bound reaches it; the exact scores of the candidates that reach the
// global L then decide, as in scanExact.
func (v *vectors) topK(q *query, k int, allow func(int64) bool, parts int) []Match {
	n := len(v.ids)
	if k <= 0 || n == 0 {
		return []Match{}
	}
	parts = max(1, min(parts, n/minPerPart))
	if v.i8Stride == 0 || n <= k {
		return v.exactParallel(q, k, allow, parts)
	}
	slack := v.scoreSlack(q)
	fixed := q.err*v.maxQNorm + slack
	states := make([]prefilterState, parts)
	for i := range states {
		states[i] = prefilterState{lbs: newFloatHeap(k), bar: math.Inf(-1)}
	}
	chunks(parts, n, scanChunk, func(w, lo, hi int) {
		v.prefilter(q, allow, fixed, lo, hi, &states[w])
	})
	var lbs []float64
	var total int
	for _, st := range states {
		lbs = append(lbs, st.lbs.values()...)
		total += len(st.cands)
	}
	bar := math.Inf(-1)
	if len(lbs) >= k {
		slices.Sort(lbs)
		bar = lbs[len(lbs)-k]
	}
	cands := make([]cand, 0, total)
	for _, st := range states {
		for _, c := range st.cands {
			if c.ub >= bar {
				cands = append(cands, c)
			}
		}
	}
	return v.rescore(q, k, cands, parts)
}

// minPerPart is the fewest vectors worth a goroutine of their own; scanChunk is the unit of
// work the scan's goroutines take in turn (a goroutine the scheduler holds back leaves its
// chunks to the others).
const (
	minPerPart = 4096
	scanChunk  = 8192
)

// cand is a vector whose score may reach the top k.
type cand struct {
	i  int32
	ub float64
}

// prefilterState is what one goroutine of the prefilter keeps across its chunks: the k largest
// lower bounds among the admitted vectors it saw, the k-th of them (bar; -Inf until it has k),
// and the admitted vectors whose upper bound reached bar when they were seen.
type prefilterState struct {
	lbs   *floatHeap
	bar   float64
	cands []cand
}

// prefilter bounds the scores of vectors lo..hi-1 (see topK) into st.
func (v *vectors) prefilter(q *query, allow func(int64) bool, fixed float64, lo, hi int, st *prefilterState) {
	const block = 128
	var dots [block]int32
	stride := v.i8Stride
	bar := st.bar
	for b := lo; b < hi; b += block {
		m := min(block, hi-b)
		dotsI8(q.i16, v.i8[b*stride:(b+m)*stride], stride, dots[:m])
		for j, d := range dots[:m] {
			i := b + j
			a := q.scale * float64(v.scale[i]) * float64(d)
			bound := q.norm*float64(v.qerr[i]) + fixed
			ub := a + bound
			if ub < bar {
				continue
			}
			if allow != nil && !allow(v.ids[i]) {
				continue
			}
			if st.lbs.push(a - bound) {
				bar = st.lbs.min()
			}
			st.cands = append(st.cands, cand{int32(i), ub})
		}
	}
	st.bar = bar
}

// rescore computes the exact scores of the candidates and keeps the k best.
func (v *vectors) rescore(q *query, k int, cands []cand, parts int) []Match {
	parts = max(1, min(parts, len(cands)/minPerPart))
	tops := make([]*topHeap, parts)
	st := v.f32Stride
	parallel(parts, len(cands), func(p, lo, hi int) {
		top := newTopHeap(k)
		for _, c := range cands[lo:hi] {
			i := int(c.i)
			top.push(Match{ProductID: v.ids[i], Score: dotF32(q.f32, v.f32[i*st:(i+1)*st])})
		}
		tops[p] = top
	})
	return mergeTops(k, tops)
}

// exactParallel scores every vector in float32, in parts goroutines.
func (v *vectors) exactParallel(q *query, k int, allow func(int64) bool, parts int) []Match {
	tops := make([]*topHeap, parts)
	parallel(parts, len(v.ids), func(p, lo, hi int) {
		tops[p] = v.scanRange(q, k, allow, lo, hi, dotF32)
	})
	return mergeTops(k, tops)
}

// scanExact is the plain scan: every vector scored with the pure-Go kernel in one goroutine. It
// is the baseline topK must equal.
func (v *vectors) scanExact(q *query, k int, allow func(int64) bool) []Match {
	if k <= 0 {
		return []Match{}
	}
	return v.scanRange(q, k, allow, 0, len(v.ids), dotF32Go).sorted()
}

func (v *vectors) scanRange(q *query, k int, allow func(int64) bool, lo, hi int, dot func(q, v []float32) float32) *topHeap {
	top := newTopHeap(k)
	st := v.f32Stride
	for i := lo; i < hi; i++ {
		m := Match{ProductID: v.ids[i], Score: dot(q.f32, v.f32[i*st:(i+1)*st])}
		if !top.admits(m) || (allow != nil && !allow(m.ProductID)) {
			continue
		}
		top.push(m)
	}
	return top
}

// parallel runs fn over parts contiguous ranges of [0, n), the first in this goroutine.
func parallel(parts, n int, fn func(p, lo, hi int)) {
	if parts <= 1 {
		fn(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	for p := 1; p < parts; p++ {
		wg.Go(func() { fn(p, p*n/parts, (p+1)*n/parts) })
	}
	fn(0, 0, n/parts)
	wg.Wait()
}

// chunks runs fn over [0, n) in ranges of size chunk taken in turn by workers goroutines (worker
// 0 is this one); fn(w, ...) calls of one worker never overlap.
func chunks(workers, n, chunk int, fn func(w, lo, hi int)) {
	count := (n + chunk - 1) / chunk
	var next atomic.Int64
	work := func(w int) {
		for {
			c := int(next.Add(1) - 1)
			if c >= count {
				return
			}
			fn(w, c*chunk, min(n, (c+1)*chunk))
		}
	}
	workers = max(1, min(workers, count))
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() { work(w) })
	}
	work(0)
	wg.Wait()
}

func mergeTops(k int, tops []*topHeap) []Match {
	var all []Match
	for _, t := range tops {
		all = append(all, t.h...)
	}
	sortMatches(all)
	if len(all) > k {
		all = all[:k]
	}
	if all == nil {
		all = []Match{}
	}
	return all
}

// topHeap keeps the k best matches: a min-heap whose root is the worst kept.
type topHeap struct {
	k int
	h []Match
}

func newTopHeap(k int) *topHeap { return &topHeap{k: k, h: make([]Match, 0, min(k, 1024))} }

// admits says whether m would be kept.
func (t *topHeap) admits(m Match) bool {
	return t.k > 0 && (len(t.h) < t.k || worse(t.h[0], m))
}

func (t *topHeap) push(m Match) {
	if !t.admits(m) {
		return
	}
	if len(t.h) < t.k {
		t.h = append(t.h, m)
		for i := len(t.h) - 1; i > 0; {
			p := (i - 1) / 2
			if !worse(t.h[i], t.h[p]) {
				break
			}
			t.h[i], t.h[p] = t.h[p], t.h[i]
			i = p
		}
		return
	}
	t.h[0] = m
	for i := 0; ; {
		l, r, w := 2*i+1, 2*i+2, i
		if l < len(t.h) && worse(t.h[l], t.h[w]) {
			w = l
		}
		if r < len(t.h) && worse(t.h[r], t.h[w]) {
			w = r
		}
		if w == i {
			break
		}
		t.h[i], t.h[w] = t.h[w], t.h[i]
		i = w
	}
}

func (t *topHeap) sorted() []Match {
	out := slices.Clone(t.h)
	sortMatches(out)
	if out == nil {
		out = []Match{}
	}
	return out
}

// floatHeap keeps the k largest values pushed: a min-heap.
type floatHeap struct {
	k int
	h []float64
}

func newFloatHeap(k int) *floatHeap { return &floatHeap{k: k, h: make([]float64, 0, min(k, 1024))} }

// push adds x when it is among the k largest and says whether the heap is full.
func (f *floatHeap) push(x float64) bool {
	if len(f.h) < f.k {
		f.h = append(f.h, x)
		for i := len(f.h) - 1; i > 0; {
			p := (i - 1) / 2
			if f.h[p] <= f.h[i] {
				break
			}
			f.h[i], f.h[p] = f.h[p], f.h[i]
			i = p
		}
		return len(f.h) == f.k
	}
	if x <= f.h[0] {
		return true
	}
	f.h[0] = x
	for i := 0; ; {
		l, r, w := 2*i+1, 2*i+2, i
		if l < len(f.h) && f.h[l] < f.h[w] {
			w = l
		}
		if r < len(f.h) && f.h[r] < f.h[w] {
			w = r
		}
		if w == i {
			break
		}
		f.h[i], f.h[w] = f.h[w], f.h[i]
		i = w
	}
	return true
}

func (f *floatHeap) min() float64 { return f.h[0] }

func (f *floatHeap) values() []float64 { return f.h }
