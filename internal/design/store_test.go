package design

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestStoreGetCreatesDefaultAndUpdatePatches(t *testing.T) {
	db := testenv.OpenDB(t)
	ctx := context.Background()
	clock := testenv.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	st := NewStore(db.Pool, clock.Now)
	a := testenv.Tenant(t, db, "tenant-a")
	b := testenv.Tenant(t, db, "tenant-b")

	first, err := st.Get(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	def := Default(a)
	def.ID, def.UpdatedAt = first.ID, first.UpdatedAt
	if *first != def || first.ID == 0 || !first.UpdatedAt.Equal(clock.Now()) {
		t.Fatalf("default %+v, want %+v", *first, def)
	}
	again, err := st.Get(ctx, a)
	if err != nil || again.ID != first.ID {
		t.Fatalf("second Get %+v %v: want the same row", again, err)
	}
	if n := testenv.Count(t, db, `SELECT count(*) FROM design_systems WHERE tenant_id = $1`, a); n != 1 {
		t.Fatalf("%d rows", n)
	}

	clock.Advance(time.Minute)
	up, err := st.Update(ctx, a, Patch{PrimaryColor: new("#1E40AF"), SpacingUnit: new(0), CustomCSS: new(".x{}")})
	if err != nil {
		t.Fatal(err)
	}
	if up.PrimaryColor != "#1e40af" || up.SpacingUnit != 0 || up.CustomCSS != ".x{}" || up.SecondaryColor != def.SecondaryColor ||
		up.HeadingFont != def.HeadingFont || !up.UpdatedAt.Equal(clock.Now()) {
		t.Fatalf("updated %+v", up)
	}
	// Unset fields keep their value; empty custom_css clears it.
	up, err = st.Update(ctx, a, Patch{CustomCSS: new("")})
	if err != nil || up.PrimaryColor != "#1e40af" || up.CustomCSS != "" || up.SpacingUnit != 0 {
		t.Fatalf("second update %+v %v", up, err)
	}

	// A refused patch writes nothing.
	_, err = st.Update(ctx, a, Patch{PrimaryColor: new("#000"), BodyFont: new("a{b}")})
	var ve *errs.ValidationError
	if !errors.As(err, &ve) || ve.Fields["body_font"] == "" {
		t.Fatalf("error %v", err)
	}
	if got, _ := st.Get(ctx, a); got.PrimaryColor != "#1e40af" {
		t.Fatalf("refused patch wrote %+v", got)
	}

	// Tenant B: its own default, untouched by A's changes; a PUT first creates then patches.
	gb, err := st.Update(ctx, b, Patch{HeadingFont: new("Lora")})
	if err != nil {
		t.Fatal(err)
	}
	if gb.ID == first.ID || gb.Tenant != b || gb.PrimaryColor != def.PrimaryColor || gb.HeadingFont != "Lora" {
		t.Fatalf("tenant b %+v", gb)
	}
	if ga, _ := st.Get(ctx, a); ga.HeadingFont != def.HeadingFont {
		t.Fatalf("tenant a changed by b: %+v", ga)
	}

	// A tenant that does not exist is not found, not a server error.
	if _, err := st.Get(ctx, 1<<40); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("missing tenant: %v", err)
	}
}
