package segment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/cohort-dev/cohort/internal/errs"
)

// Segment types and statuses.
const (
	KindRule      = "rule"
	KindAI        = "ai"
	KindLookalike = "lookalike"

	StatusDraft     = "draft"
	StatusQueued    = "queued"
	StatusComputing = "computing"
	StatusReady     = "ready"
	StatusError     = "error"
)

// Limits of segment records.
const (
	MaxNameLength        = 200
	MaxDescriptionLength = 4000
	MinRefreshEvery      = 5 * time.Minute
	MaxRefreshEvery      = 31 * 24 * time.Hour
)

// Segment mirrors the segments table; its JSON is the API's segment record.
type Segment struct {
	ID               int64           `gorm:"primaryKey" json:"id"`
	TenantID         int64           `json:"tenant"`
	Name             string          `json:"name"`
	SegmentType      string          `json:"segment_type"`
	Description      string          `json:"description"`
	Definition       json.RawMessage `gorm:"type:jsonb" json:"definition"`
	Version          int             `json:"version"`
	Status           string          `json:"status"`
	ComputedCount    int64           `json:"computed_count"`
	ComputedVersion  *int            `json:"computed_version"`
	LastComputedAt   *time.Time      `json:"last_computed_at"`
	LastError        *string         `json:"last_error"`
	RefreshEverySecs *int            `json:"-"`
	RefreshEvery     *string         `gorm:"-" json:"refresh_every"`
	CreatedAt        time.Time       `json:"created_at"`
	UpdatedAt        time.Time       `json:"updated_at"`
}

func (s *Segment) fill() {
	if len(s.Definition) == 0 {
		s.Definition = json.RawMessage("null")
	}
	s.Definition = canonical(s.Definition)
	s.RefreshEvery = nil
	if s.RefreshEverySecs != nil {
		d := FormatEvery(time.Duration(*s.RefreshEverySecs) * time.Second)
		s.RefreshEvery = &d
	}
}

// canonical returns a stored definition in the field order of the language (jsonb sorts keys by
// length), or as stored when it does not parse.
func canonical(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return raw
	}
	if d, err := ParseDefinition(raw); err == nil {
		return d.JSON()
	}
	if d, err := ParseLookalike(raw); err == nil {
		return d.JSON()
	}
	return raw
}

// Version is one entry of a segment's definition history.
type Version struct {
	TenantID               int64           `json:"-"`
	SegmentID              int64           `json:"-"`
	Version                int             `json:"version"`
	Definition             json.RawMessage `gorm:"type:jsonb" json:"definition"`
	CreatedAt              time.Time       `json:"created_at"`
	ComputedCountAtVersion *int64          `json:"computed_count_at_version"`
}

func (Version) TableName() string { return "segment_versions" }

// Service owns segments, their versions, memberships and exports.
type Service struct {
	db      *gorm.DB
	pool    *pgxpool.Pool
	now     func() time.Time
	starter Starter
	// previewTimeout bounds a preview (previewTimeout; tests shorten it).
	previewTimeout time.Duration
}

// NewService builds the service over the metadata store. starter starts the segment workflows;
// nil where none are started (the worker): Compute, Patch, StartExport, Draft, a change of
// refresh_every and the deletion of a refreshed segment then answer ErrUnavailable.
func NewService(db *gorm.DB, pool *pgxpool.Pool, now func() time.Time, starter Starter) *Service {
	return &Service{db: db, pool: pool, now: now, starter: starter, previewTimeout: previewTimeout}
}

// CreateInput is the body of POST /api/segments/.
type CreateInput struct {
	Name        string `json:"name"`
	Tenant      *int64 `json:"tenant"`
	SegmentType string `json:"segment_type"`
	Description string `json:"description"`
}

// Create stores a new segment (no definition yet, status draft, version 0).
func (s *Service) Create(ctx context.Context, tenantID int64, in CreateInput) (*Segment, error) {
	f := errs.Fields{}
	in.Name = strings.TrimSpace(in.Name)
	checkText(f, "name", in.Name, MaxNameLength, true)
	checkText(f, "description", in.Description, MaxDescriptionLength, false)
	switch in.SegmentType {
	case KindRule, KindAI, KindLookalike:
	case "":
		f.Add("segment_type", "is required: rule, ai or lookalike")
	default:
		f.Add("segment_type", "must be one of rule, ai, lookalike")
	}
	if in.Tenant == nil {
		f.Add("tenant", "is required: your tenant id")
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	if *in.Tenant != tenantID {
		return nil, errs.Coded(errs.ErrForbidden, "wrong_tenant", "tenant %d is not the tenant of your credentials", *in.Tenant)
	}
	now := s.now().UTC()
	seg := &Segment{TenantID: tenantID, Name: in.Name, SegmentType: in.SegmentType, Description: in.Description,
		Status: StatusDraft, CreatedAt: now, UpdatedAt: now}
	if err := s.db.WithContext(ctx).Omit("Definition").Create(seg).Error; err != nil {
		return nil, fmt.Errorf("create segment: %w", err)
	}
	seg.fill()
	return seg, nil
}

func checkText(f errs.Fields, field, v string, max int, required bool) {
	switch {
	case required && v == "":
		f.Add(field, "is required")
	case len(v) > max:
		f.Add(field, "is longer than %d bytes", max)
	case !validText(v):
		f.Add(field, "must be valid UTF-8 text")
	}
}

// validText reports whether s can be a Postgres text value: valid UTF-8 without NUL.
func validText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// List returns the tenant's segments, oldest first.
func (s *Service) List(ctx context.Context, tenantID int64) ([]Segment, error) {
	var out []Segment
	if err := s.db.WithContext(ctx).Where("tenant_id = ?", tenantID).Order("id").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list segments: %w", err)
	}
	for i := range out {
		out[i].fill()
	}
	if out == nil {
		out = []Segment{}
	}
	return out, nil
}

// Get returns one of the tenant's segments; another tenant's is ErrNotFound.
func (s *Service) Get(ctx context.Context, tenantID, id int64) (*Segment, error) {
	return get(ctx, s.db, tenantID, id, false)
}

func get(ctx context.Context, db *gorm.DB, tenantID, id int64, lock bool) (*Segment, error) {
	var seg Segment
	q := db.WithContext(ctx).Where("tenant_id = ? AND id = ?", tenantID, id)
	if lock {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	err := q.Take(&seg).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("segment %d: %w", id, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load segment %d: %w", id, err)
	}
	seg.fill()
	return &seg, nil
}

// head reads the type and computed count of one of the tenant's segments, for callers that need
// no more (or only its existence): get also reads and re-encodes the definition (see fill).
func (s *Service) head(ctx context.Context, tenantID, id int64) (segmentType string, computedCount int64, err error) {
	err = s.pool.QueryRow(ctx, `SELECT segment_type, computed_count FROM segments WHERE tenant_id = $1 AND id = $2`, tenantID, id).
		Scan(&segmentType, &computedCount)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, fmt.Errorf("segment %d: %w", id, errs.ErrNotFound)
	}
	if err != nil {
		return "", 0, fmt.Errorf("load segment %d: %w", id, err)
	}
	return segmentType, computedCount, nil
}

// UpdateInput is the body of PATCH /api/segments/<id>/: only the fields present change.
type UpdateInput struct {
	Name         *string         `json:"name"`
	Description  *string         `json:"description"`
	Definition   json.RawMessage `json:"definition"`
	RefreshEvery *string         `json:"refresh_every"` // "1h", "30m", "1d"; "" or "off" turns it off
}

// UpdateResult says what an update changed.
type UpdateResult struct {
	Segment           *Segment
	DefinitionChanged bool
	RefreshChanged    bool
}

// Update applies a PATCH to the record. A new definition is validated (for its segment type),
// checked for in_segment references (the tenant's segments, no cycles), and stored as the next
// version. A new refresh_every changes the segment's refresh schedule before the transaction
// commits: when the schedule cannot be changed nothing is (ErrUnavailable), and when the commit
// fails afterwards the schedule is put back. Patch also queues the recompute of a new definition.
func (s *Service) Update(ctx context.Context, tenantID, id int64, in UpdateInput) (UpdateResult, error) {
	var res UpdateResult
	f := errs.Fields{}
	if in.Name != nil {
		*in.Name = strings.TrimSpace(*in.Name)
		checkText(f, "name", *in.Name, MaxNameLength, true)
	}
	if in.Description != nil {
		checkText(f, "description", *in.Description, MaxDescriptionLength, false)
	}
	var refresh *int
	if in.RefreshEvery != nil {
		secs, err := ParseEvery(*in.RefreshEvery)
		if err != nil {
			f.Add("refresh_every", "%s", err.Error())
		} else {
			refresh = &secs
		}
	}
	if err := f.Err(); err != nil {
		return res, err
	}
	err := s.commitWithSchedule(ctx, func(tx *gorm.DB, undo *func() error) error {
		seg, err := get(ctx, tx, tenantID, id, true)
		if err != nil {
			return err
		}
		now := s.now().UTC()
		updates := map[string]any{}
		oldEvery := refreshInterval(seg.RefreshEverySecs)
		if in.Name != nil {
			updates["name"] = *in.Name
		}
		if in.Description != nil {
			updates["description"] = *in.Description
		}
		if refresh != nil {
			var v any
			if *refresh > 0 {
				v = *refresh
			}
			old := 0
			if seg.RefreshEverySecs != nil {
				old = *seg.RefreshEverySecs
			}
			res.RefreshChanged = old != *refresh
			updates["refresh_every_secs"] = v
		}
		if len(in.Definition) > 0 && string(in.Definition) != "null" {
			canonical, err := s.validateFor(ctx, tx, seg, in.Definition)
			if err != nil {
				return err
			}
			// seg.Definition is canonical JSON too (fill re-encodes what jsonb gives back), so equal
			// definitions have equal bytes whatever layout either was sent or stored in.
			if !bytes.Equal(canonical, seg.Definition) {
				res.DefinitionChanged = true
				next := seg.Version + 1
				updates["definition"] = string(canonical)
				updates["version"] = next
				if err := tx.Create(&Version{TenantID: tenantID, SegmentID: id, Version: next,
					Definition: canonical, CreatedAt: now}).Error; err != nil {
					return fmt.Errorf("store version: %w", err)
				}
			}
		} else if string(in.Definition) == "null" {
			return errs.Invalid("definition", "cannot be removed; send a new definition")
		}
		if len(updates) == 0 {
			res.Segment = seg
			return nil
		}
		updates["updated_at"] = now
		if err := tx.Model(&Segment{}).Where("tenant_id = ? AND id = ?", tenantID, id).Updates(updates).Error; err != nil {
			return fmt.Errorf("update segment %d: %w", id, err)
		}
		if res.Segment, err = get(ctx, tx, tenantID, id, false); err != nil {
			return err
		}
		if res.RefreshChanged {
			if *undo, err = s.setRefreshInTx(ctx, tenantID, id, oldEvery, refreshInterval(res.Segment.RefreshEverySecs)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return UpdateResult{}, err
	}
	return res, nil
}

// validateFor checks a definition for the segment's type and returns its canonical JSON.
func (s *Service) validateFor(ctx context.Context, tx *gorm.DB, seg *Segment, raw json.RawMessage) (json.RawMessage, error) {
	if seg.SegmentType == KindLookalike {
		ld, err := ParseLookalike(raw)
		if err != nil {
			return nil, err
		}
		if ld.SeedSegmentID == seg.ID {
			return nil, errs.Invalid("definition.seed_segment_id", "cannot be the segment itself")
		}
		// The seed counts as a reference: it must not depend on this segment (an in_segment on it,
		// directly or through other segments), so the graph stays free of cycles.
		graph, err := refGraph(ctx, tx, seg.TenantID)
		if err != nil {
			return nil, err
		}
		switch missing, cycle := refProblem(graph, seg.ID, []int64{ld.SeedSegmentID}); {
		case missing != 0:
			return nil, errs.Invalid("definition.seed_segment_id", fmt.Sprintf("segment %d does not exist", missing))
		case cycle:
			return nil, errs.Invalid("definition.seed_segment_id", fmt.Sprintf("segment %d refers back to this segment; the references would form a cycle", ld.SeedSegmentID))
		}
		return ld.JSON(), nil
	}
	def, err := ParseDefinition(raw)
	if err != nil {
		return nil, err
	}
	if err := checkRefs(ctx, tx, seg.TenantID, seg.ID, def); err != nil {
		return nil, err
	}
	return def.JSON(), nil
}

// checkRefs makes sure the in_segment conditions of segment selfID's new definition (selfID 0: a
// preview) name the tenant's segments and form no cycle.
func checkRefs(ctx context.Context, tx *gorm.DB, tenantID, selfID int64, def *Definition) error {
	refs := def.SegmentRefs()
	if len(refs) == 0 {
		return nil
	}
	graph, err := refGraph(ctx, tx, tenantID)
	if err != nil {
		return err
	}
	switch missing, cycle := refProblem(graph, selfID, refs); {
	case missing != 0:
		return errs.Invalid("definition", fmt.Sprintf("in_segment refers to segment %d, which does not exist", missing))
	case cycle:
		return errs.Invalid("definition", "in_segment references form a cycle back to this segment")
	}
	return nil
}

// refGraph loads the tenant's segment graph: every segment, with the segments its stored
// definition refers to (nil without a definition).
func refGraph(ctx context.Context, tx *gorm.DB, tenantID int64) (map[int64][]int64, error) {
	var rows []Segment
	if err := tx.WithContext(ctx).Select("id", "definition", "segment_type").Where("tenant_id = ?", tenantID).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("load segment graph: %w", err)
	}
	graph := make(map[int64][]int64, len(rows))
	for i := range rows {
		graph[rows[i].ID] = rows[i].refs()
	}
	return graph, nil
}

// refs lists the segments a stored definition refers to: its in_segment ids, or a lookalike's
// seed. A definition that no longer parses refers to none.
func (s *Segment) refs() []int64 {
	if len(s.Definition) == 0 {
		return nil
	}
	if s.SegmentType == KindLookalike {
		if ld, err := ParseLookalike(s.Definition); err == nil {
			return []int64{ld.SeedSegmentID}
		}
		return nil
	}
	if d, err := ParseDefinition(s.Definition); err == nil {
		return d.SegmentRefs()
	}
	return nil
}

// refProblem checks refs, what segment selfID would refer to, against the graph: the first
// segment that does not exist (0 when all do), and whether the references would form a cycle.
// graph is modified: selfID's edges become refs.
func refProblem(graph map[int64][]int64, selfID int64, refs []int64) (missing int64, cycle bool) {
	for _, ref := range refs {
		if _, ok := graph[ref]; !ok {
			return ref, false
		}
	}
	graph[selfID] = refs
	// Depth-first search from the segment: reaching a segment still being visited is a cycle.
	state := map[int64]int{} // 1 visiting, 2 done
	var visit func(id int64) bool
	visit = func(id int64) bool {
		if state[id] == 1 {
			return true
		}
		if state[id] == 2 {
			return false
		}
		state[id] = 1
		for _, n := range graph[id] {
			if visit(n) {
				return true
			}
		}
		state[id] = 2
		return false
	}
	return 0, visit(selfID)
}

// Delete removes a segment with its versions, members, runs and exports, and its refresh
// schedule. The schedule is deleted last, before the transaction commits: a deletion that fails
// (a segment still in use, say) leaves the schedule, and a commit that fails after it puts the
// schedule back. (A schedule left over anyway finds no segment and ends: see SegmentCompute.)
func (s *Service) Delete(ctx context.Context, tenantID, id int64) error {
	return s.commitWithSchedule(ctx, func(tx *gorm.DB, undo *func() error) error {
		seg, err := get(ctx, tx, tenantID, id, true)
		if err != nil {
			return err
		}
		if users, err := dependents(ctx, tx, tenantID, id); err != nil {
			return err
		} else if len(users) > 0 {
			return errs.Coded(errs.ErrConflict, "segment_in_use", "segment %d is used by segment(s) %v (in_segment or lookalike seed); change those first", id, users)
		}
		if err := tx.Exec("DELETE FROM segment_members WHERE tenant_id = ? AND segment_id = ?", tenantID, id).Error; err != nil {
			return fmt.Errorf("delete members: %w", err)
		}
		if err := tx.Exec("DELETE FROM segments WHERE tenant_id = ? AND id = ?", tenantID, id).Error; err != nil {
			return fmt.Errorf("delete segment %d: %w", id, err)
		}
		if err := bumpCache(ctx, tx, tenantID); err != nil {
			return err
		}
		if every := refreshInterval(seg.RefreshEverySecs); every > 0 {
			if *undo, err = s.setRefreshInTx(ctx, tenantID, id, every, 0); err != nil {
				return err
			}
		}
		return nil
	})
}

// dependents lists, in id order, the tenant's segments whose definition refers to segment id.
func dependents(ctx context.Context, tx *gorm.DB, tenantID, id int64) ([]int64, error) {
	graph, err := refGraph(ctx, tx, tenantID)
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, other := range slices.Sorted(maps.Keys(graph)) {
		if other != id && slices.Contains(graph[other], id) {
			out = append(out, other)
		}
	}
	return out, nil
}

// Versions returns the definition history, newest first.
func (s *Service) Versions(ctx context.Context, tenantID, id int64) ([]Version, error) {
	var out []Version
	if err := s.db.WithContext(ctx).Where("tenant_id = ? AND segment_id = ?", tenantID, id).Order("version DESC").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list versions: %w", err)
	}
	if len(out) == 0 {
		// No history: a segment without a definition yet, or none of the tenant's.
		if _, _, err := s.head(ctx, tenantID, id); err != nil {
			return nil, err
		}
		return []Version{}, nil
	}
	for i := range out {
		out[i].Definition = canonical(out[i].Definition)
	}
	return out, nil
}

// MarkQueued records that a compute was requested (unless one is already computing).
func (s *Service) MarkQueued(ctx context.Context, tenantID, id int64) (*Segment, error) {
	// The conditional update comes first; the read after it tells a missing segment or one
	// without a definition (which the update left alone) from a queued one.
	if err := s.db.WithContext(ctx).Exec(`UPDATE segments SET status = 'queued', updated_at = ?
		WHERE tenant_id = ? AND id = ? AND definition IS NOT NULL AND status <> 'computing'`,
		s.now().UTC(), tenantID, id).Error; err != nil {
		return nil, fmt.Errorf("queue segment %d: %w", id, err)
	}
	seg, err := s.Get(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	if string(seg.Definition) == "null" {
		return nil, errs.Coded(errs.ErrConflict, "no_definition", "segment %d has no definition yet; PATCH one first", id)
	}
	return seg, nil
}

// MarkError records a failure to start or run a compute.
func (s *Service) MarkError(ctx context.Context, tenantID, id int64, msg string) error {
	return s.db.WithContext(ctx).Exec(`UPDATE segments SET status = 'error', last_error = ?, updated_at = ? WHERE tenant_id = ? AND id = ?`,
		truncate(msg, 2000), s.now().UTC(), tenantID, id).Error
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}
