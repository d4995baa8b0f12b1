// Package connector owns activation connectors: the records (config validated per platform kind,
// secrets sealed at rest and always returned as ***), their sync runs, and the sync engine that
// pushes a segment's membership changes to a platform adapter chunk by chunk, remembering what
// the platform acknowledged so every sync sends only the difference.
package connector

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

	"github.com/jackc/pgx/v5/pgxpool"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/secretbox"
)

// Connector statuses.
const (
	StatusInactive = "inactive" // no automatic syncs
	StatusActive   = "active"   // syncs after every recompute of the segment
	StatusError    = "error"    // the last sync failed; no automatic syncs until activated again
)

// MaxNameLength bounds a connector's name.
const MaxNameLength = 200

// Connector is the API's connector record.
type Connector struct {
	ID           int64          `json:"id"`
	SegmentID    int64          `json:"segment_id"`
	Kind         string         `json:"kind"`
	Name         string         `json:"name"`
	Status       string         `json:"status"`
	Config       map[string]any `json:"config"` // secrets masked as ***
	LastSyncedAt *time.Time     `json:"last_synced_at"`
	LastError    *string        `json:"last_error"`
	CreatedAt    time.Time      `json:"created_at"`
	UpdatedAt    time.Time      `json:"updated_at"`
}

// row mirrors activation_connectors.
type row struct {
	ID           int64
	TenantID     int64
	SegmentID    int64
	Kind         string
	Name         string
	Status       string
	Config       json.RawMessage `gorm:"type:jsonb"`
	Secrets      json.RawMessage `gorm:"type:jsonb"`
	LastSyncedAt *time.Time
	LastError    *string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

func (row) TableName() string { return "activation_connectors" }

// record is the API view of r: plain config plus every sealed field as ***.
func (r *row) record() *Connector {
	cfg := decodeConfig(r.Config)
	for k, v := range cfg {
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				cfg[k] = i
			}
		}
		if IsSecretField(k) {
			cfg[k] = Masked // defence in depth: a secret never sits in config, but never show one
		}
	}
	var sealed map[string]string
	_ = json.Unmarshal(r.Secrets, &sealed)
	for k := range sealed {
		cfg[k] = Masked
	}
	return &Connector{ID: r.ID, SegmentID: r.SegmentID, Kind: r.Kind, Name: r.Name, Status: r.Status, Config: cfg,
		LastSyncedAt: r.LastSyncedAt, LastError: r.LastError, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// Service owns connectors, their sync runs and the members each platform holds.
type Service struct {
	db   *gorm.DB
	pool *pgxpool.Pool
	box  *secretbox.Box
	now  func() time.Time
	// allowHTTP admits http:// platform URLs (COHORT_ALLOW_PRIVATE_NETWORKS, dev and tests).
	allowHTTP bool
	// syncSlots bounds the pushes running at once in this process (each holds one Postgres
	// connection for its connector lock).
	syncSlots chan struct{}
	// starter starts manual syncs (RequestSync); nil where syncs are not requested.
	starter SyncStarter
}

// Options of the service.
type Options struct {
	// AllowHTTP admits http:// platform URLs (set with COHORT_ALLOW_PRIVATE_NETWORKS for dev and
	// tests); production connectors must use https.
	AllowHTTP bool
	// MaxConcurrentSyncs bounds the pushes one process runs at once (default 32); each holds a
	// Postgres connection of its own, outside the pool, for its connector's lock.
	MaxConcurrentSyncs int
	// Starter starts the workflow of a manual sync (RequestSync); nil in a process that only
	// runs syncs (the worker), where RequestSync answers 503.
	Starter SyncStarter
}

// NewService builds the service.
func NewService(db *gorm.DB, pool *pgxpool.Pool, box *secretbox.Box, now func() time.Time, o Options) *Service {
	if o.MaxConcurrentSyncs <= 0 {
		o.MaxConcurrentSyncs = 32
	}
	return &Service{db: db, pool: pool, box: box, now: now, allowHTTP: o.AllowHTTP,
		syncSlots: make(chan struct{}, o.MaxConcurrentSyncs), starter: o.Starter}
}

// CreateInput is the body of POST /api/activations/.
type CreateInput struct {
	SegmentID *int64          `json:"segment_id"`
	Kind      string          `json:"kind"`
	Name      string          `json:"name"`
	Config    json.RawMessage `json:"config"`
}

// UpdateInput is the body of PATCH /api/activations/<id>/.
type UpdateInput struct {
	Status *string          `json:"status"`
	Name   *string          `json:"name"`
	Config *json.RawMessage `json:"config"`
}

func aad(tenantID, id int64, field string) string {
	return fmt.Sprintf("tenant:%d/activation_connector:%d/%s", tenantID, id, field)
}

// Create stores an inactive connector of the tenant's segment.
func (s *Service) Create(ctx context.Context, tenantID int64, in CreateInput) (*Connector, error) {
	f := errs.Fields{}
	if in.SegmentID == nil || *in.SegmentID <= 0 {
		f.Add("segment_id", "is required: the id of the segment to sync")
	}
	if !slices.Contains(Kinds, in.Kind) {
		if in.Kind == "" {
			f.Add("kind", "is required: one of %s", strings.Join(Kinds, ", "))
		} else {
			f.Add("kind", "must be one of %s", strings.Join(Kinds, ", "))
		}
	}
	in.Name = strings.TrimSpace(in.Name)
	checkName(f, in.Name)
	cfg := parseConfig(in.Kind, in.Config, false, s.allowHTTP, f)
	if err := f.Err(); err != nil {
		return nil, err
	}
	var out *Connector
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var n int64
		if err := tx.Raw("SELECT count(*) FROM segments WHERE tenant_id = ? AND id = ?", tenantID, *in.SegmentID).Scan(&n).Error; err != nil {
			return fmt.Errorf("find segment: %w", err)
		}
		if n == 0 {
			return errs.Invalid("segment_id", fmt.Sprintf("no segment %d", *in.SegmentID))
		}
		if in.Kind == KindBraze {
			if _, ok := cfg.plain["attribute"]; !ok {
				cfg.plain["attribute"] = DefaultBrazeAttribute(*in.SegmentID)
			}
		}
		plain, _ := json.Marshal(cfg.plain)
		now := s.clock()
		r := &row{TenantID: tenantID, SegmentID: *in.SegmentID, Kind: in.Kind, Name: in.Name, Status: StatusInactive,
			Config: plain, Secrets: json.RawMessage("{}"), CreatedAt: now, UpdatedAt: now}
		if err := tx.Create(r).Error; err != nil {
			return fmt.Errorf("create connector: %w", err)
		}
		// Seal once the id is known, so each ciphertext only opens for its own row and field.
		sealed, err := s.seal(tenantID, r.ID, nil, cfg.secrets)
		if err != nil {
			return err
		}
		r.Secrets = sealed
		if err := tx.Model(r).UpdateColumn("secrets", sealed).Error; err != nil {
			return fmt.Errorf("store connector secrets: %w", err)
		}
		out = r.record()
		return nil
	})
	return out, err
}

func checkName(f errs.Fields, name string) {
	switch {
	case name == "":
		f.Add("name", "is required")
	case len(name) > MaxNameLength:
		f.Add("name", "is longer than %d bytes", MaxNameLength)
	case !validText(name):
		f.Add("name", "must be valid UTF-8 text")
	}
}

func validText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// seal returns the secrets column: the existing sealed values with each of set sealed anew.
func (s *Service) seal(tenantID, id int64, existing map[string]string, set map[string]string) (json.RawMessage, error) {
	out := maps.Clone(existing)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range set {
		sv, err := s.box.SealString(v, aad(tenantID, id, k))
		if err != nil {
			return nil, fmt.Errorf("seal %s: %w", k, err)
		}
		out[k] = sv
	}
	return json.Marshal(out)
}

// List returns the tenant's connectors (of one segment when segmentID > 0), oldest first.
func (s *Service) List(ctx context.Context, tenantID, segmentID int64) ([]*Connector, error) {
	q := s.db.WithContext(ctx).Where("tenant_id = ?", tenantID)
	if segmentID > 0 {
		q = q.Where("segment_id = ?", segmentID)
	}
	var rows []row
	if err := q.Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list connectors: %w", err)
	}
	out := make([]*Connector, len(rows))
	for i := range rows {
		out[i] = rows[i].record()
	}
	return out, nil
}

// Get returns one of the tenant's connectors; another tenant's is ErrNotFound.
func (s *Service) Get(ctx context.Context, tenantID, id int64) (*Connector, error) {
	r, err := getRow(ctx, s.db, tenantID, id, false)
	if err != nil {
		return nil, err
	}
	return r.record(), nil
}

func getRow(ctx context.Context, db *gorm.DB, tenantID, id int64, lock bool) (*row, error) {
	var r row
	q := db.WithContext(ctx).Where("tenant_id = ? AND id = ?", tenantID, id)
	if lock {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	err := q.Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("activation connector %d: %w", id, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load activation connector %d: %w", id, err)
	}
	return &r, nil
}

// Update applies a PATCH: status active (which also clears the error state) or inactive (pause),
// name, and config merged field by field (null removes an optional field, *** keeps a secret).
func (s *Service) Update(ctx context.Context, tenantID, id int64, in UpdateInput) (*Connector, error) {
	var out *Connector
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		r, err := getRow(ctx, tx, tenantID, id, true)
		if err != nil {
			return err
		}
		f := errs.Fields{}
		updates := map[string]any{}
		if in.Status != nil {
			switch *in.Status {
			case StatusActive:
				updates["status"] = StatusActive
				updates["last_error"] = nil
			case StatusInactive:
				updates["status"] = StatusInactive
			default:
				f.Add("status", "must be active or inactive (error is set by failed syncs)")
			}
		}
		if in.Name != nil {
			name := strings.TrimSpace(*in.Name)
			checkName(f, name)
			updates["name"] = name
		}
		if in.Config != nil {
			cfg := parseConfig(r.Kind, *in.Config, true, s.allowHTTP, f)
			if err := f.Err(); err != nil {
				return err
			}
			plain := decodeConfig(r.Config)
			before := maps.Clone(plain)
			var sealed map[string]string
			_ = json.Unmarshal(r.Secrets, &sealed)
			for _, k := range cfg.unset {
				delete(plain, k)
				delete(sealed, k)
			}
			maps.Copy(plain, cfg.plain)
			if r.Kind == KindBraze {
				if _, ok := plain["attribute"]; !ok {
					plain["attribute"] = DefaultBrazeAttribute(r.SegmentID)
				}
			}
			secrets, err := s.seal(tenantID, id, sealed, cfg.secrets)
			if err != nil {
				return err
			}
			cfgJSON, _ := json.Marshal(plain)
			updates["config"] = json.RawMessage(cfgJSON)
			updates["secrets"] = secrets
			if destinationChanged(before, plain) {
				// A new list, audience, attribute or account holds none of the members: the next
				// sync sends everyone again. (The old destination keeps what it was sent.)
				if err := tx.Exec("DELETE FROM activation_members WHERE tenant_id = ? AND connector_id = ?", tenantID, id).Error; err != nil {
					return fmt.Errorf("reset synced members of connector %d: %w", id, err)
				}
			}
		}
		if err := f.Err(); err != nil {
			return err
		}
		if len(updates) > 0 {
			updates["updated_at"] = s.clock()
			if err := tx.Model(r).Updates(updates).Error; err != nil {
				return fmt.Errorf("update connector %d: %w", id, err)
			}
			if r, err = getRow(ctx, tx, tenantID, id, false); err != nil {
				return err
			}
		}
		out = r.record()
		return nil
	})
	return out, err
}

// Delete removes the connector, its runs and its record of what the platform holds (the
// platform keeps its audience as it is).
func (s *Service) Delete(ctx context.Context, tenantID, id int64) error {
	res := s.db.WithContext(ctx).Exec("DELETE FROM activation_connectors WHERE tenant_id = ? AND id = ?", tenantID, id)
	if res.Error != nil {
		return fmt.Errorf("delete connector %d: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("activation connector %d: %w", id, errs.ErrNotFound)
	}
	return nil
}

// Target is an active connector of a segment as the fan-out names it in its sync's summary.
type Target struct {
	ID   int64
	Name string
	Kind string
}

// ActiveTargets are the active connectors of a segment (the fan-out after a recompute) with their
// names and kinds, in id order.
func (s *Service) ActiveTargets(ctx context.Context, tenantID, segmentID int64) ([]Target, error) {
	out := []Target{}
	err := s.db.WithContext(ctx).Raw(
		"SELECT id, name, kind FROM activation_connectors WHERE tenant_id = ? AND segment_id = ? AND status = ? ORDER BY id",
		tenantID, segmentID, StatusActive).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("active connectors of segment %d: %w", segmentID, err)
	}
	return out, nil
}

// Credentials are a connector's kind, plain config and opened secrets: only the sync activity
// asks for them, and they never leave the worker process.
type Credentials struct {
	ConnectorID int64
	SegmentID   int64
	Kind        string
	Config      map[string]any
	Secrets     map[string]string
}

// Credentials opens a connector's secrets.
func (s *Service) Credentials(ctx context.Context, tenantID, id int64) (*Credentials, error) {
	r, err := getRow(ctx, s.db, tenantID, id, false)
	if err != nil {
		return nil, err
	}
	c := &Credentials{ConnectorID: r.ID, SegmentID: r.SegmentID, Kind: r.Kind, Config: decodeConfig(r.Config), Secrets: map[string]string{}}
	var sealed map[string]string
	_ = json.Unmarshal(r.Secrets, &sealed)
	for k, v := range sealed {
		plain, err := s.box.OpenString(v, aad(tenantID, id, k))
		if err != nil {
			return nil, fmt.Errorf("open %s of connector %d: %w", k, id, err)
		}
		c.Secrets[k] = plain
	}
	return c, nil
}

// clock is the current time as Postgres stores it (UTC, microseconds), so a record answered
// from memory equals the same record read back.
func (s *Service) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// decodeConfig reads a stored config, numbers as json.Number so large ids keep every digit.
func decodeConfig(raw json.RawMessage) map[string]any {
	cfg := map[string]any{}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	_ = d.Decode(&cfg)
	return cfg
}

// destinationFields name where a connector's members live; changing one starts over.
var destinationFields = []string{"list_id", "audience_id", "attribute", "base_url", "rest_endpoint"}

func destinationChanged(before, after map[string]any) bool {
	for _, f := range destinationFields {
		if fmt.Sprint(before[f]) != fmt.Sprint(after[f]) {
			return true
		}
	}
	return false
}
