package catalog

import "context"

// ClaimEmbeddingsAndDie takes up to limit of the tenant's queue rows as a drain does and never
// settles nor releases them, like a drain whose process was killed; it returns how many it took.
func (s *Service) ClaimEmbeddingsAndDie(ctx context.Context, tenantID int64, limit int) (int, error) {
	claims, _, err := s.claimEmbeddings(ctx, tenantID, limit)
	return len(claims), err
}
