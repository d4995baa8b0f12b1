package connector_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/connector/platform"
)

// armAfter wraps a platform: once the inner platform has accepted call number `call` (1-based,
// adds and removes counted together), it runs arm, so what follows (recording the chunk) meets
// the failure arm sets up.
type armAfter struct {
	*memPlatform
	call int
	arm  func()
	n    int
}

func (p *armAfter) Add(ctx context.Context, ms []platform.Member) (platform.Outcome, error) {
	return p.after(p.memPlatform.Add(ctx, ms))
}

func (p *armAfter) Remove(ctx context.Context, ms []platform.Member) (platform.Outcome, error) {
	return p.after(p.memPlatform.Remove(ctx, ms))
}

func (p *armAfter) after(out platform.Outcome, err error) (platform.Outcome, error) {
	p.n++
	if p.n == p.call && err == nil {
		p.arm()
	}
	return out, err
}

// installFailures adds switchable failures to the fixture's database: a trigger that refuses
// writes to activation_members ("members"), one that refuses updates of a run's counts
// ("counts"), and a deferred one that lets the statements through and fails the commit
// ("commit"). Each fires only while its switch is armed.
func (f *fixture) installFailures() {
	f.t.Helper()
	f.exec(`CREATE TABLE test_failures (kind text PRIMARY KEY, armed boolean NOT NULL DEFAULT false)`)
	f.exec(`INSERT INTO test_failures (kind) VALUES ('members'), ('counts'), ('commit')`)
	f.exec(`CREATE FUNCTION test_fail() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF EXISTS (SELECT 1 FROM test_failures WHERE kind = TG_ARGV[0] AND armed) THEN
				RAISE EXCEPTION 'injected failure: %', TG_ARGV[0];
			END IF;
			RETURN NEW;
		END $$`)
	f.exec(`CREATE TRIGGER test_fail_members BEFORE INSERT OR UPDATE ON activation_members
		FOR EACH ROW EXECUTE FUNCTION test_fail('members')`)
	f.exec(`CREATE TRIGGER test_fail_counts BEFORE UPDATE OF added, removed ON activation_sync_runs
		FOR EACH ROW EXECUTE FUNCTION test_fail('counts')`)
	f.exec(`CREATE CONSTRAINT TRIGGER test_fail_commit AFTER UPDATE OF added, removed ON activation_sync_runs
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_fail('commit')`)
}

func (f *fixture) setFailure(kind string, armed bool) {
	f.t.Helper()
	f.exec(`UPDATE test_failures SET armed = $2 WHERE kind = $1`, kind, armed)
}

// TestPushAfterTheDatabaseFailsMidSync: the platform accepted a chunk and recording it failed
// (the members' write, the counts' update, the commit, or the request being cancelled). The
// attempt fails with the counts it did record; the retry sends the unrecorded chunk again (the
// platform calls are idempotent), and in the end the platform and the record hold exactly the
// segment's members and the run counts every member once.
func TestPushAfterTheDatabaseFailsMidSync(t *testing.T) {
	f := newFixture(t, connector.Options{})
	f.installFailures()
	tenant := f.tenant("acme")
	u := users("u", 1, 11) // u00001 .. u00011

	type failure struct {
		name string
		// arm makes what follows fail; cancel is the attempt's context's cancel.
		arm func(cancel context.CancelFunc)
	}
	failures := []failure{
		{"recording the members fails", func(context.CancelFunc) { f.setFailure("members", true) }},
		{"recording the counts fails", func(context.CancelFunc) { f.setFailure("counts", true) }},
		{"the commit fails", func(context.CancelFunc) { f.setFailure("commit", true) }},
		{"the request is cancelled", func(cancel context.CancelFunc) { cancel() }},
	}
	// The second sync's calls: remove [u1 u2], remove [u3], add [u7 u8], add [u9 u10], add [u11].
	positions := []struct {
		name string
		call int
	}{{"a remove chunk", 1}, {"an add chunk", 4}}

	for _, fl := range failures {
		for _, pos := range positions {
			t.Run(fl.name+" after "+pos.name, func(t *testing.T) {
				seg := f.segment(tenant, fl.name+pos.name)
				c := f.create(tenant, seg, connector.KindKlaviyo, fl.name+pos.name, `{"list_id":"L1","api_key":"`+klaviyoKey+`"}`)
				mem := &memPlatform{addChunk: 2, removeChunk: 2}
				f.addMembers(tenant, seg, u[:6]...)
				f.syncOnce(tenant, c.ID, mem, fmt.Sprintf("wf-dbfail-0-%d", c.ID))
				mem.takeCalls()

				f.removeMembers(tenant, seg, u[0:3]...)
				f.addMembers(tenant, seg, u[6:11]...)
				run := f.begin(tenant, c.ID, fmt.Sprintf("wf-dbfail-1-%d", c.ID))
				ctx, cancel := context.WithCancel(f.ctx)
				defer cancel()
				p := &armAfter{memPlatform: mem, call: pos.call, arm: func() { fl.arm(cancel) }}

				counts, err := f.svc.Push(ctx, tenant, run.ID, p, nil)
				for _, k := range []string{"members", "counts", "commit"} {
					f.setFailure(k, false)
				}
				if err == nil {
					t.Fatal("the attempt succeeded through the injected failure")
				}
				stored := f.run(tenant, run.ID)
				if recorded := (connector.Counts{Added: stored.Added, Removed: stored.Removed, Skipped: stored.Skipped, Failed: stored.Failed}); counts != recorded {
					t.Errorf("the failed attempt reports %+v, but recorded %+v", counts, recorded)
				}
				firstCalls := mem.takeCalls()
				if len(firstCalls) != pos.call {
					t.Fatalf("first attempt made calls %v, want it to stop after call %d", firstCalls, pos.call)
				}

				// The activity's retry: the same run, a fresh context.
				counts, err = f.svc.Push(f.ctx, tenant, run.ID, mem, nil)
				if err != nil {
					t.Fatalf("retry: %v", err)
				}
				retryCalls := mem.takeCalls()
				if len(retryCalls) == 0 || fmt.Sprint(retryCalls[0]) != fmt.Sprint(firstCalls[len(firstCalls)-1]) {
					t.Errorf("retry calls %v, want them to start with the unrecorded chunk %v", retryCalls, firstCalls[len(firstCalls)-1])
				}
				want := connector.Counts{Added: 5, Removed: 3}
				if counts != want {
					t.Errorf("retry counts %+v, want %+v", counts, want)
				}
				stored = f.run(tenant, run.ID)
				if got := (connector.Counts{Added: stored.Added, Removed: stored.Removed, Skipped: stored.Skipped, Failed: stored.Failed}); got != want {
					t.Errorf("run counts %+v, want %+v (each member once)", got, want)
				}
				members := f.segmentMembers(tenant, seg)
				if got := f.present(c.ID); !slices.Equal(got, members) {
					t.Errorf("record holds %v, want the segment's members %v", got, members)
				}
				if got := mem.holds(); !slices.Equal(got, members) {
					t.Errorf("platform holds %v, want the segment's members %v", got, members)
				}
				if n := f.count(`SELECT count(*) FROM activation_members WHERE connector_id = $1 AND NOT present`, c.ID); n != 3 {
					t.Errorf("%d members recorded as removed, want 3", n)
				}
			})
		}
	}
}
