package store_test

import (
	"fmt"
	"testing"

	"github.com/cohort-dev/cohort/internal/store"
)

func TestLockKeyIsCollisionFree(t *testing.T) {
	kinds := []store.LockKind{store.LockMigrations, store.LockCatalogSchema, store.LockSegmentCompute,
		store.LockProductSegmentCompute, store.LockConnectorSync}
	// Ids around every width an older scheme truncated to (int32, 40 bits) and the top of the range.
	ids := []int64{0, 1, 2, 1<<31 - 1, 1 << 31, 1<<31 + 1, 1 << 32, 1<<32 + 1, 1 << 40, 1<<40 + 1, 1<<56 - 1}
	seen := map[int64]string{}
	for _, k := range kinds {
		for _, id := range ids {
			key, err := store.LockKey(k, id)
			if err != nil {
				t.Fatalf("LockKey(%d, %d): %v", k, id, err)
			}
			if prev, dup := seen[key]; dup {
				t.Fatalf("LockKey(%d, %d) = %d, the key of %s too", k, id, key, prev)
			}
			seen[key] = fmt.Sprintf("kind %d id %d", k, id)
		}
	}
}

func TestLockKeyRefusesWhatItCannotKeyApart(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind store.LockKind
		id   int64
	}{
		{"negative id", store.LockSegmentCompute, -1},
		{"id of 2^56", store.LockSegmentCompute, 1 << 56},
		{"no kind", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if key, err := store.LockKey(tc.kind, tc.id); err == nil {
				t.Fatalf("LockKey(%d, %d) = %d, want an error", tc.kind, tc.id, key)
			}
		})
	}
}
