package pagetemplate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func tags(t ...string) *[]string { return &t }

const heroBlocks = `[{"type":"hero","props":{"headline":"Summer sale","cta_label":"Shop","cta_url":"/sale"}},{"type":"product_grid","props":{"product_skus":["A-1"],"columns":4}}]`

func TestTemplatesCRUD(t *testing.T) {
	db := testenv.OpenDB(t)
	ctx := context.Background()
	svc := NewService(db.Pool, time.Now)
	a := testenv.Tenant(t, db, "tenant-a")
	b := testenv.Tenant(t, db, "tenant-b")

	tpl, err := svc.Create(ctx, a, Input{Name: new("  Sale landing "), Description: new("For seasonal sales.\nTwo blocks."),
		Blocks: json.RawMessage(heroBlocks), Tags: tags("Sale", " summer ", "sale")})
	if err != nil {
		t.Fatal(err)
	}
	if tpl.ID == 0 || tpl.Name != "Sale landing" || len(tpl.Blocks) != 2 || tpl.Blocks[0].ID == "" ||
		strings.Join(tpl.Tags, ",") != "sale,summer" || tpl.CreatedAt.IsZero() {
		t.Fatalf("created %+v", tpl)
	}
	other, err := svc.Create(ctx, a, Input{Name: new("Plain"), Blocks: json.RawMessage(`[]`)})
	if err != nil || len(other.Blocks) != 0 || len(other.Tags) != 0 || other.Description != "" {
		t.Fatalf("created %+v %v", other, err)
	}
	if _, err := svc.Create(ctx, b, Input{Name: new("B's"), Blocks: json.RawMessage(heroBlocks), Tags: tags("sale")}); err != nil {
		t.Fatal(err)
	}

	list, err := svc.List(ctx, a, "")
	if err != nil || len(list) != 2 || list[0].ID != other.ID {
		t.Fatalf("list %+v %v", list, err)
	}
	list, err = svc.List(ctx, a, " SALE ")
	if err != nil || len(list) != 1 || list[0].ID != tpl.ID {
		t.Fatalf("list by tag %+v %v", list, err)
	}
	if list, _ = svc.List(ctx, a, "winter"); len(list) != 0 {
		t.Fatalf("unknown tag listed %+v", list)
	}
	if list, err = svc.List(ctx, a, "   "); err != nil || len(list) != 2 {
		t.Fatalf("a blank tag filters nothing: %+v %v", list, err)
	}
	// A tag no template can carry is a 400 on tag (a NUL byte was a 500 from Postgres).
	for _, bad := range []string{"a\x00b", "\xff\xfe", strings.Repeat("t", MaxTagLength+1)} {
		var ve *errs.ValidationError
		if _, err := svc.List(ctx, a, bad); !errors.As(err, &ve) || ve.Fields["tag"] == "" {
			t.Errorf("tag %q: %v", bad, err)
		}
	}

	got, err := svc.Get(ctx, a, tpl.ID)
	if err != nil || got.Blocks[0].ID != tpl.Blocks[0].ID || got.Blocks[1].Props["columns"] != float64(4) {
		t.Fatalf("get %+v %v", got, err)
	}

	// PATCH: only the fields present change.
	up, err := svc.Update(ctx, a, tpl.ID, Input{Tags: tags("evergreen")})
	if err != nil || up.Name != "Sale landing" || len(up.Blocks) != 2 || strings.Join(up.Tags, ",") != "evergreen" {
		t.Fatalf("patched %+v %v", up, err)
	}
	up, err = svc.Update(ctx, a, tpl.ID, Input{Name: new("Evergreen"), Blocks: json.RawMessage(`[{"type":"text_section","props":{"body":"Hello"}}]`)})
	if err != nil || up.Name != "Evergreen" || len(up.Blocks) != 1 || up.Blocks[0].Type != "text_section" || up.Description != tpl.Description {
		t.Fatalf("patched %+v %v", up, err)
	}

	// Another tenant's template is not found on every operation.
	if _, err := svc.Get(ctx, b, tpl.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("get by b: %v", err)
	}
	if _, err := svc.Update(ctx, b, tpl.ID, Input{Name: new("x")}); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("patch by b: %v", err)
	}
	if err := svc.Delete(ctx, b, tpl.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("delete by b: %v", err)
	}
	if err := svc.Delete(ctx, a, tpl.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Get(ctx, a, tpl.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	if err := svc.Delete(ctx, a, tpl.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
}

func TestTemplateValidation(t *testing.T) {
	db := testenv.OpenDB(t)
	ctx := context.Background()
	svc := NewService(db.Pool, time.Now)
	a := testenv.Tenant(t, db, "tenant-a")
	manyTags := make([]string, MaxTags+1)
	for i := range manyTags {
		manyTags[i] = fmt.Sprint("t", i)
	}
	tests := []struct {
		name  string
		in    Input
		field string
	}{
		{"no name", Input{Blocks: json.RawMessage(heroBlocks)}, "name"},
		{"blank name", Input{Name: new("  "), Blocks: json.RawMessage(heroBlocks)}, "name"},
		{"long name", Input{Name: new(strings.Repeat("n", MaxNameLength+1)), Blocks: json.RawMessage(heroBlocks)}, "name"},
		{"control in name", Input{Name: new("a\x07b"), Blocks: json.RawMessage(heroBlocks)}, "name"},
		{"long description", Input{Name: new("n"), Description: new(strings.Repeat("d", MaxDescriptionLength+1)), Blocks: json.RawMessage(heroBlocks)}, "description"},
		{"no blocks", Input{Name: new("n")}, "blocks"},
		{"null blocks", Input{Name: new("n"), Blocks: json.RawMessage(`null`)}, "blocks"},
		{"blocks not an array", Input{Name: new("n"), Blocks: json.RawMessage(`{"type":"hero"}`)}, "blocks"},
		{"unknown block type", Input{Name: new("n"), Blocks: json.RawMessage(`[{"type":"carousel","props":{}}]`)}, "blocks[0].type"},
		{"missing required prop", Input{Name: new("n"), Blocks: json.RawMessage(`[{"type":"hero","props":{}}]`)}, "blocks[0].props.headline"},
		{"bad url prop", Input{Name: new("n"), Blocks: json.RawMessage(`[{"type":"hero","props":{"headline":"h","cta_url":"javascript:alert(1)"}}]`)}, "blocks[0].props.cta_url"},
		{"too many tags", Input{Name: new("n"), Blocks: json.RawMessage(`[]`), Tags: &manyTags}, "tags"},
		{"empty tag", Input{Name: new("n"), Blocks: json.RawMessage(`[]`), Tags: tags("ok", " ")}, "tags[1]"},
		{"long tag", Input{Name: new("n"), Blocks: json.RawMessage(`[]`), Tags: tags(strings.Repeat("t", MaxTagLength+1))}, "tags[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.Create(ctx, a, tt.in)
			var ve *errs.ValidationError
			if !errors.As(err, &ve) || ve.Fields[tt.field] == "" {
				t.Fatalf("error %v, want a field error on %s", err, tt.field)
			}
		})
	}
	if n := testenv.Count(t, db, `SELECT count(*) FROM page_templates`); n != 0 {
		t.Fatalf("%d templates stored by refused creates", n)
	}
	tpl, err := svc.Create(ctx, a, Input{Name: new("ok"), Blocks: json.RawMessage(heroBlocks)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Update(ctx, a, tpl.ID, Input{Blocks: json.RawMessage(`[{"type":"hero","props":{"headline":5}}]`)}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("patch with invalid blocks: %v", err)
	}
	if _, err := svc.Update(ctx, a, tpl.ID, Input{Name: new("")}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("patch with blank name: %v", err)
	}
	if got, _ := svc.Get(ctx, a, tpl.ID); got.Name != "ok" || len(got.Blocks) != 2 {
		t.Fatalf("refused patch wrote %+v", got)
	}
}
