package load

import (
	"testing"

	"github.com/cohort-dev/cohort/internal/warehouse"
)

// TestLoaderTakeBoundsBatches: a flush takes whole messages, oldest first, up to MaxBatchEvents
// (a message larger than that alone), and leaves the rest pending with the partition's oldest
// time, so a backlog is written in bounded transactions rather than one that grows with it.
func TestLoaderTakeBoundsBatches(t *testing.T) {
	l := &Loader{cfg: LoaderConfig{MaxBatchEvents: 10}}
	p := &partition{}
	sizes := []int{4, 5, 3, 12, 2}
	ds := make([]*delivery, len(sizes))
	for i, n := range sizes {
		ds[i] = &delivery{}
		p.queue(ds[i], make([]warehouse.Event, n))
	}
	oldest := p.oldest
	for _, want := range []struct {
		msgs []int // indices into ds
		n    int
		left int
	}{
		{[]int{0, 1}, 9, 17}, // 4+5; +3 would pass 10
		{[]int{2}, 3, 14},    // 3; +12 would pass 10
		{[]int{3}, 12, 2},    // larger than the bound: alone
		{[]int{4}, 2, 0},
		{nil, 0, 0},
	} {
		got, evs, n, left := l.take(p)
		if n != want.n || left != want.left || len(got) != len(want.msgs) || len(evs) != len(got) {
			t.Fatalf("take: %d messages, %d events, %d left; want %d, %d, %d", len(got), n, left, len(want.msgs), want.n, want.left)
		}
		for i, k := range want.msgs {
			if got[i] != ds[k] || len(evs[i]) != sizes[k] {
				t.Fatalf("take: message %d is not message %d of the queue", i, k)
			}
		}
		if p.nEvents != left {
			t.Fatalf("partition counts %d pending events, take says %d", p.nEvents, left)
		}
		if left > 0 && !p.oldest.Equal(oldest) {
			t.Fatalf("what stays pending lost the partition's oldest time")
		}
	}
}
