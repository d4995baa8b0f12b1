package wire_test

import (
	"testing"

	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/wire"
)

// TestTakeSessionToken: a leading session_token is read and blanked out so the body is the
// layout wire.SplitBatch reads in place; other layouts are left to encoding/json.
func TestTakeSessionToken(t *testing.T) {
	tests := []struct {
		body      string
		wantTok   string
		wantFound bool
		wantSplit int // events SplitBatch finds afterwards; -1: not the fast layout
	}{
		{`{"session_token":"t.k-n","events":[{"a":1},{"b":2}]}`, "t.k-n", true, 2},
		{" {\n\t\"session_token\" :\r \"tok\" , \"events\":[]}", "tok", true, 0},
		{`{"session_token":"tok"}`, "tok", true, -1},
		{`{"events":[{"a":1}],"session_token":"tok"}`, "", false, -1},
		{`{"session_token":"a\"b","events":[]}`, "", false, -1},
		{`{"session_token":42,"events":[]}`, "", false, -1},
		{`{"session_token":"tok"`, "", false, -1},
		{`{"session_token":"tok" "events":[]}`, "", false, -1},
		{`{"session_token":"tok`, "", false, -1},
		{`{"session_token"`, "", false, -1},
		{``, "", false, -1},
		{`[]`, "", false, -1},
	}
	for _, tt := range tests {
		body := []byte(tt.body)
		tok, found := wire.TakeSessionToken(body)
		if tok != tt.wantTok || found != tt.wantFound {
			t.Errorf("%q: token %q found %v, want %q %v", tt.body, tok, found, tt.wantTok, tt.wantFound)
		}
		if !found && string(body) != tt.body {
			t.Errorf("%q: body changed to %q though no token was taken", tt.body, body)
		}
		raws, ok := wire.SplitBatch(body, ingest.MaxBatchEvents)
		if tt.wantSplit >= 0 && (!ok || len(raws) != tt.wantSplit) {
			t.Errorf("%q -> %q: SplitBatch %d events ok %v, want %d", tt.body, body, len(raws), ok, tt.wantSplit)
		}
	}
}
