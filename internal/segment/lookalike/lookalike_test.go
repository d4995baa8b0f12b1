package lookalike

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// clusterPopulation builds nA users of cluster A ("a0000"...) - frequent,
// big-spending, recent - and nB users of cluster B ("b0000"...) - rare,
// small, stale - interleaved in the matrix.
func clusterPopulation(t testing.TB, nA, nB int) *Matrix {
	t.Helper()
	names := []string{"count:order_completed", "sum:order_completed.amount", "count:page_view", "recency_days:page_view", "count:support_ticket"}
	r := rand.New(rand.NewPCG(1, 2))
	m := NewMatrix(names, nA+nB)
	add := func(id string, row []float64) {
		if err := m.Add(id, row); err != nil {
			t.Fatalf("add %s: %v", id, err)
		}
	}
	for i := range max(nA, nB) {
		if i < nA {
			add(fmt.Sprintf("a%04d", i), []float64{
				40 + r.Float64()*20, 4000 + r.Float64()*2000, 300 + r.Float64()*100, 1 + r.Float64()*3, r.Float64() * 2,
			})
		}
		if i < nB {
			add(fmt.Sprintf("b%04d", i), []float64{
				r.Float64() * 2, r.Float64() * 30, 5 + r.Float64()*10, 60 + r.Float64()*60, 3 + r.Float64()*5,
			})
		}
	}
	return m
}

func seedOf(ids ...string) map[string]struct{} {
	s := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		s[id] = struct{}{}
	}
	return s
}

func ids(res []Scored) []string {
	out := make([]string, len(res))
	for i, r := range res {
		out[i] = r.UserID
	}
	return out
}

// checkOrder asserts the result is sorted by similarity desc then id asc,
// with similarities in [-1,1] and percentiles in [0,100], non-increasing.
func checkOrder(t *testing.T, res []Scored) {
	t.Helper()
	for k, r := range res {
		if r.Similarity < -1 || r.Similarity > 1 || math.IsNaN(r.Similarity) {
			t.Fatalf("res[%d] similarity %v out of [-1,1]", k, r.Similarity)
		}
		if r.Percentile < 0 || r.Percentile > 100 {
			t.Fatalf("res[%d] percentile %v out of [0,100]", k, r.Percentile)
		}
		if k == 0 {
			continue
		}
		p := res[k-1]
		if p.Similarity < r.Similarity || (p.Similarity == r.Similarity && p.UserID >= r.UserID) {
			t.Fatalf("res[%d]=%+v not after res[%d]=%+v", k, r, k-1, p)
		}
		if p.Percentile < r.Percentile {
			t.Fatalf("percentile increases from res[%d]=%+v to res[%d]=%+v", k-1, p, k, r)
		}
		if p.Similarity == r.Similarity && p.Percentile != r.Percentile {
			t.Fatalf("tied similarities with different percentiles: %+v %+v", p, r)
		}
	}
}

func TestScoreClusters(t *testing.T) {
	const nA, nB = 300, 500
	m := clusterPopulation(t, nA, nB)
	seedIDs := make([]string, 0, 30)
	for i := range 30 {
		seedIDs = append(seedIDs, fmt.Sprintf("a%04d", i*7))
	}
	seed := seedOf(seedIDs...)
	candA := nA - len(seedIDs)

	tests := []struct {
		name    string
		opts    Options
		wantLen int
		allA    bool // every result must be from cluster A
	}{
		{name: "top 50 all from A", opts: Options{Size: 50}, wantLen: 50, allA: true},
		{name: "top exactly cluster A", opts: Options{Size: candA}, wantLen: candA, allA: true},
		{name: "everyone, A first", opts: Options{Size: nA + nB}, wantLen: nA + nB - len(seedIDs)},
		{name: "min similarity keeps A only", opts: Options{MinSimilarity: 0.5}, wantLen: candA, allA: true},
		{name: "min similarity capped by max size", opts: Options{MinSimilarity: 0.5, MaxSize: 10}, wantLen: 10, allA: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Score(m, seed, tt.opts)
			if err != nil {
				t.Fatalf("score: %v", err)
			}
			if len(res) != tt.wantLen {
				t.Fatalf("got %d results, want %d", len(res), tt.wantLen)
			}
			checkOrder(t, res)
			seenB := false
			for k, r := range res {
				if _, in := seed[r.UserID]; in {
					t.Fatalf("seed user %s returned at %d", r.UserID, k)
				}
				isA := strings.HasPrefix(r.UserID, "a")
				if tt.allA && !isA {
					t.Fatalf("res[%d]=%s is not from cluster A", k, r.UserID)
				}
				if isA && seenB {
					t.Fatalf("cluster A user %s ranked after a cluster B user", r.UserID)
				}
				if !isA {
					seenB = true
				}
				if isA && r.Similarity < 0.5 {
					t.Fatalf("cluster A user %s has low similarity %v", r.UserID, r.Similarity)
				}
				if !isA && r.Similarity > 0 {
					t.Fatalf("cluster B user %s has positive similarity %v", r.UserID, r.Similarity)
				}
			}
		})
	}
}

func TestScoreExcludesSeed(t *testing.T) {
	m := clusterPopulation(t, 50, 50)
	seed := seedOf("a0001", "a0002", "b0003", "b0004")
	res, err := Score(m, seed, Options{Size: 1000})
	if err != nil {
		t.Fatalf("score: %v", err)
	}
	if len(res) != 100-len(seed) {
		t.Fatalf("got %d results, want every non-seed user (%d)", len(res), 100-len(seed))
	}
	for _, r := range res {
		if _, in := seed[r.UserID]; in {
			t.Fatalf("seed user %s returned", r.UserID)
		}
	}
}

func TestScoreCuts(t *testing.T) {
	m := randomMatrix(2000, 8, 7)
	seed := randomSeed(m, 100, 8)
	all, err := Score(m, seed, Options{Size: len(m.Users)})
	if err != nil {
		t.Fatalf("score all: %v", err)
	}
	if len(all) != len(m.Users)-len(seed) {
		t.Fatalf("got %d results, want %d", len(all), len(m.Users)-len(seed))
	}
	checkOrder(t, all)
	countAtLeast := func(s float64) int {
		n := 0
		for _, r := range all {
			if r.Similarity >= s {
				n++
			}
		}
		return n
	}

	tests := []struct {
		name    string
		opts    Options
		wantLen int
	}{
		{name: "size 1", opts: Options{Size: 1}, wantLen: 1},
		{name: "size 10 uses heap", opts: Options{Size: 10}, wantLen: 10},
		{name: "size 600 uses sort", opts: Options{Size: 600}, wantLen: 600},
		{name: "size above candidates", opts: Options{Size: 1_000_000}, wantLen: len(all)},
		{name: "size capped by max size", opts: Options{Size: 500, MaxSize: 20}, wantLen: 20},
		{name: "min similarity 0.2", opts: Options{MinSimilarity: 0.2}, wantLen: countAtLeast(0.2)},
		{name: "min similarity 0.05", opts: Options{MinSimilarity: 0.05}, wantLen: countAtLeast(0.05)},
		{name: "min similarity 1 keeps nothing", opts: Options{MinSimilarity: 1}, wantLen: countAtLeast(1)},
		{name: "min similarity capped by max size", opts: Options{MinSimilarity: 0.05, MaxSize: 7}, wantLen: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Score(m, seed, tt.opts)
			if err != nil {
				t.Fatalf("score: %v", err)
			}
			if len(res) != tt.wantLen {
				t.Fatalf("got %d results, want %d", len(res), tt.wantLen)
			}
			// Every cut is a prefix of the full ranking, percentiles included.
			if !reflect.DeepEqual(res, all[:len(res)]) {
				t.Fatalf("result is not a prefix of the full ranking")
			}
			if tt.opts.MinSimilarity > 0 {
				for _, r := range res {
					if r.Similarity < tt.opts.MinSimilarity {
						t.Fatalf("%s has similarity %v < %v", r.UserID, r.Similarity, tt.opts.MinSimilarity)
					}
				}
			}
		})
	}
	if countAtLeast(0.2) == 0 || countAtLeast(0.2) == len(all) {
		t.Fatalf("min similarity 0.2 does not cut the population (%d of %d)", countAtLeast(0.2), len(all))
	}
}

func TestScoreTiesByUserID(t *testing.T) {
	names := []string{"f1", "f2"}
	m := NewMatrix(names, 8)
	rows := []struct {
		id  string
		row []float64
	}{
		{"seed1", []float64{10, 0}},
		{"u3", []float64{5, 1}},
		{"u1", []float64{5, 1}},
		{"x9", []float64{0, 5}},
		{"u2", []float64{5, 1}},
		{"a0", []float64{0, 5}},
		{"seed2", []float64{10, 0}},
	}
	for _, r := range rows {
		if err := m.Add(r.id, r.row); err != nil {
			t.Fatalf("add: %v", err)
		}
	}
	tests := []struct {
		name string
		opts Options
		want []string
	}{
		{name: "all", opts: Options{Size: 10}, want: []string{"u1", "u2", "u3", "a0", "x9"}},
		{name: "cut inside tie group keeps lowest ids", opts: Options{Size: 2}, want: []string{"u1", "u2"}},
		{name: "min similarity", opts: Options{MinSimilarity: 0.1}, want: []string{"u1", "u2", "u3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Score(m, seedOf("seed1", "seed2"), tt.opts)
			if err != nil {
				t.Fatalf("score: %v", err)
			}
			if got := ids(res); !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			checkOrder(t, res)
			if res[0].Similarity != res[1].Similarity {
				t.Fatalf("expected tied similarities, got %v and %v", res[0].Similarity, res[1].Similarity)
			}
			// u1, u2, u3 tie at the top: 5 candidates, all <= them.
			if res[0].Percentile != 100 || res[1].Percentile != 100 {
				t.Fatalf("tied top percentiles = %v, %v, want 100", res[0].Percentile, res[1].Percentile)
			}
		})
	}
}

func TestScoreZeroVarianceFeatures(t *testing.T) {
	base := randomMatrix(500, 4, 3)
	seed := randomSeed(base, 25, 4)

	// Same data with constant columns inserted (including a big constant,
	// whose transform would give rounding noise in a naive variance).
	wide := NewMatrix([]string{"const0", "f0", "const7", "f1", "f2", "constbig", "f3"}, len(base.Users))
	for i, id := range base.Users {
		r := base.Values[i*4 : i*4+4]
		if err := wide.Add(id, []float64{0, r[0], 7, r[1], r[2], 123456789.123, r[3]}); err != nil {
			t.Fatalf("add: %v", err)
		}
	}
	want, err := Score(base, seed, Options{Size: 100})
	if err != nil {
		t.Fatalf("score base: %v", err)
	}
	got, err := Score(wide, seed, Options{Size: 100})
	if err != nil {
		t.Fatalf("score wide: %v", err)
	}
	if !slices.Equal(ids(got), ids(want)) {
		t.Fatalf("constant columns changed the ranking")
	}
	for k := range got {
		if math.Abs(got[k].Similarity-want[k].Similarity) > 1e-12 {
			t.Fatalf("res[%d] similarity %v, want %v", k, got[k].Similarity, want[k].Similarity)
		}
	}

	t.Run("only constant columns", func(t *testing.T) {
		m := NewMatrix([]string{"c1", "c2"}, 4)
		for _, id := range []string{"s", "b", "a", "c"} {
			if err := m.Add(id, []float64{3, -2}); err != nil {
				t.Fatalf("add: %v", err)
			}
		}
		res, err := Score(m, seedOf("s"), Options{Size: 10})
		if err != nil {
			t.Fatalf("score: %v", err)
		}
		want := []Scored{{"a", 0, 100}, {"b", 0, 100}, {"c", 0, 100}}
		if !reflect.DeepEqual(res, want) {
			t.Fatalf("got %+v, want %+v", res, want)
		}
	})
}

func TestScoreEmptySeed(t *testing.T) {
	m := clusterPopulation(t, 10, 10)
	tests := []struct {
		name string
		m    *Matrix
		seed map[string]struct{}
	}{
		{name: "nil seed", m: m, seed: nil},
		{name: "empty seed", m: m, seed: map[string]struct{}{}},
		{name: "seed users all absent", m: m, seed: seedOf("ghost", "nobody")},
		{name: "empty matrix", m: NewMatrix([]string{"f"}, 0), seed: seedOf("a0001")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Score(tt.m, tt.seed, Options{Size: 5})
			if !errors.Is(err, ErrEmptySeed) {
				t.Fatalf("got err %v, want ErrEmptySeed", err)
			}
			if res != nil {
				t.Fatalf("got results %v with error", res)
			}
		})
	}
}

func TestScoreIgnoresAbsentSeedUsers(t *testing.T) {
	m := clusterPopulation(t, 40, 40)
	want, err := Score(m, seedOf("a0001", "a0002"), Options{Size: 30})
	if err != nil {
		t.Fatalf("score: %v", err)
	}
	got, err := Score(m, seedOf("a0001", "ghost", "a0002", "b9999"), Options{Size: 30})
	if err != nil {
		t.Fatalf("score with absent seed users: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("absent seed users changed the result")
	}
}

func TestScoreAllUsersInSeed(t *testing.T) {
	m := clusterPopulation(t, 3, 0)
	res, err := Score(m, seedOf("a0000", "a0001", "a0002"), Options{Size: 5})
	if err != nil {
		t.Fatalf("score: %v", err)
	}
	if len(res) != 0 {
		t.Fatalf("got %d results, want none", len(res))
	}
}

func TestScoreRejectsBadInput(t *testing.T) {
	good := clusterPopulation(t, 5, 5)
	tests := []struct {
		name string
		m    *Matrix
		opts Options
		want string
	}{
		{name: "invalid options", m: good, opts: Options{}, want: "one of size or min similarity"},
		{name: "nil matrix", m: nil, opts: Options{Size: 1}, want: "nil matrix"},
		{name: "values length mismatch", m: &Matrix{Features: Features{Names: []string{"a", "b"}}, Users: []string{"u"}, Values: []float64{1}}, opts: Options{Size: 1}, want: "matrix has 1 values"},
		{name: "non-finite value set directly", m: &Matrix{Features: Features{Names: []string{"a"}}, Users: []string{"s", "u"}, Values: []float64{1, math.Inf(1)}}, opts: Options{Size: 1}, want: "not finite"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Score(tt.m, seedOf("s", "a0001"), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got err %v, want one containing %q", err, tt.want)
			}
			if errors.Is(err, ErrEmptySeed) {
				t.Fatalf("bad input reported as ErrEmptySeed")
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "size", opts: Options{Size: 10}},
		{name: "size with max size", opts: Options{Size: 10, MaxSize: 5}},
		{name: "min similarity", opts: Options{MinSimilarity: 0.8}},
		{name: "min similarity 1", opts: Options{MinSimilarity: 1}},
		{name: "min similarity with max size", opts: Options{MinSimilarity: 0.5, MaxSize: 100}},
		{name: "both zero", opts: Options{}, wantErr: "one of size or min similarity must be set"},
		{name: "only max size", opts: Options{MaxSize: 10}, wantErr: "one of size or min similarity must be set"},
		{name: "both set", opts: Options{Size: 10, MinSimilarity: 0.5}, wantErr: "mutually exclusive"},
		{name: "negative size", opts: Options{Size: -1}, wantErr: "size must be positive"},
		{name: "negative min similarity", opts: Options{MinSimilarity: -0.1}, wantErr: "min similarity must be in (0, 1]"},
		{name: "min similarity above 1", opts: Options{MinSimilarity: 1.01}, wantErr: "min similarity must be in (0, 1]"},
		{name: "min similarity NaN", opts: Options{MinSimilarity: math.NaN()}, wantErr: "min similarity must be in (0, 1]"},
		{name: "negative max size", opts: Options{Size: 1, MaxSize: -1}, wantErr: "max size must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got err %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestMatrixAdd(t *testing.T) {
	tests := []struct {
		name    string
		row     []float64
		wantErr string
	}{
		{name: "valid", row: []float64{1, -2.5, 0}},
		{name: "NaN", row: []float64{1, math.NaN(), 0}, wantErr: `feature "sum:x" is not finite`},
		{name: "+Inf", row: []float64{math.Inf(1), 0, 0}, wantErr: `feature "count:x" is not finite`},
		{name: "-Inf", row: []float64{0, 0, math.Inf(-1)}, wantErr: `feature "recency_days:x" is not finite`},
		{name: "too short", row: []float64{1, 2}, wantErr: "has 2 values, want 3"},
		{name: "too long", row: []float64{1, 2, 3, 4}, wantErr: "has 4 values, want 3"},
		{name: "nil row", row: nil, wantErr: "has 0 values, want 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMatrix([]string{"count:x", "sum:x", "recency_days:x"}, 1)
			err := m.Add("u1", tt.row)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if m.Len() != 1 || !slices.Equal(m.Values, tt.row) || m.Users[0] != "u1" {
					t.Fatalf("row not stored: users=%v values=%v", m.Users, m.Values)
				}
				tt.row[0] = 99 // the matrix must hold a copy
				if m.Values[0] == 99 {
					t.Fatalf("matrix aliases the caller's row")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got err %v, want one containing %q", err, tt.wantErr)
			}
			if m.Len() != 0 || len(m.Values) != 0 {
				t.Fatalf("rejected row was stored: users=%v values=%v", m.Users, m.Values)
			}
		})
	}
}

func TestNewMatrixCopiesNames(t *testing.T) {
	names := []string{"a", "b"}
	m := NewMatrix(names, 10)
	names[0] = "changed"
	if m.Features.Names[0] != "a" {
		t.Fatalf("matrix aliases the caller's names")
	}
	if cap(m.Users) != 10 || cap(m.Values) != 20 {
		t.Fatalf("capacity users=%d values=%d, want 10 and 20", cap(m.Users), cap(m.Values))
	}
}

func TestScorePercentile(t *testing.T) {
	t.Run("exact values", func(t *testing.T) {
		// Four candidates from close to the seed to far from it: four
		// distinct similarities, so the percentiles are 100, 75, 50 and 25.
		m := NewMatrix([]string{"f1", "f2"}, 8)
		add := func(id string, f1, f2 float64) {
			if err := m.Add(id, []float64{f1, f2}); err != nil {
				t.Fatalf("add: %v", err)
			}
		}
		add("s", 100, 0)
		add("c1", 100, 1) // close to the seed
		add("c2", 50, 50) // in between
		add("c3", 1, 100) // far
		add("c4", 0, 200) // farthest
		res, err := Score(m, seedOf("s"), Options{Size: 4})
		if err != nil {
			t.Fatalf("score: %v", err)
		}
		if got, want := ids(res), []string{"c1", "c2", "c3", "c4"}; !slices.Equal(got, want) {
			t.Fatalf("order %v, want %v", got, want)
		}
		var pcts []float64
		for _, r := range res {
			pcts = append(pcts, r.Percentile)
		}
		if want := []float64{100, 75, 50, 25}; !slices.Equal(pcts, want) {
			t.Fatalf("percentiles %v, want %v", pcts, want)
		}
	})

	t.Run("monotonic and rounded", func(t *testing.T) {
		m := randomMatrix(3001, 6, 11)
		seed := randomSeed(m, 150, 12)
		res, err := Score(m, seed, Options{Size: 3001})
		if err != nil {
			t.Fatalf("score: %v", err)
		}
		checkOrder(t, res)
		n := len(res)
		for k, r := range res {
			if r.Percentile != math.Round(r.Percentile*100)/100 {
				t.Fatalf("percentile %v not rounded to 2 decimals", r.Percentile)
			}
			if k < n-1 && r.Similarity > res[k+1].Similarity && r.Percentile < res[k+1].Percentile {
				t.Fatalf("percentile not monotonic at %d", k)
			}
		}
		if res[0].Percentile != 100 {
			t.Fatalf("top percentile %v, want 100", res[0].Percentile)
		}
		if want := math.Round(100/float64(n)*100) / 100; res[n-1].Percentile != want {
			t.Fatalf("bottom percentile %v, want %v", res[n-1].Percentile, want)
		}
	})
}

// reference is a direct, allocation-happy implementation of the documented
// method, used to check Score.
func reference(m *Matrix, seed map[string]struct{}) []Scored {
	d, n := len(m.Features.Names), len(m.Users)
	z := make([][]float64, n)
	for i := range n {
		z[i] = make([]float64, d)
		for j := range d {
			x := m.Values[i*d+j]
			z[i][j] = math.Copysign(math.Log1p(math.Abs(x)), x)
		}
	}
	for j := range d {
		var mean, v float64
		for i := range n {
			mean += z[i][j]
		}
		mean /= float64(n)
		for i := range n {
			v += (z[i][j] - mean) * (z[i][j] - mean)
		}
		sd := math.Sqrt(v / float64(n))
		for i := range n {
			if sd < 1e-9 {
				z[i][j] = 0
			} else {
				z[i][j] = (z[i][j] - mean) / sd
			}
		}
	}
	c := make([]float64, d)
	ns := 0
	for i, id := range m.Users {
		if _, in := seed[id]; in {
			ns++
			for j := range d {
				c[j] += z[i][j]
			}
		}
	}
	for j := range d {
		c[j] /= float64(ns)
	}
	var out []Scored
	for i, id := range m.Users {
		if _, in := seed[id]; in {
			continue
		}
		var dot, a, b float64
		for j := range d {
			dot += z[i][j] * c[j]
			a += z[i][j] * z[i][j]
			b += c[j] * c[j]
		}
		s := 0.0
		if a > 0 && b > 0 {
			s = dot / math.Sqrt(a*b)
		}
		out = append(out, Scored{UserID: id, Similarity: s})
	}
	for k := range out {
		le := 0
		for _, o := range out {
			if o.Similarity <= out[k].Similarity {
				le++
			}
		}
		out[k].Percentile = math.Round(float64(le)/float64(len(out))*100*100) / 100
	}
	slices.SortFunc(out, func(a, b Scored) int {
		if a.Similarity != b.Similarity {
			if a.Similarity > b.Similarity {
				return -1
			}
			return 1
		}
		return strings.Compare(a.UserID, b.UserID)
	})
	return out
}

func TestScoreMatchesReference(t *testing.T) {
	tests := []struct {
		name     string
		n, d     int
		seedSize int
	}{
		{name: "small", n: 50, d: 3, seedSize: 5},
		{name: "medium", n: 2500, d: 10, seedSize: 100},
		{name: "several chunks", n: 3*chunkRows + 17, d: 5, seedSize: 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := randomMatrix(tt.n, tt.d, uint64(tt.n))
			seed := randomSeed(m, tt.seedSize, uint64(tt.d))
			want := reference(m, seed)
			got, err := Score(m, seed, Options{Size: tt.n})
			if err != nil {
				t.Fatalf("score: %v", err)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d results, want %d", len(got), len(want))
			}
			for k := range got {
				if got[k].UserID != want[k].UserID ||
					math.Abs(got[k].Similarity-want[k].Similarity) > 1e-9 ||
					got[k].Percentile != want[k].Percentile {
					t.Fatalf("res[%d] = %+v, want %+v", k, got[k], want[k])
				}
			}
		})
	}
}

func TestScoreDeterministic(t *testing.T) {
	m := randomMatrix(5*chunkRows+123, 6, 99)
	seed := randomSeed(m, 500, 100)
	before := slices.Clone(m.Values)

	var results [][]Scored
	for _, procs := range []int{1, 2, 3, 8} {
		prev := runtime.GOMAXPROCS(procs)
		res, err := Score(m, seed, Options{Size: 1000})
		runtime.GOMAXPROCS(prev)
		if err != nil {
			t.Fatalf("score with GOMAXPROCS=%d: %v", procs, err)
		}
		results = append(results, res)
	}
	for k := 1; k < len(results); k++ {
		if !reflect.DeepEqual(results[k], results[0]) {
			t.Fatalf("run %d differs from run 0", k)
		}
	}
	if !slices.Equal(m.Values, before) {
		t.Fatalf("Score modified the matrix")
	}
	// The heap path (Size << n) matches the full sort path.
	full, err := Score(m, seed, Options{Size: len(m.Users)})
	if err != nil {
		t.Fatalf("score: %v", err)
	}
	if !reflect.DeepEqual(results[0], full[:1000]) {
		t.Fatalf("heap selection differs from full sort")
	}
}

// randomMatrix builds n users x d warehouse-like features: sparse heavy-tailed
// counts and sums, recencies, and a few negative values (refunds).
func randomMatrix(n, d int, seed uint64) *Matrix {
	r := rand.New(rand.NewPCG(seed, 42))
	names := make([]string, d)
	for j := range d {
		switch j % 3 {
		case 0:
			names[j] = fmt.Sprintf("count:event_%d", j)
		case 1:
			names[j] = fmt.Sprintf("sum:event_%d.amount", j)
		default:
			names[j] = fmt.Sprintf("recency_days:event_%d", j)
		}
	}
	m := NewMatrix(names, n)
	row := make([]float64, d)
	for i := range n {
		// A latent "engagement" drives every feature so users are correlated.
		eng := r.ExpFloat64()
		for j := range d {
			switch {
			case r.Float64() < 0.3:
				row[j] = 0
			case j%3 == 0:
				row[j] = math.Floor(eng * r.ExpFloat64() * 20)
			case j%3 == 1:
				row[j] = eng * r.ExpFloat64() * 300
				if r.Float64() < 0.05 {
					row[j] = -row[j]
				}
			default:
				row[j] = math.Floor(r.Float64() * 365 / (1 + eng))
			}
		}
		if err := m.Add(fmt.Sprintf("user-%08d", i), row); err != nil {
			panic(err) // rows are finite and of the right length by construction
		}
	}
	return m
}

// randomSeed picks k distinct users, preferring engaged ones (first feature
// high) so the centroid is not near zero.
func randomSeed(m *Matrix, k int, seed uint64) map[string]struct{} {
	r := rand.New(rand.NewPCG(seed, 7))
	d := len(m.Features.Names)
	out := make(map[string]struct{}, k)
	for len(out) < k {
		i := r.IntN(len(m.Users))
		if m.Values[i*d] > 10 || r.Float64() < 0.1 {
			out[m.Users[i]] = struct{}{}
		}
	}
	return out
}

var bench1M = sync.OnceValues(func() (*Matrix, map[string]struct{}) {
	m := randomMatrix(1_000_000, 24, 2024)
	return m, randomSeed(m, 10_000, 2025)
})

func BenchmarkScore1M(b *testing.B) {
	m, seed := bench1M()
	b.ReportAllocs()
	for b.Loop() {
		res, err := Score(m, seed, Options{Size: 50_000})
		if err != nil {
			b.Fatal(err)
		}
		if len(res) != 50_000 {
			b.Fatalf("got %d results", len(res))
		}
	}
}
