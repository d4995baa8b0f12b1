package segment

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
)

// LookalikeDefinition is the definition of a lookalike segment: the users most similar to a seed
// segment's members, by size (the top N) or by min_similarity (cosine, 0 to 1).
type LookalikeDefinition struct {
	SeedSegmentID int64    `json:"seed_segment_id"`
	Size          int      `json:"size,omitempty"`
	MinSimilarity *float64 `json:"min_similarity,omitempty"`
}

// MaxLookalikeSize caps a lookalike segment.
const MaxLookalikeSize = 1_000_000

var lookalikeKeys = []string{"seed_segment_id", "size", "min_similarity"}

// ParseLookalike validates a lookalike definition.
func ParseLookalike(raw []byte) (*LookalikeDefinition, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, errs.Invalid("definition", "must be a JSON object {seed_segment_id, size | min_similarity}")
	}
	f := errs.Fields{}
	(&parser{fields: f}).unknownKeys(m, "definition", lookalikeKeys, "a lookalike definition")
	var d LookalikeDefinition
	if r, ok := m["seed_segment_id"]; !ok {
		f.Add("definition.seed_segment_id", "is required")
	} else if json.Unmarshal(r, &d.SeedSegmentID) != nil || d.SeedSegmentID <= 0 {
		f.Add("definition.seed_segment_id", "must be a positive integer")
	}
	_, hasSize := m["size"]
	_, hasMin := m["min_similarity"]
	switch {
	case hasSize && hasMin:
		f.Add("definition", "set size or min_similarity, not both")
	case !hasSize && !hasMin:
		f.Add("definition", "set size (top N users) or min_similarity (0 to 1)")
	case hasSize:
		v, ok := finite(m["size"])
		if !ok || v != math.Trunc(v) || v < 1 || v > MaxLookalikeSize {
			f.Add("definition.size", "must be a whole number from 1 to %d", MaxLookalikeSize)
		} else {
			d.Size = int(v)
		}
	default:
		v, ok := finite(m["min_similarity"])
		if !ok || v <= 0 || v > 1 {
			f.Add("definition.min_similarity", "must be a number above 0 and at most 1")
		} else {
			d.MinSimilarity = &v
		}
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return &d, nil
}

// JSON is the canonical JSON of the definition.
func (d *LookalikeDefinition) JSON() []byte {
	b, _ := json.Marshal(d)
	return b
}

// ParseEvery reads refresh_every: a whole number and a unit, m (minutes), h (hours) or d (days),
// e.g. "30m", "1h", "1d"; "" or "off" turn scheduled refresh off (0).
func ParseEvery(s string) (int, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "" || s == "off" {
		return 0, nil
	}
	if len(s) < 2 {
		return 0, fmt.Errorf("must look like 30m, 1h or 1d, or be off")
	}
	n, err := strconv.Atoi(s[:len(s)-1])
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("must look like 30m, 1h or 1d, or be off")
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 'm':
		unit = time.Minute
	case 'h':
		unit = time.Hour
	case 'd':
		unit = 24 * time.Hour
	default:
		return 0, fmt.Errorf("must look like 30m, 1h or 1d, or be off")
	}
	if n > int(MaxRefreshEvery/unit) {
		return 0, fmt.Errorf("must be at most %s", FormatEvery(MaxRefreshEvery))
	}
	d := time.Duration(n) * unit
	if d < MinRefreshEvery || d > MaxRefreshEvery {
		return 0, fmt.Errorf("must be from %s to %s", FormatEvery(MinRefreshEvery), FormatEvery(MaxRefreshEvery))
	}
	return int(d / time.Second), nil
}

// FormatEvery writes a refresh interval in the largest whole unit.
func FormatEvery(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	case d%time.Hour == 0:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/time.Minute)) + "m"
}
