package store

import "fmt"

// LockKind names what a Postgres advisory lock protects. Every kind has its own key space, so a
// lock of one kind never blocks, or is mistaken for, a lock of another.
type LockKind uint8

// The kinds of advisory locks. Values are part of the key: never renumber one that shipped.
const (
	LockMigrations            LockKind = 1 // id 0: one migrator at a time
	LockCatalogSchema         LockKind = 2 // id: tenant; schema writers exclusive, product writes shared
	LockSegmentCompute        LockKind = 3 // id: segment; one compute of a segment at a time
	LockProductSegmentCompute LockKind = 4 // id: product segment
	LockConnectorSync         LockKind = 5 // id: activation connector; one sync at a time
)

// lockIDBits is how many low bits of a key hold the id; the kind takes the 8 above them.
const lockIDBits = 56

// LockKey is the 64-bit advisory-lock key of (kind, id): the kind in the top 8 bits and the id in
// the low 56, so two different pairs never share a key. An id outside [0, 2^56) has no key of its
// own and is refused (Postgres ids from sequences do not get there).
func LockKey(kind LockKind, id int64) (int64, error) {
	if kind == 0 {
		return 0, fmt.Errorf("lock key: no kind")
	}
	if id < 0 || id >= 1<<lockIDBits {
		return 0, fmt.Errorf("lock key: %d is out of range for an advisory lock id", id)
	}
	return int64(uint64(kind)<<lockIDBits | uint64(id)), nil
}
