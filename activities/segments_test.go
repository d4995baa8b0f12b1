package activities

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/segment"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestPermanent(t *testing.T) {
	transient := errors.New("connection reset")
	tests := []struct {
		name     string
		err      error
		wantType string // "" means the error is returned as it is (retryable)
	}{
		{"not found", fmt.Errorf("segment 4: %w", errs.ErrNotFound), ErrTypeSegmentGone},
		{"no definition", fmt.Errorf("segment 4: %w", segment.ErrNoDefinition), ErrTypeNoDefinition},
		{"empty seed", fmt.Errorf("seed segment 2: %w", segment.ErrEmptySeed), ErrTypeEmptySeed},
		{"invalid", errs.Invalid("definition", "is required"), ErrTypeInvalidSegment},
		{"transient", transient, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := permanent(tc.err)
			if tc.wantType == "" {
				if got != tc.err {
					t.Fatalf("permanent(%v) = %v, want the error unchanged", tc.err, got)
				}
				return
			}
			var app *temporal.ApplicationError
			if !errors.As(got, &app) {
				t.Fatalf("permanent(%v) = %T %v, want an application error", tc.err, got, got)
			}
			if app.Type() != tc.wantType || !app.NonRetryable() || app.Message() != tc.err.Error() {
				t.Errorf("permanent(%v) = type %q non-retryable %v message %q, want non-retryable %q with the error's text",
					tc.err, app.Type(), app.NonRetryable(), app.Message(), tc.wantType)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("permanent(%v) does not wrap the error", tc.err)
			}
		})
	}
	if permanent(nil) != nil {
		t.Error("permanent(nil) is not nil")
	}
}

func TestMain(m *testing.M) { testenv.Main(m) }

// TestDraftDefinitionNotDraftable: the drafting activity is the one place that checks a segment
// can be drafted (segment.Draftable); its code reaches the API through the error's details.
func TestDraftDefinitionNotDraftable(t *testing.T) {
	db := testenv.OpenDB(t)
	tenant := testenv.Tenant(t, db, "acme")
	svc := segment.NewService(db.Gorm, db.Pool, time.Now, nil)
	a := &Segments{Svc: svc}
	ctx := context.Background()
	blank := " \n "
	cases := []struct {
		name, typ, description, wantCode string
	}{
		{"rule segment", segment.KindRule, "people who buy", "not_ai_segment"},
		{"ai without description", segment.KindAI, "", "no_description"},
		{"ai with a blank description", segment.KindAI, blank, "no_description"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seg, err := svc.Create(ctx, tenant, segment.CreateInput{Name: tc.name, Tenant: &tenant, SegmentType: tc.typ, Description: tc.description})
			if err != nil {
				t.Fatal(err)
			}
			_, err = a.DraftDefinition(ctx, DraftInput{TenantID: tenant, SegmentID: seg.ID})
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != ErrTypeNotDraftable || !app.NonRetryable() {
				t.Fatalf("DraftDefinition = %v, want a non-retryable %s", err, ErrTypeNotDraftable)
			}
			var code string
			if err := app.Details(&code); err != nil || code != tc.wantCode {
				t.Fatalf("details = %q (%v), want %s", code, err, tc.wantCode)
			}
		})
	}
}

type fakeTargets []connector.Target

func (f fakeTargets) ActiveTargets(context.Context, int64, int64) ([]connector.Target, error) {
	return f, nil
}

// ActivationTargets answers the connectors' ids (what the fan-out iterates, as histories recorded
// before the names were added hold) and, parallel to them, their names for the summaries.
func TestActivationTargetsNamesEachConnector(t *testing.T) {
	want := fakeTargets{{ID: 3, Name: "VIP list", Kind: "klaviyo"}, {ID: 9, Name: "Promo", Kind: "talonone"}}
	got, err := (&Segments{Connectors: want}).ActivationTargets(context.Background(), ActivationTargetsInput{TenantID: 1, SegmentID: 2})
	if err != nil || len(got.ConnectorIDs) != 2 || got.ConnectorIDs[0] != 3 || got.ConnectorIDs[1] != 9 || len(got.Connectors) != 2 || got.Connectors[1] != want[1] {
		t.Fatalf("%+v, %v", got, err)
	}
	if none, err := (&Segments{}).ActivationTargets(context.Background(), ActivationTargetsInput{}); err != nil || none.ConnectorIDs == nil || len(none.ConnectorIDs) != 0 {
		t.Fatalf("without connectors: %+v, %v", none, err)
	}
}
