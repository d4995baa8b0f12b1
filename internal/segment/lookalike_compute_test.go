package segment_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/segment"
)

// lookalikePopulation stores two behaviour clusters in the tenant's warehouse: 40 heavy buyers
// (h00..h39, many order_completed events with amounts, a few page views; h00..h19 order at least
// 12 times, h20..h39 4 to 8 times) and 200 browsers (b000..b199, page views only).
func lookalikePopulation(f *segFixture, tenant int64) (seed, buyers, browsers []string) {
	f.t.Helper()
	now := f.clock.Now()
	var rows [][]any
	add := func(user, typ string, daysAgo float64, payload string) {
		at := now.Add(-time.Duration(daysAgo * float64(24*time.Hour)))
		rows = append(rows, []any{tenant, fmt.Sprintf("e%d", len(rows)), user, typ, at, at, payload})
	}
	for i := range 40 {
		u := fmt.Sprintf("h%02d", i)
		orders := 12 + i%5
		if i >= 20 {
			orders = 4 + i%5
			buyers = append(buyers, u)
		} else {
			seed = append(seed, u)
		}
		for k := range orders {
			add(u, "order_completed", float64(1+(i+k)%20), fmt.Sprintf(`{"amount":%d}`, 40+(i*7+k*13)%60))
		}
		for k := range 3 + i%6 {
			add(u, "page_view", float64(1+(i+k)%25), `{"path":"/"}`)
		}
	}
	for i := range 200 {
		u := fmt.Sprintf("b%03d", i)
		browsers = append(browsers, u)
		for k := range 1 + i%20 {
			add(u, "page_view", float64(1+(i*3+k)%28), `{"path":"/product"}`)
		}
	}
	if _, err := f.db.Pool.CopyFrom(f.ctx, pgx.Identifier{"warehouse", "events"},
		[]string{"tenant_id", "event_id", "user_id", "event_type", "occurred_at", "received_at", "payload"}, pgx.CopyFromRows(rows)); err != nil {
		f.t.Fatalf("load population: %v", err)
	}
	f.rebuildStats(tenant)
	return seed, buyers, browsers
}

type memberScore struct {
	user  string
	score *float64
}

func (f *segFixture) scoredMembers(tenant, id int64) []memberScore {
	f.t.Helper()
	var out []memberScore
	cursor := ""
	for {
		page, err := f.svc.Members(f.ctx, tenant, id, 1000, cursor)
		if err != nil {
			f.t.Fatalf("members: %v", err)
		}
		for _, m := range page.Results {
			out = append(out, memberScore{m.UserID, m.Score})
		}
		if page.NextCursor == nil {
			return out
		}
		cursor = *page.NextCursor
	}
}

// bigQueryRunner stands in for a BigQuery warehouse; lookalikes must refuse it.
type bigQueryRunner struct{}

func (bigQueryRunner) Dialect() segment.Dialect { return segment.BigQuery }
func (bigQueryRunner) Table() string            { return "project.dataset.events" }
func (bigQueryRunner) Users(context.Context, *segment.Query, map[string][]string, func(string) error) error {
	return errors.New("not used")
}

func (bigQueryRunner) CountAndSample(context.Context, *segment.Query, map[string][]string, int) (int64, []string, error) {
	return 0, nil, errors.New("not used")
}

func TestLookalikeCompute(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	seedIDs, buyers, browsers := lookalikePopulation(f, tenant)
	// A tenant with the same user ids and other behaviour must not matter.
	other := f.tenant("other")
	for _, u := range browsers[:30] {
		f.event(other, u, "order_completed", 1, `{"amount":500}`)
	}
	seedSeg := f.segment(tenant, "rule", "big buyers",
		`{"logic":"AND","conditions":[{"type":"frequency","event_type":"order_completed","operator":"gte","value":12}]}`)
	f.compute(tenant, seedSeg.ID)
	if got := f.members(tenant, seedSeg.ID); !slices.Equal(got, seedIDs) {
		t.Fatalf("seed members = %v, want %v", got, seedIDs)
	}
	isSeed := map[string]bool{}
	for _, u := range seedIDs {
		isSeed[u] = true
	}
	isBuyer := map[string]bool{}
	for _, u := range buyers {
		isBuyer[u] = true
	}

	tests := []struct {
		name        string
		def         string
		wantCount   int   // -1: checked by wantBuyers only
		wantBuyers  []int // how many of the result must be heavy buyers: at least [0], at most [1]
		wantMembers []string
	}{
		{name: "top 20", def: `{"seed_segment_id":%d,"size":20}`, wantCount: 20, wantMembers: buyers},
		{name: "top 10", def: `{"seed_segment_id":%d,"size":10}`, wantCount: 10, wantBuyers: []int{10, 10}},
		{name: "top 30 takes every buyer first", def: `{"seed_segment_id":%d,"size":30}`, wantCount: 30, wantBuyers: []int{20, 20}},
		{name: "min similarity 0.5", def: `{"seed_segment_id":%d,"min_similarity":0.5}`, wantCount: -1, wantMembers: buyers},
		{name: "size above the candidates", def: `{"seed_segment_id":%d,"size":100000}`, wantCount: len(buyers) + len(browsers)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			look := f.segment(tenant, "lookalike", tc.name, fmt.Sprintf(tc.def, seedSeg.ID))
			res := f.compute(tenant, look.ID)
			members := f.scoredMembers(tenant, look.ID)
			if int(res.Matched) != len(members) || int(res.Entered) != len(members) {
				t.Fatalf("result %+v for %d members", res, len(members))
			}
			if tc.wantCount >= 0 && len(members) != tc.wantCount {
				t.Fatalf("%d members, want %d", len(members), tc.wantCount)
			}
			var users []string
			nBuyers, maxScore := 0, 0.0
			for _, m := range members {
				users = append(users, m.user)
				if isSeed[m.user] {
					t.Fatalf("seed member %s is in the lookalike", m.user)
				}
				if m.score == nil || !(*m.score > 0 && *m.score <= 100) {
					t.Fatalf("score of %s = %v, want a percentile in (0, 100]", m.user, m.score)
				}
				maxScore = max(maxScore, *m.score)
				if isBuyer[m.user] {
					nBuyers++
					// Every buyer ranks above every browser: a top percentile.
					if *m.score < 90 {
						t.Errorf("buyer %s has percentile %v, want the top decile", m.user, *m.score)
					}
				}
			}
			if maxScore != 100 {
				t.Fatalf("best percentile = %v, want 100", maxScore)
			}
			if tc.wantMembers != nil && !slices.Equal(users, tc.wantMembers) {
				t.Fatalf("members = %v, want %v", users, tc.wantMembers)
			}
			if tc.wantBuyers != nil && (nBuyers < tc.wantBuyers[0] || nBuyers > tc.wantBuyers[1]) {
				t.Fatalf("%d heavy buyers among %d members, want %v", nBuyers, len(members), tc.wantBuyers)
			}
			// A recompute over the same data changes nothing.
			again := f.compute(tenant, look.ID)
			if again.Matched != res.Matched || again.Entered != 0 || again.Exited != 0 {
				t.Fatalf("recompute = %+v", again)
			}
			if got := f.scoredMembers(tenant, look.ID); !slices.EqualFunc(got, members, func(a, b memberScore) bool { return a.user == b.user && *a.score == *b.score }) {
				t.Fatalf("recompute changed members or scores")
			}
		})
	}
}

func TestLookalikeErrors(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	lookalikePopulation(f, tenant)
	// Profiles without events: a seed of them has no feature rows.
	for _, u := range []string{"x1", "x2"} {
		f.profile(tenant, u, `{"plan":"ghost"}`)
	}
	empty := f.segment(tenant, "rule", "nobody", `{"logic":"AND","conditions":[{"type":"frequency","event_type":"never_happens","operator":"gte","value":1}]}`)
	f.compute(tenant, empty.ID)
	neverComputed := f.segment(tenant, "rule", "never computed", defOrdered)
	eventless := f.segment(tenant, "rule", "eventless", `{"logic":"AND","conditions":[{"type":"trait","trait":"plan","operator":"eq","value":"ghost"}]}`)
	f.compute(tenant, eventless.ID)
	if got := f.members(tenant, eventless.ID); len(got) != 2 {
		t.Fatalf("eventless seed members = %v", got)
	}
	buyers := f.segment(tenant, "rule", "buyers", defOrdered)
	f.compute(tenant, buyers.ID)

	tests := []struct {
		name    string
		seed    int64
		runner  segment.Runner
		wantErr error
	}{
		{"seed computed empty", empty.ID, nil, segment.ErrEmptySeed},
		{"seed never computed", neverComputed.ID, nil, segment.ErrEmptySeed},
		{"seed members without events", eventless.ID, nil, segment.ErrEmptySeed},
		{"bigquery warehouse", buyers.ID, bigQueryRunner{}, errs.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			look := f.segment(tenant, "lookalike", tc.name, fmt.Sprintf(`{"seed_segment_id":%d,"size":10}`, tc.seed))
			run, err := f.svc.BeginRun(f.ctx, tenant, look.ID, "wf")
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.svc.Materialize(f.ctx, tenant, run.ID, tc.runner)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if got := f.members(tenant, look.ID); len(got) != 0 {
				t.Fatalf("failed compute left members %v", got)
			}
			if err := f.svc.FailRun(f.ctx, tenant, run.ID, err.Error()); err != nil {
				t.Fatal(err)
			}
			if s := f.get(tenant, look.ID); s.Status != segment.StatusError || s.LastError == nil || s.ComputedVersion != nil {
				t.Fatalf("segment after the failure = %+v", s)
			}
		})
	}
	// A lookalike definition is kept as canonical JSON.
	look := f.segment(tenant, "lookalike", "canonical", fmt.Sprintf(`{ "min_similarity": 0.25, "seed_segment_id": %d }`, buyers.ID))
	var def map[string]any
	if err := json.Unmarshal(look.Definition, &def); err != nil || def["min_similarity"] != 0.25 || def["seed_segment_id"] != float64(buyers.ID) || len(def) != 2 {
		t.Fatalf("stored definition = %s", look.Definition)
	}
}

// TestLookalikeIdentity: lookalike candidates are canonical users: a browser's anonymous id
// linked to a seed member is that member (not a candidate), and one linked to a new user makes
// the user the candidate, never the linked id.
func TestLookalikeIdentity(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	_, buyers, browsers := lookalikePopulation(f, tenant)
	seedSeg := f.segment(tenant, "rule", "big buyers",
		`{"logic":"AND","conditions":[{"type":"frequency","event_type":"order_completed","operator":"gte","value":12}]}`)
	f.compute(tenant, seedSeg.ID)
	f.link(tenant, "b000", "h00")
	f.link(tenant, "b001", "newcomer")
	look := f.segment(tenant, "lookalike", "everyone", fmt.Sprintf(`{"seed_segment_id":%d,"size":100000}`, seedSeg.ID))
	f.compute(tenant, look.ID)
	got := map[string]bool{}
	for _, m := range f.scoredMembers(tenant, look.ID) {
		got[m.user] = true
	}
	for _, u := range []string{"b000", "b001", "h00"} {
		if got[u] {
			t.Errorf("%s is a candidate", u)
		}
	}
	if !got["newcomer"] {
		t.Errorf("newcomer (b001's user) is not a candidate")
	}
	if want := len(buyers) + len(browsers) - 1; len(got) != want {
		t.Errorf("%d members, want %d", len(got), want)
	}
}
