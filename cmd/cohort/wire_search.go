package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/search"
)

// searchFor builds the semantic search of a role over the configured AI provider (nil when the
// configuration cannot build one: the reason is logged once, and every search then answers 503
// embedding_unavailable). dev builds one and shares it between its API and its worker, so the
// process holds one copy of each tenant's vectors.
func (c *core) searchFor(ctx context.Context, provider ai.Provider, providerErr error) *search.Service {
	var embedder search.Embedder = brokenEmbedder{err: errors.New("no ai provider is configured")}
	switch {
	case providerErr != nil:
		c.log.Error("semantic search: the AI provider cannot be built; searches answer 503", "error", providerErr)
		embedder = brokenEmbedder{err: providerErr}
	case provider != nil:
		embedder = provider
	}
	return c.openSearch(ctx, embedder)
}

// openSearch builds a search service over a new in-process vector index, whose listener runs
// until ctx ends or the core closes (which waits for it). A role builds one per process. The
// index's memory budget is COHORT_SEARCH_MEMORY, else half of GOMEMLIMIT (set from the
// container's limit in deploy/k8s); its gauges go on the process's registry.
func (c *core) openSearch(ctx context.Context, embedder search.Embedder) *search.Service {
	budget := c.cfg.SearchMemory(debug.SetMemoryLimit(-1))
	index := search.NewEmbedded(c.db.Pool, c.log, time.Now, search.IndexConfig{MaxBytes: budget, Dir: c.cfg.Search.Dir})
	if err := c.reg.Register(search.NewIndexCollector(index)); err != nil {
		c.log.Warn("search index metrics not registered", "error", err)
	}
	c.log.Info("semantic search index", "memory_budget", search.FormatBytes(budget), "vectors_dir", c.cfg.Search.Dir)
	c.closers = append(c.closers, superviseIndex(ctx, index, c.log))
	return search.NewService(c.db.Pool, embedder, index, time.Now, c.log, search.Config{})
}

// superviseIndex runs the index's listener until ctx ends or the returned stop is called; stop
// waits for it. Run reconnects after failures (logging each); an error it returns is logged.
func superviseIndex(ctx context.Context, index *search.Embedded, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := index.Run(ctx); err != nil {
			log.Error("product vector index listener stopped; searches read changes themselves", "error", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// brokenEmbedder stands in for a provider the configuration cannot build.
type brokenEmbedder struct{ err error }

func (b brokenEmbedder) EmbeddingModel() string { return "" }

func (b brokenEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	return nil, fmt.Errorf("ai provider: %w", b.err)
}
