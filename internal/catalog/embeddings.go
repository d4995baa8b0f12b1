package catalog

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/ai"
)

// Product embeddings (semantic search). Every save that changes a product's embedding text
// queues the product in product_embedding_queue in the save's own transaction; after the commit
// the service kicks its EmbeddingScheduler (the ProductEmbeddings workflow of the tenant), whose
// activity calls DrainEmbeddings until the queue is empty. The queue is the source of truth: a
// lost kick only delays the work until the next kick or the sweep (QueuedTenants).
//
// The embedding text of a product is its name, then the values of the schema's searchable
// fields in schema order, one per line (see EmbeddingText). A schema that marks no field
// searchable embeds the name and every string, text and array field instead, so a catalogue
// whose owner never thought about search still gets useful vectors.

// Embedding limits and timings.
const (
	// MaxEmbeddingTextBytes caps the embedding text (cut at a rune boundary): enough to say what
	// a product is and well within what an embedding model takes in one input, so a very long
	// description never makes the provider refuse the product.
	MaxEmbeddingTextBytes = 4000
	// MaxEmbedAttempts is how many times the provider may refuse a product's text (an invalid
	// request) before its queue row is parked: kept, but skipped until the product is saved again.
	MaxEmbedAttempts = 5
	// EmbeddingLease is how long a drain owns the queue rows it read without renewing the lease;
	// another drain skips them meanwhile. A live drain renews it every EmbeddingLeaseRenewEvery,
	// and one whose renewals keep failing gives up before it ends, so the rows it read are never
	// embedded twice for one request. It is short so that the rows of a drain that died (its
	// worker killed, nothing released) are ready again soon: within EmbeddingLease of its last
	// renewal.
	EmbeddingLease = 30 * time.Second
	// EmbeddingLeaseRenewEvery is how often a live drain renews its lease (and reports that it is
	// alive, see DrainEmbeddingsAlive).
	EmbeddingLeaseRenewEvery = 5 * time.Second
	// MaxDrainTime bounds one drain, renewals included.
	MaxDrainTime = 4 * time.Minute
	// DefaultEmbedBatch and MaxEmbedBatch bound the queue rows one drain reads (and so the texts of
	// its one provider call).
	DefaultEmbedBatch = 512
	MaxEmbedBatch     = 2048
	// EmbeddingKickDebounce: at most one kick per tenant this often. The workflow lingers longer
	// (workflows.EmbedLinger) and drains once more before it ends, so a save whose kick was
	// skipped is still drained.
	EmbeddingKickDebounce = time.Second

	// embedRetryAfter is the wait before a refused text is tried again; it doubles per attempt.
	embedRetryAfter = 30 * time.Second
	// embedKickTimeout bounds the kick after a save: the save has committed and must not wait long.
	embedKickTimeout = 5 * time.Second
	maxLastError     = 1000
	// embedProbeText is sent alone when a batch is refused, to tell a bad text (the probe passes)
	// from a provider that refuses everything (a bad model name: the probe fails too).
	embedProbeText = "product"
)

// Embedder is the part of an AI provider (ai.Provider) that embeds texts.
type Embedder interface {
	EmbeddingModel() string
	// Dimensions is the vector length, 0 when not known before a call.
	Dimensions() int
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// EmbeddingScheduler starts, or wakes, the tenant's embedding drain (the ProductEmbeddings
// workflow). It is called after a save that queued products has committed.
type EmbeddingScheduler interface {
	ScheduleEmbeddings(ctx context.Context, tenantID int64) error
}

// embeddingKicks is the service's scheduler (set at construction) and its per-tenant debounce.
type embeddingKicks struct {
	sched    EmbeddingScheduler
	onError  func(tenantID int64, err error)
	mu       sync.Mutex // guards last
	last     map[int64]time.Time
	failures atomic.Int64
}

// WithEmbeddingScheduler makes saves that queue products kick sched after they commit, at most
// once per EmbeddingKickDebounce per tenant. A failed kick never fails the save (the queue keeps
// the work): it is counted (EmbeddingKickFailures) and passed to onError when not nil. A nil
// sched kicks nothing.
func WithEmbeddingScheduler(sched EmbeddingScheduler, onError func(tenantID int64, err error)) Option {
	return func(s *Service) { s.kicks.sched, s.kicks.onError = sched, onError }
}

// WithEmbeddingLeaseRenewal makes drains renew the lease of their queue rows every d instead of
// EmbeddingLeaseRenewEvery (tests); d <= 0 keeps the default.
func WithEmbeddingLeaseRenewal(d time.Duration) Option {
	return func(s *Service) {
		if d > 0 {
			s.leaseRenewEvery = d
		}
	}
}

// EmbeddingKickFailures counts the kicks that returned an error.
func (s *Service) EmbeddingKickFailures() int64 { return s.kicks.failures.Load() }

// kickEmbeddings wakes the tenant's drain after a commit that queued products.
func (s *Service) kickEmbeddings(ctx context.Context, tenantID int64) {
	k := &s.kicks
	sched, onError := k.sched, k.onError
	if sched == nil {
		return
	}
	k.mu.Lock()
	now := s.now()
	if last, ok := k.last[tenantID]; ok && !now.Before(last) && now.Sub(last) < EmbeddingKickDebounce {
		k.mu.Unlock()
		return
	}
	if len(k.last) >= 4096 {
		for id, t := range k.last {
			if now.Sub(t) >= EmbeddingKickDebounce || now.Before(t) {
				delete(k.last, id)
			}
		}
	}
	// Recorded before the call, failed or not: while the scheduler is down, a tenant's saves
	// try it once per debounce period, not once each.
	k.last[tenantID] = now
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), embedKickTimeout)
	defer cancel()
	if err := sched.ScheduleEmbeddings(ctx, tenantID); err != nil {
		k.failures.Add(1)
		if onError != nil {
			onError(tenantID, err)
		}
	}
}

// embeddingFields are the schema fields whose values go into the embedding text, in order.
func embeddingFields(sc *Schema) []Field {
	var out []Field
	for _, f := range sc.Fields {
		if f.Searchable {
			out = append(out, f)
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, f := range sc.Fields {
		if f.Type == TypeString || f.Type == TypeText || f.Type == TypeArray {
			out = append(out, f)
		}
	}
	return out
}

// embeddingSpecChanged says whether the two schemas build different embedding texts from the
// same product: the embedded fields, their order, or what renders them (type, label, unit).
func embeddingSpecChanged(old, new *Schema) bool {
	a, b := embeddingFields(old), embeddingFields(new)
	return !slices.EqualFunc(a, b, func(x, y Field) bool {
		return x.Name == y.Name && x.Type == y.Type && x.Label == y.Label && x.Unit == y.Unit
	})
}

// EmbeddingText is the text embedded for a product: the name, then one line per embedded field
// that has a value (see embeddingFields), capped at MaxEmbeddingTextBytes. Values render as
// they read: strings as stored, arrays joined with ", ", numbers in plain decimal with the
// field's unit, a true boolean as the field's label (a false one adds nothing).
func EmbeddingText(sc *Schema, name string, data map[string]any) string {
	return embeddingText(embeddingFields(sc), name, data)
}

func embeddingText(fields []Field, name string, data map[string]any) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(name))
	for _, f := range fields {
		v, ok := data[f.Name]
		if !ok || v == nil {
			continue
		}
		n := b.Len()
		b.WriteByte('\n')
		if !appendEmbeddingValue(&b, f, v) {
			s := b.String()[:n] // nothing written: drop the newline
			b.Reset()
			b.WriteString(s)
		}
		if b.Len() >= MaxEmbeddingTextBytes {
			break
		}
	}
	return truncateText(b.String(), MaxEmbeddingTextBytes)
}

// appendEmbeddingValue writes v and says whether it wrote anything.
func appendEmbeddingValue(b *strings.Builder, f Field, v any) bool {
	switch x := v.(type) {
	case string:
		s := strings.TrimSpace(x)
		b.WriteString(s)
		return s != ""
	case []any:
		wrote := false
		for _, e := range x {
			s, ok := e.(string)
			if s = strings.TrimSpace(s); !ok || s == "" {
				continue
			}
			if wrote {
				b.WriteString(", ")
			}
			b.WriteString(s)
			wrote = true
		}
		return wrote
	case bool:
		if x {
			b.WriteString(f.Label)
		}
		return x && f.Label != ""
	}
	n, ok := number(v)
	if !ok {
		return false
	}
	b.WriteString(strconv.FormatFloat(n, 'f', -1, 64))
	if f.Unit != "" {
		b.WriteByte(' ')
		b.WriteString(f.Unit)
	}
	return true
}

// truncateText cuts s to at most max bytes at a rune boundary.
func truncateText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return strings.TrimSpace(s[:i])
}

// queueEmbeddings queues the tenant's products ids (in the caller's transaction). A product
// already queued gets a new seq (and a clean slate: the text is new), so a drain that read the
// old request does not delete the new one.
func queueEmbeddings(ctx context.Context, tx pgx.Tx, tenantID int64, now time.Time, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO product_embedding_queue (product_id, tenant_id, queued_at)
		SELECT u.id, $1, $2 FROM unnest($3::bigint[]) AS u(id)
		ON CONFLICT (product_id) DO UPDATE SET seq = nextval('product_embedding_queue_seq'), attempts = 0,
			last_error = NULL, available_at = NULL, queued_at = EXCLUDED.queued_at`, tenantID, now, ids)
	if err != nil {
		return fmt.Errorf("queue product embeddings: %w", err)
	}
	return nil
}

// queueAllEmbeddings queues every product of the tenant (the embedding text of all of them may
// have changed with the schema) and returns how many.
func queueAllEmbeddings(ctx context.Context, tx pgx.Tx, tenantID int64, now time.Time) (int64, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO product_embedding_queue (product_id, tenant_id, queued_at)
		SELECT id, tenant_id, $2 FROM products WHERE tenant_id = $1
		ON CONFLICT (product_id) DO UPDATE SET seq = nextval('product_embedding_queue_seq'), attempts = 0,
			last_error = NULL, available_at = NULL, queued_at = EXCLUDED.queued_at`, tenantID, now)
	if err != nil {
		return 0, fmt.Errorf("queue product embeddings: %w", err)
	}
	return tag.RowsAffected(), nil
}

// queueBulkEmbeddings queues the created products and the updated ones whose embedding text
// changed, in one statement, and returns how many.
func queueBulkEmbeddings(ctx context.Context, tx pgx.Tx, tenantID int64, sc *Schema, creates, updates []*bulkItem, results []BulkResult, now time.Time) (int, error) {
	ids := make([]int64, 0, len(creates)+len(updates))
	for _, it := range creates {
		if r := results[it.index]; r.Status == BulkCreated {
			ids = append(ids, r.ID)
		}
	}
	var fields []Field
	if len(updates) > 0 {
		fields = embeddingFields(sc)
	}
	for _, it := range updates {
		if results[it.index].Status == BulkUpdated &&
			embeddingText(fields, it.name, it.data) != embeddingText(fields, it.current.Name, it.current.Data) {
			ids = append(ids, it.current.ID)
		}
	}
	return len(ids), queueEmbeddings(ctx, tx, tenantID, now, ids)
}

// DrainResult is what one DrainEmbeddings did.
type DrainResult struct {
	Read       int  // queue rows taken
	Embedded   int  // embeddings written
	Unchanged  int  // same text, model and size as stored: no provider call
	Superseded int  // saved again or deleted meanwhile: left to the newer request
	Failed     int  // texts the provider refused; tried again later
	Parked     int  // of Failed, at MaxEmbedAttempts: skipped until the product is saved again
	More       bool // the tenant has ready queue rows left
	// NextReadyIn: the first of the tenant's rows not ready now (leased by a drain that may have
	// died, or backed off after a refusal) is ready in this long, when that is within
	// EmbeddingLease; 0 otherwise.
	NextReadyIn time.Duration
}

type embedClaim struct {
	id, seq int64
	state   int
	text    string
	hash    []byte
	vec     []float32 // the provider's answer
	err     error     // the provider refused the text
}

const (
	claimGone      = iota // the product was deleted
	claimUnchanged        // the stored embedding is current
	claimTodo             // to embed
)

// DrainEmbeddings embeds up to limit (DefaultEmbedBatch when 0, at most MaxEmbedBatch) of the
// tenant's queued products, oldest request first, with one provider call for all the texts that
// changed. It takes the rows under a lease (a concurrent drain skips them), builds each product's
// text, skips products whose stored embedding has the same text hash, model and size, calls the
// provider without holding a transaction, then in one short transaction stores the vectors and
// deletes the queue rows whose seq is still the one it read (a product saved meanwhile stays
// queued, and its older vector is not stored).
//
// A provider error that retrying can fix (unavailable, rate limited, unauthorized) is returned
// and the rows are released for the retry. When the provider refuses the batch as invalid, a
// probe text tells a provider that refuses everything (returned as an error: configuration) from
// bad texts, which are then isolated by halving the batch: each refused text counts an attempt
// on its row, is retried after a growing wait and parked at MaxEmbedAttempts, so one bad text
// never blocks the queue.
func (s *Service) DrainEmbeddings(ctx context.Context, tenantID int64, p Embedder, limit int) (DrainResult, error) {
	return s.DrainEmbeddingsAlive(ctx, tenantID, p, limit, nil)
}

// DrainEmbeddingsAlive is DrainEmbeddings that calls alive (when not nil) once it holds its rows
// and after each renewal of their lease (every EmbeddingLeaseRenewEvery), for the caller's
// heartbeat. The lease of the rows lasts EmbeddingLease from the last renewal: when renewals
// keep failing until it nearly ends, the drain stops with an error and releases the rows. A
// drain that ends without settling its rows (an error, a cancelled ctx) releases them; only a
// drain that dies (its process killed) leaves them leased, until the lease runs out.
func (s *Service) DrainEmbeddingsAlive(ctx context.Context, tenantID int64, p Embedder, limit int, alive func()) (DrainResult, error) {
	var out DrainResult
	if limit <= 0 {
		limit = DefaultEmbedBatch
	}
	limit = min(limit, MaxEmbedBatch)
	ctx, cancel := context.WithTimeout(ctx, MaxDrainTime)
	defer cancel()
	ctx, lose := context.WithCancelCause(ctx)
	defer lose(nil)
	claims, leaseEnd, err := s.claimEmbeddings(ctx, tenantID, limit)
	if err != nil {
		return out, err
	}
	out.Read = len(claims)
	if len(claims) == 0 {
		out.NextReadyIn, err = s.nextReadyIn(ctx, tenantID)
		return out, err
	}
	released := false
	defer func() {
		if !released {
			s.releaseEmbeddingClaims(ctx, tenantID, claims)
		}
	}()
	if alive != nil {
		alive()
	}
	stopLease := s.keepEmbeddingLease(ctx, lose, tenantID, claims, leaseEnd, alive)
	defer stopLease()
	fail := func(err error) (DrainResult, error) {
		if cause := context.Cause(ctx); errors.Is(cause, errEmbeddingLeaseLost) {
			return out, cause
		}
		return out, err
	}
	if err := s.prepareEmbeddings(ctx, tenantID, p, claims); err != nil {
		return fail(err)
	}
	var todo []*embedClaim
	for _, c := range claims {
		if c.state == claimTodo {
			todo = append(todo, c)
		}
	}
	if err := embedClaims(ctx, p, todo); err != nil {
		return fail(err)
	}
	// No renewal may run once the rows are settled: it would lengthen the backoff of a refused one.
	stopLease()
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if err := s.finishEmbeddings(ctx, tenantID, p.EmbeddingModel(), claims, &out); err != nil {
		return fail(err)
	}
	released = true
	now := s.now().UTC()
	var next *time.Time
	err = s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM product_embedding_queue
			WHERE tenant_id = $1 AND attempts < $2 AND (available_at IS NULL OR available_at <= $3)),
		(SELECT min(available_at) FROM product_embedding_queue
			WHERE tenant_id = $1 AND attempts < $2 AND available_at > $3 AND available_at <= $4)`,
		tenantID, MaxEmbedAttempts, now, now.Add(EmbeddingLease)).Scan(&out.More, &next)
	if err != nil {
		return out, fmt.Errorf("read embedding queue: %w", err)
	}
	if next != nil {
		out.NextReadyIn = next.Sub(now)
	}
	return out, nil
}

// errEmbeddingLeaseLost is the cause of a drain stopped because its lease could not be renewed.
var errEmbeddingLeaseLost = errors.New("the lease of the embedding queue rows could not be renewed in time")

// nextReadyIn is how long until the first of the tenant's leased (or briefly backed-off) queue
// rows is ready again, when that is within EmbeddingLease; 0 when none is.
func (s *Service) nextReadyIn(ctx context.Context, tenantID int64) (time.Duration, error) {
	now := s.now().UTC()
	var next *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT min(available_at) FROM product_embedding_queue
		WHERE tenant_id = $1 AND attempts < $2 AND available_at > $3 AND available_at <= $4`,
		tenantID, MaxEmbedAttempts, now, now.Add(EmbeddingLease)).Scan(&next); err != nil {
		return 0, fmt.Errorf("read embedding queue: %w", err)
	}
	if next == nil {
		return 0, nil
	}
	return next.Sub(now), nil
}

// keepEmbeddingLease renews the lease of the claims every s.leaseRenewEvery, calling alive (when
// not nil) after each renewal, until the returned stop is called (it waits for a renewal under
// way). When renewals fail until less than one interval of the lease (ending at leaseEnd) is
// left, it cancels the drain with errEmbeddingLeaseLost: after that another drain may take the
// rows.
func (s *Service) keepEmbeddingLease(ctx context.Context, lose context.CancelCauseFunc, tenantID int64, claims []*embedClaim,
	leaseEnd time.Time, alive func()) (stop func()) {
	every := s.leaseRenewEvery
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			end, err := s.renewEmbeddingClaims(ctx, tenantID, claims)
			if err == nil {
				leaseEnd = end
				if alive != nil {
					alive()
				}
				continue
			}
			if leaseEnd.Sub(s.now()) <= every {
				lose(fmt.Errorf("%w: %w", errEmbeddingLeaseLost, err))
				return
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}

// renewEmbeddingClaims moves the lease of the claims still current (same seq) to EmbeddingLease
// from now and returns its new end.
func (s *Service) renewEmbeddingClaims(ctx context.Context, tenantID int64, claims []*embedClaim) (time.Time, error) {
	end := s.now().UTC().Add(EmbeddingLease)
	ids, seqs := claimKeys(claims)
	if _, err := s.pool.Exec(ctx, `UPDATE product_embedding_queue q SET available_at = $2
		FROM unnest($3::bigint[], $4::bigint[]) AS u(id, seq)
		WHERE q.tenant_id = $1 AND q.product_id = u.id AND q.seq = u.seq`, tenantID, end, ids, seqs); err != nil {
		return time.Time{}, fmt.Errorf("renew the embedding queue lease: %w", err)
	}
	return end, nil
}

// claimEmbeddings takes up to limit ready rows of the tenant, in seq order, under a lease, and
// returns them with the lease's end.
func (s *Service) claimEmbeddings(ctx context.Context, tenantID int64, limit int) ([]*embedClaim, time.Time, error) {
	now := s.now().UTC()
	end := now.Add(EmbeddingLease)
	rows, err := s.pool.Query(ctx, `UPDATE product_embedding_queue q SET available_at = $4
		FROM (SELECT product_id FROM product_embedding_queue
			WHERE tenant_id = $1 AND attempts < $2 AND (available_at IS NULL OR available_at <= $3)
			ORDER BY seq LIMIT $5 FOR UPDATE SKIP LOCKED) c
		WHERE q.product_id = c.product_id AND q.tenant_id = $1
		RETURNING q.product_id, q.seq`, tenantID, MaxEmbedAttempts, now, end, limit)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read embedding queue: %w", err)
	}
	defer rows.Close()
	var out []*embedClaim
	for rows.Next() {
		c := &embedClaim{}
		if err := rows.Scan(&c.id, &c.seq); err != nil {
			return nil, time.Time{}, fmt.Errorf("read embedding queue: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, fmt.Errorf("read embedding queue: %w", err)
	}
	slices.SortFunc(out, func(a, b *embedClaim) int { return cmp.Compare(a.seq, b.seq) })
	return out, end, nil
}

// releaseEmbeddingClaims makes the rows ready again after a failed drain (rows saved meanwhile
// are ready already).
func (s *Service) releaseEmbeddingClaims(ctx context.Context, tenantID int64, claims []*embedClaim) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	ids, seqs := claimKeys(claims)
	// Best effort: if this fails too, the lease ends and the sweep finds the rows.
	_, _ = s.pool.Exec(ctx, `UPDATE product_embedding_queue q SET available_at = NULL
		FROM unnest($2::bigint[], $3::bigint[]) AS u(id, seq)
		WHERE q.tenant_id = $1 AND q.product_id = u.id AND q.seq = u.seq`, tenantID, ids, seqs)
}

func claimKeys(claims []*embedClaim) (ids, seqs []int64) {
	ids, seqs = make([]int64, len(claims)), make([]int64, len(claims))
	for i, c := range claims {
		ids[i], seqs[i] = c.id, c.seq
	}
	return ids, seqs
}

// prepareEmbeddings builds the claimed products' texts and marks each claim gone, unchanged or
// to embed.
func (s *Service) prepareEmbeddings(ctx context.Context, tenantID int64, p Embedder, claims []*embedClaim) error {
	sc, err := loadSchema(ctx, s.pool, tenantID)
	if err != nil {
		return err
	}
	fields := embeddingFields(sc)
	byID := make(map[int64]*embedClaim, len(claims))
	ids := make([]int64, len(claims))
	for i, c := range claims {
		c.state = claimGone
		byID[c.id], ids[i] = c, c.id
	}
	rows, err := s.pool.Query(ctx, `SELECT p.id, p.name, p.data, e.model, e.dims, e.text_hash
		FROM products p LEFT JOIN product_embeddings e ON e.product_id = p.id
		WHERE p.tenant_id = $1 AND p.id = ANY($2)`, tenantID, ids)
	if err != nil {
		return fmt.Errorf("load products to embed: %w", err)
	}
	defer rows.Close()
	model, dims := p.EmbeddingModel(), p.Dimensions()
	for rows.Next() {
		var (
			id          int64
			name        string
			raw         []byte
			storedModel *string
			storedDims  *int32
			storedHash  []byte
			data        map[string]any
		)
		if err := rows.Scan(&id, &name, &raw, &storedModel, &storedDims, &storedHash); err != nil {
			return fmt.Errorf("load products to embed: %w", err)
		}
		if err := json.Unmarshal(raw, &data); err != nil {
			return fmt.Errorf("read product %d data: %w", id, err)
		}
		c := byID[id]
		c.text = embeddingText(fields, name, data)
		sum := sha256.Sum256([]byte(c.text))
		c.hash = sum[:]
		c.state = claimTodo
		if storedModel != nil && *storedModel == model && bytes.Equal(storedHash, c.hash) && (dims <= 0 || int(*storedDims) == dims) {
			c.state = claimUnchanged
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load products to embed: %w", err)
	}
	return nil
}

// embedClaims calls the provider once for all the claims' texts. When it refuses the batch as
// invalid, a probe tells a provider that refuses everything (an error: its configuration) from
// refused texts, which are then isolated by halving (their claims get err, the others vec).
func embedClaims(ctx context.Context, p Embedder, todo []*embedClaim) error {
	if len(todo) == 0 {
		return nil
	}
	err := embedBatch(ctx, p, todo)
	if err == nil || !errors.Is(err, ai.ErrInvalidRequest) {
		return err
	}
	if _, perr := p.Embed(ctx, []string{embedProbeText}); perr != nil {
		if errors.Is(perr, ai.ErrInvalidRequest) {
			return fmt.Errorf("the embedding provider refuses even the text %q, so its model or settings are wrong: %w", embedProbeText, perr)
		}
		return fmt.Errorf("embed: %w", perr)
	}
	return isolateRefused(ctx, p, todo, err)
}

// embedBatch makes one provider call for the claims and gives each its vector.
func embedBatch(ctx context.Context, p Embedder, cs []*embedClaim) error {
	texts := make([]string, len(cs))
	for i, c := range cs {
		texts[i] = c.text
	}
	vecs, err := p.Embed(ctx, texts)
	if err != nil {
		return fmt.Errorf("embed %d product texts: %w", len(texts), err)
	}
	if len(vecs) != len(cs) {
		return fmt.Errorf("embed: the provider returned %d vectors for %d texts", len(vecs), len(cs))
	}
	for i, v := range vecs {
		if len(v) == 0 {
			return fmt.Errorf("embed: the provider returned an empty vector")
		}
		cs[i].vec = v
	}
	return nil
}

// isolateRefused halves a batch the provider refused (with err) until each refused text stands
// alone and is marked; the accepted halves get their vectors.
func isolateRefused(ctx context.Context, p Embedder, cs []*embedClaim, err error) error {
	if len(cs) == 1 {
		cs[0].err = err
		return nil
	}
	for _, half := range [][]*embedClaim{cs[:len(cs)/2], cs[len(cs)/2:]} {
		herr := embedBatch(ctx, p, half)
		if herr == nil {
			continue
		}
		if !errors.Is(herr, ai.ErrInvalidRequest) {
			return herr
		}
		if err := isolateRefused(ctx, p, half, herr); err != nil {
			return err
		}
	}
	return nil
}

// finishEmbeddings stores the vectors and settles the queue rows in one short transaction: done
// rows (embedded, unchanged, product gone) are deleted if their seq is the one read, and only
// the vectors of those are stored; refused rows count an attempt.
func (s *Service) finishEmbeddings(ctx context.Context, tenantID int64, model string, claims []*embedClaim, out *DrainResult) error {
	now := s.now().UTC()
	var done, failed []*embedClaim
	for _, c := range claims {
		if c.state == claimTodo && c.err != nil {
			failed = append(failed, c)
		} else {
			done = append(done, c)
		}
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var lock []int64
		for _, c := range done {
			if c.state == claimTodo {
				lock = append(lock, c.id)
			}
		}
		if len(lock) > 0 {
			// Products first, then their queue rows: the order of a product delete (which
			// cascades) and of a save, so none of them deadlocks with this transaction.
			if _, err := tx.Exec(ctx, `SELECT id FROM products WHERE tenant_id = $1 AND id = ANY($2) ORDER BY id FOR KEY SHARE`,
				tenantID, lock); err != nil {
				return fmt.Errorf("lock embedded products: %w", err)
			}
		}
		ids, seqs := claimKeys(done)
		rows, err := tx.Query(ctx, `DELETE FROM product_embedding_queue q USING unnest($2::bigint[], $3::bigint[]) AS u(id, seq)
			WHERE q.tenant_id = $1 AND q.product_id = u.id AND q.seq = u.seq RETURNING q.product_id`, tenantID, ids, seqs)
		if err != nil {
			return fmt.Errorf("settle embedding queue: %w", err)
		}
		deleted, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("settle embedding queue: %w", err)
		}
		current := make(map[int64]bool, len(deleted))
		for _, id := range deleted {
			current[id] = true
		}
		var embIDs []int64
		var embDims []int32
		var embHashes, embVecs [][]byte
		for _, c := range done {
			switch {
			case !current[c.id]:
				out.Superseded++
			case c.state == claimUnchanged:
				out.Unchanged++
			case c.state == claimTodo:
				embIDs, embDims = append(embIDs, c.id), append(embDims, int32(len(c.vec)))
				embHashes, embVecs = append(embHashes, c.hash), append(embVecs, EncodeVector(c.vec))
			}
		}
		if len(embIDs) > 0 {
			tag, err := tx.Exec(ctx, `INSERT INTO product_embeddings (product_id, tenant_id, model, dims, text_hash, vector, updated_at)
				SELECT u.id, $1, $2, u.d, u.h, u.v, $3 FROM unnest($4::bigint[], $5::int[], $6::bytea[], $7::bytea[]) AS u(id, d, h, v)
				ON CONFLICT (product_id) DO UPDATE SET model = EXCLUDED.model, dims = EXCLUDED.dims, text_hash = EXCLUDED.text_hash,
					vector = EXCLUDED.vector, updated_at = EXCLUDED.updated_at
				WHERE product_embeddings.tenant_id = EXCLUDED.tenant_id`,
				tenantID, model, now, embIDs, embDims, embHashes, embVecs)
			if err != nil {
				return fmt.Errorf("store product embeddings: %w", err)
			}
			out.Embedded = int(tag.RowsAffected())
		}
		if len(failed) == 0 {
			return nil
		}
		ids, seqs = claimKeys(failed)
		msgs := make([]string, len(failed))
		for i, c := range failed {
			msgs[i] = truncateText(c.err.Error(), maxLastError)
		}
		rows, err = tx.Query(ctx, `UPDATE product_embedding_queue q SET attempts = q.attempts + 1, last_error = u.msg,
				available_at = $2::timestamptz + make_interval(secs => $3 * power(2, least(q.attempts, 16)))
			FROM unnest($4::bigint[], $5::bigint[], $6::text[]) AS u(id, seq, msg)
			WHERE q.tenant_id = $1 AND q.product_id = u.id AND q.seq = u.seq RETURNING q.attempts`,
			tenantID, now, embedRetryAfter.Seconds(), ids, seqs, msgs)
		if err != nil {
			return fmt.Errorf("record refused embeddings: %w", err)
		}
		attempts, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return fmt.Errorf("record refused embeddings: %w", err)
		}
		out.Superseded += len(failed) - len(attempts)
		for _, a := range attempts {
			out.Failed++
			if a >= MaxEmbedAttempts {
				out.Parked++
			}
		}
		return nil
	})
}

// QueuedTenants lists the tenants with ready queue rows, for the sweep that kicks each one's
// drain (so a lost kick only delays). It reads across tenants: maintenance, not a request.
func (s *Service) QueuedTenants(ctx context.Context) ([]int64, error) {
	// A loose index scan: one index probe per tenant, not one row per queued product.
	rows, err := s.pool.Query(ctx, `WITH RECURSIVE t(id) AS (
			(SELECT tenant_id FROM product_embedding_queue
				WHERE attempts < $1 AND (available_at IS NULL OR available_at <= $2) ORDER BY tenant_id LIMIT 1)
			UNION ALL
			SELECT (SELECT q.tenant_id FROM product_embedding_queue q
				WHERE q.tenant_id > t.id AND q.attempts < $1 AND (q.available_at IS NULL OR q.available_at <= $2)
				ORDER BY q.tenant_id LIMIT 1)
			FROM t WHERE t.id IS NOT NULL)
		SELECT id FROM t WHERE id IS NOT NULL`, MaxEmbedAttempts, s.now().UTC())
	if err != nil {
		return nil, fmt.Errorf("list tenants with queued embeddings: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("list tenants with queued embeddings: %w", err)
	}
	return ids, nil
}

// EmbeddingBacklog counts the products of every tenant queued for an embedding and still tried
// (not parked after MaxEmbedAttempts refusals) and returns when the oldest of them was queued
// (zero when there are none). Maintenance across tenants, for the backlog's metrics: one scan of
// the queue.
func (s *Service) EmbeddingBacklog(ctx context.Context) (int64, time.Time, error) {
	var (
		n      int64
		oldest *time.Time
	)
	if err := s.pool.QueryRow(ctx, `SELECT count(*), min(queued_at) FROM product_embedding_queue WHERE attempts < $1`,
		MaxEmbedAttempts).Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, fmt.Errorf("measure the embedding backlog: %w", err)
	}
	if oldest == nil {
		return n, time.Time{}, nil
	}
	return n, *oldest, nil
}

// QueueStaleEmbeddings queues every product, of every tenant, that has no embedding or one of
// another model (or size, when dims > 0) and is not queued yet; it returns how many. The worker
// runs it at start, so a new embedding model re-embeds the catalogues. Maintenance across
// tenants: it reads every product once.
func (s *Service) QueueStaleEmbeddings(ctx context.Context, model string, dims int) (int64, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO product_embedding_queue (product_id, tenant_id, queued_at)
		SELECT p.id, p.tenant_id, $3 FROM products p LEFT JOIN product_embeddings e ON e.product_id = p.id
		WHERE e.product_id IS NULL OR e.model <> $1 OR ($2 > 0 AND e.dims <> $2)
		ON CONFLICT (product_id) DO NOTHING`, model, dims, s.now().UTC())
	if err != nil {
		return 0, fmt.Errorf("queue stale product embeddings: %w", err)
	}
	return tag.RowsAffected(), nil
}

// EmbeddingStatus counts a tenant's embeddings and queue.
type EmbeddingStatus struct {
	Embedded int64 `json:"embedded"` // products with a stored embedding (of any model)
	Queued   int64 `json:"queued"`   // waiting or being embedded
	Parked   int64 `json:"parked"`   // refused MaxEmbedAttempts times; waiting for a new save
}

// EmbeddingStatus returns the tenant's counts.
func (s *Service) EmbeddingStatus(ctx context.Context, tenantID int64) (EmbeddingStatus, error) {
	var out EmbeddingStatus
	err := s.pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM product_embeddings WHERE tenant_id = $1),
			count(*) FILTER (WHERE attempts < $2), count(*) FILTER (WHERE attempts >= $2)
		FROM product_embedding_queue WHERE tenant_id = $1`, tenantID, MaxEmbedAttempts).
		Scan(&out.Embedded, &out.Queued, &out.Parked)
	if err != nil {
		return out, fmt.Errorf("count product embeddings: %w", err)
	}
	return out, nil
}

// EncodeVector is the stored form of a vector: little-endian float32s.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// DecodeVector appends the float32s of a stored vector to dst.
func DecodeVector(dst []float32, b []byte) []float32 {
	n := len(b) / 4
	dst = slices.Grow(dst, n)
	for i := range n {
		dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return dst
}
