package search

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// f32File holds a set's float32 vectors outside the Go heap: in an unlinked file under the
// index's directory, written with pwrite and read through a read-only shared memory mapping.
// The pages are the kernel's page cache, not the process's anonymous memory: the rescoring of a
// search touches only its candidates' pages, and the kernel drops pages under memory pressure
// (they are read back from the file when next needed).
//
// Not safe for concurrent use: the set's RWMutex guards it (remap only under the write lock).
type f32File struct {
	dir string
	f   *os.File
	mem []byte // the mapping; len is the file's size
}

// close releases the mapping and the file (the space goes with them); idempotent.
func (ff *f32File) close() {
	if ff.mem != nil {
		_ = unix.Munmap(ff.mem)
		ff.mem = nil
	}
	if ff.f != nil {
		_ = ff.f.Close()
		ff.f = nil
	}
}

// grow makes the file hold size bytes and maps it anew; the previous mapping is released.
func (ff *f32File) grow(size int) error {
	if ff.f == nil {
		f, err := os.CreateTemp(ff.dir, "cohort-search-*.f32")
		if err != nil {
			return fmt.Errorf("create the search vectors file: %w", err)
		}
		// Unlinked at once: the space is freed when the set is dropped or the process ends,
		// whatever way it ends.
		_ = os.Remove(f.Name())
		ff.f = f
	}
	if err := ff.f.Truncate(int64(size)); err != nil {
		return fmt.Errorf("grow the search vectors file to %d bytes: %w", size, err)
	}
	mem, err := unix.Mmap(int(ff.f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map the search vectors file: %w", err)
	}
	if ff.mem != nil {
		_ = unix.Munmap(ff.mem)
	}
	ff.mem = mem
	return nil
}

// floats is the mapping as float32s (nil before the first grow).
func (ff *f32File) floats() []float32 {
	if len(ff.mem) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&ff.mem[0])), len(ff.mem)/4)
}

// write stores x at float index at (the mapping sees it: one page cache).
func (ff *f32File) write(at int, x []float32) error {
	if len(x) == 0 {
		return nil
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
	if _, err := ff.f.WriteAt(b, int64(at)*4); err != nil {
		return fmt.Errorf("write the search vectors file: %w", err)
	}
	return nil
}
