// Package lookalike builds Cohort's "lookalike" segments: given a seed
// segment (a set of user ids) and one feature vector per user of a tenant
// (per-event-type counts, monetary sums, recency in days, ...), it ranks the
// users that are not in the seed by how similar they are to the seed.
//
// # Method
//
//  1. Every feature value x is transformed with sign(x)*log1p(|x|): counts
//     and monetary sums are heavy-tailed, and the transform keeps a handful
//     of whales from dominating a column.
//  2. Each transformed column is standardised to z-scores over ALL users of
//     the matrix (seed included): z = (t - mean) / stddev, using the
//     population standard deviation. A column with zero (or numerically
//     negligible) variance carries no information and contributes 0.
//  3. The seed centroid is the mean of the seed users' standardised rows.
//     Seed ids that have no row in the matrix are ignored; if no seed user
//     has a row, Score returns ErrEmptySeed.
//  4. Every non-seed user is scored with the cosine similarity between its
//     standardised row and the centroid, in [-1, 1]. A zero vector (user row
//     or centroid) has similarity 0.
//  5. Candidates are ordered by similarity descending, then user id
//     ascending, and cut at Options.Size, or at Options.MinSimilarity
//     (similarity >= MinSimilarity), never returning more than
//     Options.MaxSize members.
//  6. Percentile is computed over all non-seed candidates (not only the
//     returned ones): the share of candidates whose similarity is <= the
//     member's, times 100, rounded to 2 decimals.
//
// # Performance and determinism
//
// The matrix is stored row-major in a single []float64. Score never copies
// or mutates it: the transform is recomputed on the fly in two parallel
// passes (column statistics plus seed sums, then similarities), so the extra
// memory is one float64 and one flag per user plus the result. Rows are
// processed in fixed-size chunks whose partial results are merged in chunk
// order, so the output is bit-for-bit identical for the same input whatever
// the number of CPUs. For a top-N cut much smaller than the candidate count
// a bounded heap is used instead of sorting every candidate.
//
// User ids are expected to be unique within a Matrix; Add does not check
// this, to keep the matrix compact.
package lookalike

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// DefaultMaxSize is the cap on results applied when Options.MaxSize is 0.
const DefaultMaxSize = 1_000_000

// ErrEmptySeed is returned by Score when no seed user has a row in the matrix.
var ErrEmptySeed = errors.New("lookalike: no seed user has a feature row")

// Features is the layout of the vectors: names of the columns, e.g.
// "count:order_completed", "sum:order_completed.amount",
// "recency_days:page_view".
type Features struct {
	Names []string
}

// Matrix holds one row of float64 features per user, row-major in a single
// []float64 (len = len(Users)*len(Features.Names)) to stay compact.
type Matrix struct {
	Features Features
	Users    []string
	Values   []float64
}

// NewMatrix returns an empty matrix with the given column names, with room
// for capacity users.
func NewMatrix(names []string, capacity int) *Matrix {
	if capacity < 0 {
		capacity = 0
	}
	return &Matrix{
		Features: Features{Names: slices.Clone(names)},
		Users:    make([]string, 0, capacity),
		Values:   make([]float64, 0, capacity*len(names)),
	}
}

// Add appends the feature row of userID. The row must have one value per
// column, and every value must be finite (NaN and ±Inf are rejected). The row
// is copied.
func (m *Matrix) Add(userID string, row []float64) error {
	if d := len(m.Features.Names); len(row) != d {
		return fmt.Errorf("lookalike: row of user %q has %d values, want %d", userID, len(row), d)
	}
	for j, v := range row {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("lookalike: row of user %q: feature %q is not finite (%v)", userID, m.Features.Names[j], v)
		}
	}
	m.Users = append(m.Users, userID)
	m.Values = append(m.Values, row...)
	return nil
}

// Len returns the number of user rows.
func (m *Matrix) Len() int { return len(m.Users) }

// Options of a lookalike run: exactly one of Size (> 0, top N) or
// MinSimilarity (in (0, 1]) must be set.
type Options struct {
	// Size returns the Size most similar non-seed users.
	Size int
	// MinSimilarity returns every non-seed user whose similarity is >= MinSimilarity.
	MinSimilarity float64
	// MaxSize is a hard cap on the number of results, applied with either
	// mode (DefaultMaxSize when 0).
	MaxSize int
}

// Validate reports whether the options are usable.
func (o Options) Validate() error {
	switch {
	case o.Size < 0:
		return fmt.Errorf("lookalike: size must be positive, got %d", o.Size)
	case math.IsNaN(o.MinSimilarity) || o.MinSimilarity < 0 || o.MinSimilarity > 1:
		return fmt.Errorf("lookalike: min similarity must be in (0, 1], got %v", o.MinSimilarity)
	case o.MaxSize < 0:
		return fmt.Errorf("lookalike: max size must not be negative, got %d", o.MaxSize)
	case o.Size == 0 && o.MinSimilarity == 0:
		return errors.New("lookalike: one of size or min similarity must be set")
	case o.Size > 0 && o.MinSimilarity > 0:
		return errors.New("lookalike: size and min similarity are mutually exclusive")
	}
	return nil
}

func (o Options) maxSize() int {
	if o.MaxSize == 0 {
		return DefaultMaxSize
	}
	return o.MaxSize
}

// Scored is one lookalike member.
type Scored struct {
	UserID string
	// Similarity is the cosine similarity to the seed centroid, in [-1, 1].
	Similarity float64
	// Percentile is the share of non-seed candidates with a similarity <=
	// this user's, times 100, rounded to 2 decimals (0..100).
	Percentile float64
}

// chunkRows is the number of rows processed as one unit of work. It is a
// constant (not derived from the CPU count) so that floating-point partial
// sums are merged in the same order on every machine.
const chunkRows = 8192

// varianceEpsilon: a column whose standard deviation is below
// varianceEpsilon*max(1, |mean|) is treated as zero-variance, so rounding
// noise in a constant column does not blow up into huge z-scores.
const varianceEpsilon = 1e-9

// Score ranks non-seed users by cosine similarity to the seed's centroid
// (see the package documentation for the method). It returns ErrEmptySeed
// when no seed user has a row in m. The matrix is not modified.
func Score(m *Matrix, seed map[string]struct{}, o Options) ([]Scored, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("lookalike: nil matrix")
	}
	d := len(m.Features.Names)
	n := len(m.Users)
	if len(m.Values) != n*d {
		return nil, fmt.Errorf("lookalike: matrix has %d values, want %d users x %d features", len(m.Values), n, d)
	}
	if len(seed) == 0 || n == 0 {
		return nil, ErrEmptySeed
	}

	isSeed := make([]bool, n)
	st, err := columnStats(m, seed, isSeed)
	if err != nil {
		return nil, err
	}
	if st.seedCount == 0 {
		return nil, ErrEmptySeed
	}
	candidates := n - st.seedCount
	if candidates == 0 {
		return []Scored{}, nil
	}

	// Standardisation parameters and centroid.
	mean := st.mean
	inv := make([]float64, d)    // 1/stddev, 0 for zero-variance columns
	centre := make([]float64, d) // seed centroid in z-space
	var cnorm2 float64
	for j := range d {
		sd := math.Sqrt(st.m2[j] / float64(n))
		if !(sd > varianceEpsilon*math.Max(1, math.Abs(mean[j]))) {
			continue
		}
		inv[j] = 1 / sd
		centre[j] = (st.seedSum[j]/float64(st.seedCount) - mean[j]) * inv[j]
		cnorm2 += centre[j] * centre[j]
	}
	cnorm := math.Sqrt(cnorm2)

	sims := make([]float64, n)
	similarities(m, isSeed, mean, inv, centre, cnorm, sims)

	limit := o.maxSize()
	if o.Size > 0 {
		limit = min(limit, o.Size)
	}
	idx := selectTop(m.Users, sims, isSeed, o.MinSimilarity, o.Size == 0, limit)

	out := make([]Scored, len(idx))
	greater := 0 // number of candidates with a strictly greater similarity
	for k, i := range idx {
		if k > 0 && sims[i] != sims[idx[k-1]] {
			// idx is a prefix of the total order (sim desc, id asc), so
			// every candidate with a greater similarity precedes position k.
			greater = k
		}
		pct := float64(candidates-greater) / float64(candidates) * 100
		out[k] = Scored{
			UserID:     m.Users[i],
			Similarity: sims[i],
			Percentile: math.Round(pct*100) / 100,
		}
	}
	return out, nil
}

// stats are the merged results of the first pass.
type stats struct {
	mean, m2  []float64 // per column, of transformed values, over all users
	seedSum   []float64 // per column, sum of transformed values of seed users
	seedCount int
}

// chunkStats is the first-pass result of one chunk.
type chunkStats struct {
	rows      int
	mean, m2  []float64
	seedSum   []float64
	seedCount int
}

// transform is sign(x)*log1p(|x|).
func transform(x float64) float64 {
	switch {
	case x > 0:
		return math.Log1p(x)
	case x < 0:
		return -math.Log1p(-x)
	}
	return 0
}

// parallelChunks runs fn for every chunk of rows [lo, hi) on up to
// GOMAXPROCS goroutines. fn must only write state owned by its chunk.
func parallelChunks(n int, fn func(c, lo, hi int)) {
	chunks := (n + chunkRows - 1) / chunkRows
	workers := min(runtime.GOMAXPROCS(0), chunks)
	if workers <= 1 {
		for c := range chunks {
			fn(c, c*chunkRows, min(n, (c+1)*chunkRows))
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				c := int(next.Add(1) - 1)
				if c >= chunks {
					return
				}
				fn(c, c*chunkRows, min(n, (c+1)*chunkRows))
			}
		})
	}
	wg.Wait()
}

// columnStats computes, per column, the mean and sum of squared deviations
// of the transformed values over all users, and the sum of the transformed
// values of seed users; it fills isSeed.
func columnStats(m *Matrix, seed map[string]struct{}, isSeed []bool) (stats, error) {
	d := len(m.Features.Names)
	n := len(m.Users)
	chunks := (n + chunkRows - 1) / chunkRows
	parts := make([]chunkStats, chunks)
	// One backing array for every chunk's accumulators.
	buf := make([]float64, chunks*3*d)
	for c := range parts {
		b := buf[c*3*d : (c+1)*3*d]
		parts[c] = chunkStats{mean: b[:d:d], m2: b[d : 2*d : 2*d], seedSum: b[2*d:]}
	}

	parallelChunks(n, func(c, lo, hi int) {
		p := &parts[c]
		mean, m2, ss := p.mean, p.m2, p.seedSum
		seeds := 0
		for i := lo; i < hi; i++ {
			row := m.Values[i*d : i*d+d : i*d+d]
			_, in := seed[m.Users[i]]
			isSeed[i] = in
			// Welford's online update, 1/k computed once per row.
			rk := 1 / float64(i-lo+1)
			if in {
				seeds++
				for j, x := range row {
					t := transform(x)
					ss[j] += t
					delta := t - mean[j]
					mean[j] += delta * rk
					m2[j] += delta * (t - mean[j])
				}
				continue
			}
			for j, x := range row {
				t := transform(x)
				delta := t - mean[j]
				mean[j] += delta * rk
				m2[j] += delta * (t - mean[j])
			}
		}
		p.rows = hi - lo
		p.seedCount = seeds
	})

	// Merge the chunks in order (Chan et al. parallel variance).
	st := stats{mean: make([]float64, d), m2: make([]float64, d), seedSum: make([]float64, d)}
	rows := 0
	for c := range parts {
		p := &parts[c]
		na, nb := float64(rows), float64(p.rows)
		nt := na + nb
		for j := range d {
			delta := p.mean[j] - st.mean[j]
			st.mean[j] += delta * nb / nt
			st.m2[j] += p.m2[j] + delta*delta*na*nb/nt
			st.seedSum[j] += p.seedSum[j]
		}
		rows += p.rows
		st.seedCount += p.seedCount
	}
	for j := range d {
		if math.IsNaN(st.mean[j]) || math.IsInf(st.mean[j], 0) ||
			math.IsNaN(st.m2[j]) || math.IsInf(st.m2[j], 0) {
			return stats{}, fmt.Errorf("lookalike: feature %q has values that are not finite", m.Features.Names[j])
		}
	}
	return st, nil
}

// similarities fills sims[i] with the cosine similarity of every non-seed
// row to the centroid (seed rows are left at 0 and never selected).
func similarities(m *Matrix, isSeed []bool, mean, inv, centre []float64, cnorm float64, sims []float64) {
	d := len(mean)
	if cnorm == 0 {
		return // zero centroid: every similarity is 0
	}
	// Only the informative columns matter; zero-variance ones contribute 0.
	cols := make([]int, 0, d)
	for j := range d {
		if inv[j] != 0 {
			cols = append(cols, j)
		}
	}
	parallelChunks(len(m.Users), func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			if isSeed[i] {
				continue
			}
			row := m.Values[i*d : i*d+d : i*d+d]
			var dot, norm2 float64
			for _, j := range cols {
				z := (transform(row[j]) - mean[j]) * inv[j]
				dot += z * centre[j]
				norm2 += z * z
			}
			if norm2 == 0 {
				continue
			}
			s := dot / (math.Sqrt(norm2) * cnorm)
			// Rounding can step just outside [-1, 1]; +0 also turns -0 into 0.
			sims[i] = math.Max(-1, math.Min(1, s)) + 0
		}
	})
}

// before reports whether candidate a ranks before b: higher similarity
// first, then lower user id, then lower row index (for duplicate ids).
func before(users []string, sims []float64, a, b int32) bool {
	if sims[a] != sims[b] {
		return sims[a] > sims[b]
	}
	if c := strings.Compare(users[a], users[b]); c != 0 {
		return c < 0
	}
	return a < b
}

// selectTop returns, in rank order, the row indices of at most limit
// non-seed candidates (only those with similarity >= minSim when useMin).
func selectTop(users []string, sims []float64, isSeed []bool, minSim float64, useMin bool, limit int) []int32 {
	n := len(users)
	cmp := func(a, b int32) int {
		if before(users, sims, a, b) {
			return -1
		}
		if a == b {
			return 0
		}
		return 1
	}

	// Count the eligible candidates to decide between a full sort and a
	// bounded heap.
	eligible := 0
	for i := range n {
		if !isSeed[i] && (!useMin || sims[i] >= minSim) {
			eligible++
		}
	}
	if limit <= 0 || eligible == 0 {
		return []int32{}
	}

	if limit*4 >= eligible {
		idx := make([]int32, 0, eligible)
		for i := range n {
			if !isSeed[i] && (!useMin || sims[i] >= minSim) {
				idx = append(idx, int32(i))
			}
		}
		slices.SortFunc(idx, cmp)
		return idx[:min(limit, len(idx)):min(limit, len(idx))]
	}

	// Bounded heap: h[0] is the worst of the current best `limit`.
	h := make([]int32, 0, limit)
	worse := func(a, b int32) bool { return before(users, sims, b, a) }
	for i := range n {
		if isSeed[i] || (useMin && sims[i] < minSim) {
			continue
		}
		c := int32(i)
		if len(h) < limit {
			h = append(h, c)
			// sift up
			k := len(h) - 1
			for k > 0 {
				p := (k - 1) / 2
				if !worse(h[k], h[p]) {
					break
				}
				h[k], h[p] = h[p], h[k]
				k = p
			}
			continue
		}
		if !before(users, sims, c, h[0]) {
			continue
		}
		h[0] = c
		siftDown(h, 0, worse)
	}
	slices.SortFunc(h, cmp)
	return h
}

func siftDown(h []int32, k int, worse func(a, b int32) bool) {
	n := len(h)
	for {
		l := 2*k + 1
		if l >= n {
			return
		}
		w := l
		if r := l + 1; r < n && worse(h[r], h[l]) {
			w = r
		}
		if !worse(h[w], h[k]) {
			return
		}
		h[k], h[w] = h[w], h[k]
		k = w
	}
}
