package page

import (
	"context"
	"fmt"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/search"
)

// checkSearchable refuses a generation from an AIQuery whose text the semantic search cannot
// use (no word at all: it embeds to nothing and would match no product), as a 400 on the field
// query that names the text.
func checkSearchable(queryID int64, text string) error {
	if search.HasWords(text) {
		return nil
	}
	return errs.Invalid("query", fmt.Sprintf("AIQuery %d's text %q %s", queryID, text, search.NoWordsMessage))
}

// SetPendingEmbeddings records on the page how many of the products its query could match are
// still queued for their embeddings (Page.PendingEmbeddings; n <= 0 clears it). The generation
// sets it while it waits for them, and leaves it on a page it generated without them. A page
// deleted meanwhile is errs.ErrNotFound.
func (s *Service) SetPendingEmbeddings(ctx context.Context, tenantID, pageID, n int64) error {
	var pending *int64
	if n > 0 {
		pending = &n
	}
	tag, err := s.pool.Exec(ctx, `UPDATE generated_pages SET pending_embeddings = $3
		WHERE tenant_id = $1 AND id = $2 AND pending_embeddings IS DISTINCT FROM $3`, tenantID, pageID, pending)
	if err != nil {
		return fmt.Errorf("record page %d pending embeddings: %w", pageID, err)
	}
	if tag.RowsAffected() == 0 {
		return s.pageExists(ctx, tenantID, pageID)
	}
	return nil // not shown by public reads: their cache stays
}
