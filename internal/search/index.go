// Package search is semantic product search (GET /api/ai-pages/query, and the page generation
// that searches for its products): the query is embedded with the AI provider's embedding model
// and compared, by cosine similarity, with the product vectors the catalogue stores on save
// (product_embeddings).
//
// The comparison runs behind Index, whose one implementation, Embedded, serves dev and production
// alike: it keeps each tenant's vectors in the process (the API's, and the worker's for page
// generation), loaded from Postgres on first use, kept current from the embedding writes (a
// trigger logs every change with a per-tenant sequence and notifies NotifyChannel; the index
// applies the changes since the last it saw) and scanned exactly on every core. There is no
// pgvector or BigQuery VECTOR_SEARCH adapter.
package search

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/store"
)

// Index finds the products whose vectors are closest to a query vector.
type Index interface {
	// TopK returns the k products of the tenant whose vectors of the embedding model are most
	// similar (cosine) to query, best first, ties by product id; only products allow admits
	// (nil: all). Vectors of another model or size are not compared. A zero query matches
	// nothing.
	TopK(ctx context.Context, tenantID int64, model string, query []float32, k int, allow func(productID int64) bool) ([]Match, error)
}

// NotifyChannel is the channel the product_embeddings trigger notifies (payload: the tenant id)
// when a transaction that changed the tenant's embeddings commits.
const NotifyChannel = "product_embedding_changes"

// IndexConfig tunes Embedded; zero values take the defaults.
type IndexConfig struct {
	// IdleAfter: a tenant's vectors not searched this long are dropped (default 30 minutes).
	IdleAfter time.Duration
	// MaxBytes is the memory budget of the vectors held across tenants, in bytes of heap (0:
	// no bound): the int8 codes, ids and bounds, residentPerVector each; the float32 values are
	// in files under Dir, read through the page cache. Loading a tenant drops the least recently
	// searched others first until it fits; a tenant larger than the whole budget is refused
	// (CodeIndexTooLarge) rather than loaded.
	MaxBytes int64
	// Dir holds the sets' float32 files (unlinked at once; "" for the temporary directory).
	Dir string
	// LoadWait: how long a search that must not wait (the HTTP endpoint's, see Service.Query)
	// waits for its tenant's load before answering 503 CodeIndexLoading (default 50 ms). Other
	// searches (page generation) wait for the load.
	LoadWait time.Duration
	// PollEvery: how often the listener also compares each loaded tenant's change sequence
	// with Postgres, a safety net for lost notifications (default 10 s).
	PollEvery time.Duration
	// PruneEvery and PruneAfter: how often change records of deleted embeddings older than
	// PruneAfter are deleted (defaults 1 hour, 24 hours). A tenant that last synced before a
	// pruned record is loaded again in full.
	PruneEvery, PruneAfter time.Duration
	// Workers: goroutines per scan (default GOMAXPROCS).
	Workers int
	// LoadTimeout bounds one full load of a tenant (default 10 minutes).
	LoadTimeout time.Duration
}

func (c *IndexConfig) defaults() {
	if c.IdleAfter <= 0 {
		c.IdleAfter = 30 * time.Minute
	}
	if c.PollEvery <= 0 {
		c.PollEvery = 10 * time.Second
	}
	if c.PruneEvery <= 0 {
		c.PruneEvery = time.Hour
	}
	if c.PruneAfter <= 0 {
		c.PruneAfter = 24 * time.Hour
	}
	if c.LoadTimeout <= 0 {
		c.LoadTimeout = 10 * time.Minute
	}
	if c.LoadWait <= 0 {
		c.LoadWait = 50 * time.Millisecond
	}
}

// Codes of the 503s the index answers (kind errs.ErrUnavailable).
const (
	// CodeIndexLoading: the tenant's vectors are loading in the background; try again after
	// Retry-After.
	CodeIndexLoading = "search_index_loading"
	// CodeIndexTooLarge: the tenant's vectors need more memory than the process's search budget.
	CodeIndexTooLarge = "search_index_too_large"
)

// LoadingRetryAfter is the Retry-After of a CodeIndexLoading answer.
const LoadingRetryAfter = 2 * time.Second

type failFastKey struct{}

// failFast marks a search that answers CodeIndexLoading rather than wait for a load longer than
// IndexConfig.LoadWait.
func failFast(ctx context.Context) context.Context {
	return context.WithValue(ctx, failFastKey{}, true)
}

// Embedded is the in-process Index. Run must be running for it to follow changes by
// notification; without it (or while its listener reconnects) every search first applies the
// tenant's changes itself, so results are never older than the last committed embedding write.
type Embedded struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	now  func() time.Time
	cfg  IndexConfig

	live      atomic.Bool  // the listener is up and has caught up: notifications keep sets current
	loadCount atomic.Int64 // full loads started
	loading   atomic.Int64 // full loads in progress
	loadNanos atomic.Int64 // time spent in finished full loads
	loadsDone atomic.Int64 // finished full loads (successful or not)
	refused   atomic.Int64 // loads refused for the budget

	mu       sync.Mutex // guards sets, loads and reserved
	sets     map[setKey]*tenantSet
	loads    map[setKey]*loadCall
	reserved int64 // budget bytes taken by loads in flight

	dirtyMu sync.Mutex // guards dirty
	dirty   map[int64]bool
	wake    chan struct{} // cap 1: dirty has tenants
}

type setKey struct {
	tenant int64
	model  string
	dims   int
}

// tenantSet is one loaded set and what keeps it current.
type tenantSet struct {
	key      setKey
	mu       sync.RWMutex // guards v and its contents; scans read-lock it
	v        *vectors     // nil once the set is dropped (its file released)
	syncMu   sync.Mutex   // one sync at a time; guards lastSeq
	lastSeq  int64        // the change sequence the set reflects
	lastUsed atomic.Int64
}

// loadCall is one load in flight; concurrent searches of the same set wait for it.
type loadCall struct {
	done     chan struct{}
	set      *tenantSet
	err      error
	reserved int64 // budget bytes taken, guarded by Embedded.mu
}

// drop releases the set's vectors once no search reads them; a search that still holds the set
// then finds it dropped and looks it up again.
func (s *tenantSet) drop() {
	s.mu.Lock()
	if s.v != nil {
		s.v.close()
		s.v = nil
	}
	s.mu.Unlock()
}

// NewEmbedded builds the index. now drives idle eviction.
func NewEmbedded(pool *pgxpool.Pool, log *slog.Logger, now func() time.Time, cfg IndexConfig) *Embedded {
	cfg.defaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Embedded{
		pool: pool, log: log, now: now, cfg: cfg,
		sets: map[setKey]*tenantSet{}, loads: map[setKey]*loadCall{},
		dirty: map[int64]bool{}, wake: make(chan struct{}, 1),
	}
}

var _ Index = (*Embedded)(nil)

// TopK implements Index.
func (ix *Embedded) TopK(ctx context.Context, tenantID int64, model string, query []float32, k int, allow func(productID int64) bool) ([]Match, error) {
	if k <= 0 || len(query) == 0 {
		return []Match{}, nil
	}
	for {
		s, err := ix.set(ctx, setKey{tenantID, model, len(query)}, true)
		if err != nil {
			return nil, err
		}
		s.mu.RLock()
		if s.v == nil { // dropped since: look again
			s.mu.RUnlock()
			continue
		}
		q, ok := s.v.prepare(query)
		if !ok {
			s.mu.RUnlock()
			return []Match{}, nil
		}
		out := s.v.topK(&q, k, allow, ix.workers())
		s.mu.RUnlock()
		return out, nil
	}
}

// Len is the number of vectors the tenant has of the model and size (loading them if needed;
// without a live listener, as of the last search).
func (ix *Embedded) Len(ctx context.Context, tenantID int64, model string, dims int) (int, error) {
	for {
		s, err := ix.set(ctx, setKey{tenantID, model, dims}, false)
		if err != nil {
			return 0, err
		}
		s.mu.RLock()
		v := s.v
		n := 0
		if v != nil {
			n = v.Len()
		}
		s.mu.RUnlock()
		if v != nil {
			return n, nil
		}
	}
}

// IndexStats describe what the index holds.
type IndexStats struct {
	Sets    int   // loaded (tenant, model, size) sets
	Vectors int   // vectors across them
	Bytes   int64 // heap they hold (counted against IndexConfig.MaxBytes)
	// FileBytes are the float32 values in their files (page cache, not heap).
	FileBytes int64
	Budget    int64 // IndexConfig.MaxBytes (0: none)
	Loads     int64 // full loads since the index was built
	// LoadsInProgress, LoadsDone and LoadSeconds (the time the done ones took, together).
	LoadsInProgress, LoadsDone int64
	LoadSeconds                float64
	Refused                    int64 // loads refused because the tenant is larger than the budget
}

// Stats counts what is loaded.
func (ix *Embedded) Stats() IndexStats {
	ix.mu.Lock()
	sets := make([]*tenantSet, 0, len(ix.sets))
	for _, s := range ix.sets {
		sets = append(sets, s)
	}
	ix.mu.Unlock()
	out := IndexStats{Loads: ix.loadCount.Load(), Budget: ix.cfg.MaxBytes, LoadsInProgress: ix.loading.Load(),
		LoadsDone: ix.loadsDone.Load(), LoadSeconds: time.Duration(ix.loadNanos.Load()).Seconds(), Refused: ix.refused.Load()}
	for _, s := range sets {
		s.mu.RLock()
		if s.v != nil {
			out.Sets++
			out.Vectors += s.v.Len()
			out.Bytes += s.v.bytes()
			out.FileBytes += s.v.fileBytes()
		}
		s.mu.RUnlock()
	}
	return out
}

func (ix *Embedded) workers() int {
	if ix.cfg.Workers > 0 {
		return ix.cfg.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// set returns the loaded set, loading it on first use (concurrent first uses share one load).
// fresh: without a live listener, first apply the changes since the set's last sync.
func (ix *Embedded) set(ctx context.Context, key setKey, fresh bool) (*tenantSet, error) {
	ix.mu.Lock()
	s := ix.sets[key]
	if s != nil {
		ix.mu.Unlock()
		s.lastUsed.Store(ix.now().UnixNano())
		if fresh && !ix.live.Load() {
			if err := ix.sync(ctx, s); err != nil {
				return nil, err
			}
		}
		return s, nil
	}
	c := ix.loads[key]
	if c == nil {
		c = &loadCall{done: make(chan struct{})}
		ix.loads[key] = c
		// The load outlives the search that started it: others may be waiting for it.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ix.cfg.LoadTimeout)
		go func() {
			defer cancel()
			ix.runLoad(lctx, key, c)
		}()
	}
	ix.mu.Unlock()
	var waited <-chan time.Time
	if ctx.Value(failFastKey{}) != nil {
		t := time.NewTimer(ix.cfg.LoadWait)
		defer t.Stop()
		waited = t.C
	}
	select {
	case <-c.done:
		if c.err != nil {
			return nil, c.err
		}
		c.set.lastUsed.Store(ix.now().UnixNano())
		return c.set, nil
	case <-waited:
		return nil, &errs.CodedError{Kind: errs.ErrUnavailable, Code: CodeIndexLoading, RetryAfter: LoadingRetryAfter,
			Msg: "the tenant's product vectors are loading into this server's search index; try again shortly"}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (ix *Embedded) runLoad(ctx context.Context, key setKey, c *loadCall) {
	defer close(c.done)
	ix.loading.Add(1)
	start := time.Now()
	defer func() {
		ix.loading.Add(-1)
		ix.loadNanos.Add(int64(time.Since(start)))
		ix.loadsDone.Add(1)
	}()
	s := &tenantSet{key: key}
	s.lastUsed.Store(ix.now().UnixNano())
	v, seq, err := ix.load(ctx, key, func(count int64) error { return ix.reserve(c, key, count) })
	if err == nil {
		s.v, s.lastSeq = v, seq
		// A change committed after the load's snapshot may have been notified before the set
		// was installed (and ignored): catch up once it is.
		ix.mu.Lock()
		ix.sets[key] = s
		delete(ix.loads, key)
		ix.reserved -= c.reserved
		ix.mu.Unlock()
		if err = ix.sync(ctx, s); err != nil {
			ix.mu.Lock()
			if ix.sets[key] == s {
				delete(ix.sets, key)
			}
			ix.mu.Unlock()
			s.drop()
		}
	} else {
		ix.mu.Lock()
		delete(ix.loads, key)
		ix.reserved -= c.reserved
		ix.mu.Unlock()
	}
	if err != nil {
		var coded *errs.CodedError
		if errors.As(err, &coded) {
			c.err = err
		} else {
			// Postgres or the vectors' file failed: a dependency, not the request (503).
			c.err = fmt.Errorf("load product vectors of tenant %d: %w: %w", key.tenant, errs.ErrUnavailable, err)
		}
		return
	}
	c.set = s
	ix.enforceBound(s)
}

// reserve takes the budget a load of count vectors needs, dropping the least recently searched
// sets until it fits; a set larger than the whole budget is refused with CodeIndexTooLarge.
func (ix *Embedded) reserve(c *loadCall, key setKey, count int64) error {
	if ix.cfg.MaxBytes <= 0 {
		return nil
	}
	need := count*residentPerVector(key.dims) + int64(roundUp(key.dims, f32Block))*4
	if need > ix.cfg.MaxBytes {
		ix.refused.Add(1)
		return errs.Coded(errs.ErrUnavailable, CodeIndexTooLarge,
			"the tenant's %d product vectors of %d dimensions need %s of search memory, more than this server's budget of %s (COHORT_SEARCH_MEMORY); raise the budget and the pod's memory limit, or use fewer dimensions (OPENAI_EMBEDDING_DIMENSIONS)",
			count, key.dims, FormatBytes(need), FormatBytes(ix.cfg.MaxBytes))
	}
	ix.mu.Lock()
	c.reserved = need
	ix.reserved += need
	victims := ix.overBudget(nil)
	ix.mu.Unlock()
	for _, s := range victims {
		s.drop()
	}
	return nil
}

// FormatBytes writes n in binary units (KiB, MiB, GiB), as COHORT_SEARCH_MEMORY takes them.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 3; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGT"[exp])
}

// load reads every vector of the set and the change sequence they reflect, in one snapshot.
// Changes commit in sequence order per tenant (the trigger takes a per-tenant lock before it
// draws the number), so every change up to that sequence is in the snapshot and every later
// one has a larger number.
// admit, when set, is asked for the budget of the count vectors before any is read.
func (ix *Embedded) load(ctx context.Context, key setKey, admit func(count int64) error) (*vectors, int64, error) {
	ix.loadCount.Add(1)
	tx, err := ix.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only
	var seq, count int64
	err = tx.QueryRow(ctx, `SELECT COALESCE((SELECT max(seq) FROM product_embedding_changes WHERE tenant_id = $1), 0),
		(SELECT count(*) FROM product_embeddings WHERE tenant_id = $1 AND model = $2 AND dims = $3)`,
		key.tenant, key.model, key.dims).Scan(&seq, &count)
	if err != nil {
		return nil, 0, err
	}
	if admit != nil {
		if err := admit(count); err != nil {
			return nil, 0, err
		}
	}
	v := newVectorsIn(ix.cfg.Dir, key.dims, int(count))
	ok := false
	defer func() {
		if !ok {
			v.close()
		}
	}()
	rows, err := tx.Query(ctx, `SELECT product_id, vector FROM product_embeddings WHERE tenant_id = $1 AND model = $2 AND dims = $3`,
		key.tenant, key.model, key.dims)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	buf := make([]float32, 0, key.dims)
	var id int64
	var raw pgtype.DriverBytes
	for rows.Next() {
		if err := rows.Scan(&id, &raw); err != nil {
			return nil, 0, err
		}
		if len(raw) != 4*key.dims {
			continue // the table's check constraint makes this impossible
		}
		buf = catalog.DecodeVector(buf[:0], raw)
		if err := v.upsert(id, buf); err != nil {
			return nil, 0, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	ok = true
	return v, seq, nil
}

// change is one product's embedding as of a change record: vec nil when the product has no
// vector of the set's model and size any more.
type change struct {
	seq int64
	id  int64
	vec []float32
}

// sync applies the changes the set has not seen. A set that last synced before a pruned change
// record is loaded again in full.
func (ix *Embedded) sync(ctx context.Context, s *tenantSet) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	key := s.key
	b := &pgx.Batch{}
	// Changes first, the prune floor second: a prune that committed before the changes were
	// read shows in the floor.
	b.Queue(`SELECT c.seq, c.product_id, CASE WHEN e.model = $2 AND e.dims = $3 THEN e.vector END
		FROM product_embedding_changes c LEFT JOIN product_embeddings e ON e.product_id = c.product_id
		WHERE c.tenant_id = $1 AND c.seq > $4 ORDER BY c.seq`, key.tenant, key.model, key.dims, s.lastSeq)
	b.Queue(`SELECT COALESCE((SELECT pruned_seq FROM product_embedding_change_floors WHERE tenant_id = $1), 0)`, key.tenant)
	br := ix.pool.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("read product embedding changes: %w", err)
	}
	var changes []change
	for rows.Next() {
		var c change
		var raw []byte
		if err := rows.Scan(&c.seq, &c.id, &raw); err != nil {
			rows.Close()
			return fmt.Errorf("read product embedding changes: %w", err)
		}
		if len(raw) == 4*key.dims {
			c.vec = catalog.DecodeVector(make([]float32, 0, key.dims), raw)
		}
		changes = append(changes, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read product embedding changes: %w", err)
	}
	var floor int64
	if err := br.QueryRow().Scan(&floor); err != nil {
		return fmt.Errorf("read product embedding changes: %w", err)
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("read product embedding changes: %w", err)
	}
	if floor > s.lastSeq {
		v, seq, err := ix.load(ctx, key, nil)
		if err != nil {
			return fmt.Errorf("reload product vectors of tenant %d: %w", key.tenant, err)
		}
		s.mu.Lock()
		old := s.v
		if old != nil {
			s.v = v
			old.close()
		} else {
			v.close() // dropped meanwhile
		}
		s.mu.Unlock()
		s.lastSeq = seq
		if ix.cfg.MaxBytes > 0 {
			ix.enforceBound(s)
		}
		return nil
	}
	if len(changes) == 0 {
		return nil
	}
	s.mu.Lock()
	if s.v == nil { // dropped meanwhile
		s.mu.Unlock()
		return nil
	}
	for _, c := range changes {
		if c.vec != nil {
			err = s.v.upsert(c.id, c.vec)
		} else {
			err = s.v.remove(c.id)
		}
		if err != nil {
			break
		}
	}
	if err != nil {
		// The set is no longer what Postgres holds: drop it; the next search loads it again.
		s.v.close()
		s.v = nil
		s.mu.Unlock()
		ix.mu.Lock()
		if ix.sets[key] == s {
			delete(ix.sets, key)
		}
		ix.mu.Unlock()
		return fmt.Errorf("apply product embedding changes of tenant %d: %w", key.tenant, err)
	}
	s.mu.Unlock()
	s.lastSeq = changes[len(changes)-1].seq
	if ix.cfg.MaxBytes > 0 {
		ix.enforceBound(s) // the set may have grown past the budget: others go
	}
	return nil
}

// enforceBound drops the least recently searched sets, other than keep, while the sets and the
// loads in flight need more than MaxBytes.
func (ix *Embedded) enforceBound(keep *tenantSet) {
	ix.mu.Lock()
	victims := ix.overBudget(keep)
	ix.mu.Unlock()
	for _, s := range victims {
		s.drop()
	}
}

// overBudget removes from sets the least recently searched ones, other than keep, while the sets
// and the loads in flight need more than MaxBytes, and returns them for the caller to drop
// (outside ix.mu: a drop waits for the searches reading the set). ix.mu must be held.
func (ix *Embedded) overBudget(keep *tenantSet) []*tenantSet {
	if ix.cfg.MaxBytes <= 0 {
		return nil
	}
	type entry struct {
		s    *tenantSet
		used int64
		n    int64
	}
	var all []entry
	total := ix.reserved
	for _, s := range ix.sets {
		s.mu.RLock()
		var n int64
		if s.v != nil {
			n = s.v.bytes()
		}
		s.mu.RUnlock()
		total += n
		if s != keep {
			all = append(all, entry{s, s.lastUsed.Load(), n})
		}
	}
	slices.SortFunc(all, func(a, b entry) int { return int(min(max(a.used-b.used, -1), 1)) })
	var victims []*tenantSet
	for _, e := range all {
		if total <= ix.cfg.MaxBytes {
			break
		}
		delete(ix.sets, e.s.key)
		victims = append(victims, e.s)
		total -= e.n
	}
	return victims
}

// evictIdle drops the sets not searched for IdleAfter.
func (ix *Embedded) evictIdle() {
	cutoff := ix.now().Add(-ix.cfg.IdleAfter).UnixNano()
	var idle []*tenantSet
	ix.mu.Lock()
	for k, s := range ix.sets {
		if s.lastUsed.Load() < cutoff {
			delete(ix.sets, k)
			idle = append(idle, s)
		}
	}
	ix.mu.Unlock()
	for _, s := range idle {
		s.drop()
	}
}

// loaded is a snapshot of the loaded sets.
func (ix *Embedded) loaded() []*tenantSet {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	out := make([]*tenantSet, 0, len(ix.sets))
	for _, s := range ix.sets {
		out = append(out, s)
	}
	return out
}

// Run follows embedding changes until ctx ends: it listens on NotifyChannel (one dedicated
// connection), applies each notified tenant's changes, polls the loaded tenants' change
// sequences every PollEvery, drops idle tenants and prunes old change records. It reconnects
// after failures with backoff, logging each, and catches up on everything it may have missed
// before it trusts notifications again; meanwhile searches sync themselves. It returns nil when
// ctx ends.
func (ix *Embedded) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { ix.syncLoop(ctx) })
	defer wg.Wait()
	lastEvict, lastPrune := time.Now(), time.Time{}
	l := &store.Listener{
		Pool: ix.pool, Channel: NotifyChannel, Every: ix.cfg.PollEvery, Log: ix.log,
		Down: "product vector index listener stopped; searches read changes themselves until it reconnects",
		Ready: func(ctx context.Context) error {
			for _, s := range ix.loaded() {
				if err := ix.sync(ctx, s); err != nil {
					return err
				}
			}
			return nil
		},
		Notify: func(payload string) {
			if tenant, err := strconv.ParseInt(payload, 10, 64); err == nil {
				ix.markDirty(tenant)
			}
		},
		Tick: func(ctx context.Context) error {
			if err := ix.poll(ctx); err != nil {
				return err
			}
			if time.Since(lastEvict) >= time.Minute {
				ix.evictIdle()
				lastEvict = time.Now()
			}
			if time.Since(lastPrune) >= ix.cfg.PruneEvery {
				if err := ix.Prune(ctx); err != nil {
					ix.log.Warn("prune product embedding changes", "error", err)
				}
				lastPrune = time.Now()
			}
			return nil
		},
		Live: ix.live.Store,
	}
	return l.Run(ctx)
}

func (ix *Embedded) markDirty(tenant int64) {
	ix.dirtyMu.Lock()
	ix.dirty[tenant] = true
	ix.dirtyMu.Unlock()
	select {
	case ix.wake <- struct{}{}:
	default:
	}
}

// syncLoop applies the changes of the tenants marked dirty, until ctx ends. A failed sync is
// logged; the next notification or poll tries again.
func (ix *Embedded) syncLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ix.wake:
		}
		ix.dirtyMu.Lock()
		dirty := ix.dirty
		ix.dirty = map[int64]bool{}
		ix.dirtyMu.Unlock()
		for _, s := range ix.loaded() {
			if !dirty[s.key.tenant] {
				continue
			}
			if err := ix.sync(ctx, s); err != nil && ctx.Err() == nil {
				ix.log.Warn("apply product embedding changes", "tenant", s.key.tenant, "error", err)
			}
		}
	}
}

// poll marks dirty the loaded tenants whose change sequence moved past what their sets saw.
func (ix *Embedded) poll(ctx context.Context) error {
	sets := ix.loaded()
	if len(sets) == 0 {
		return nil
	}
	tenants := make([]int64, 0, len(sets))
	for _, s := range sets {
		tenants = append(tenants, s.key.tenant)
	}
	rows, err := ix.pool.Query(ctx, `SELECT t.id, COALESCE((SELECT max(seq) FROM product_embedding_changes WHERE tenant_id = t.id), 0)
		FROM unnest($1::bigint[]) AS t(id)`, tenants)
	if err != nil {
		return fmt.Errorf("poll product embedding changes: %w", err)
	}
	latest := map[int64]int64{}
	for rows.Next() {
		var t, seq int64
		if err := rows.Scan(&t, &seq); err != nil {
			rows.Close()
			return fmt.Errorf("poll product embedding changes: %w", err)
		}
		latest[t] = seq
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("poll product embedding changes: %w", err)
	}
	for _, s := range sets {
		s.syncMu.Lock()
		behind := latest[s.key.tenant] > s.lastSeq
		s.syncMu.Unlock()
		if behind {
			ix.markDirty(s.key.tenant)
		}
	}
	return nil
}

// Prune deletes the change records of deleted embeddings older than PruneAfter and raises each
// affected tenant's floor to the newest it deleted, so an index that has not seen them loads the
// tenant again instead of missing a removal. Any replica may run it; it is idempotent.
func (ix *Embedded) Prune(ctx context.Context) error {
	_, err := ix.pool.Exec(ctx, `WITH gone AS (
			DELETE FROM product_embedding_changes c
			WHERE c.changed_at < now() - make_interval(secs => $1)
				AND NOT EXISTS (SELECT 1 FROM product_embeddings e WHERE e.product_id = c.product_id)
			RETURNING c.tenant_id, c.seq)
		INSERT INTO product_embedding_change_floors (tenant_id, pruned_seq)
		SELECT tenant_id, max(seq) FROM gone GROUP BY tenant_id
		ON CONFLICT (tenant_id) DO UPDATE
			SET pruned_seq = GREATEST(product_embedding_change_floors.pruned_seq, EXCLUDED.pruned_seq)`,
		ix.cfg.PruneAfter.Seconds())
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("prune product embedding changes: %w", err)
	}
	return nil
}
