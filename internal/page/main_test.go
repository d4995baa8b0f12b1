package page

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// recordingGenerator records generation starts; err makes them fail.
type recordingGenerator struct {
	mu    sync.Mutex
	pages [][2]int64
	bulks [][2]int64
	err   error
}

func (g *recordingGenerator) StartGeneration(_ context.Context, tenantID, pageID int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pages = append(g.pages, [2]int64{tenantID, pageID})
	return g.err
}

func (g *recordingGenerator) StartBulk(_ context.Context, tenantID, jobID int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.bulks = append(g.bulks, [2]int64{tenantID, jobID})
	return g.err
}

func (g *recordingGenerator) setErr(err error) {
	g.mu.Lock()
	g.err = err
	g.mu.Unlock()
}

type env struct {
	t   *testing.T
	ctx context.Context
	db  *store.DB
	gen *recordingGenerator
	svc *Service
	a   int64 // tenant "tenant-a"
	b   int64 // tenant "tenant-b"
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	db := testenv.OpenDB(t)
	gen := &recordingGenerator{}
	e := &env{t: t, ctx: context.Background(), db: db, gen: gen}
	e.svc = NewService(db.Pool, gen, time.Now, nil, opts)
	e.a = testenv.Tenant(t, db, "tenant-a")
	e.b = testenv.Tenant(t, db, "tenant-b")
	return e
}

func (e *env) query(tenantID int64, text string) *AIQuery {
	e.t.Helper()
	q, err := e.svc.CreateQuery(e.ctx, tenantID, QueryInput{Text: text})
	if err != nil {
		e.t.Fatalf("create query %q: %v", text, err)
	}
	return q
}

func (e *env) page(tenantID int64, in CreateInput) *Page {
	e.t.Helper()
	p, err := e.svc.CreatePage(e.ctx, tenantID, in)
	if err != nil {
		e.t.Fatalf("create page: %v", err)
	}
	return p
}

var errDown = errors.New("temporal is down")
