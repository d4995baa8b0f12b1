package wire_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/wire"
)

// batchBody is the batch endpoint's body as encoding/json reads it.
type batchBody struct {
	Events []json.RawMessage `json:"events"`
}

// checkSplit checks SplitBatch's contract on body: when it splits the body and every event then
// decodes as JSON (ingest.DecodeBatch's fast path), json.Unmarshal reads the same events from it.
func checkSplit(t *testing.T, body []byte) (split, fast bool) {
	t.Helper()
	raws, ok := wire.SplitBatch(body, ingest.MaxBatchEvents)
	if !ok {
		return false, false
	}
	if len(raws) > ingest.MaxBatchEvents {
		t.Fatalf("SplitBatch returned %d events", len(raws))
	}
	for _, raw := range raws {
		if _, r := ingest.Decode(raw, 1, time.Now()); r != nil && (r.Code == "invalid_json" || r.Code == "event_too_large") {
			return true, false
		}
	}
	var want batchBody
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatalf("fast path on %q, which json.Unmarshal refuses: %v", body, err)
	}
	if want.Events == nil || len(want.Events) != len(raws) {
		t.Fatalf("fast path on %q: %d events, json.Unmarshal reads %d (nil: %v)", body, len(raws), len(want.Events), want.Events == nil)
	}
	for i := range raws {
		if !bytes.Equal(raws[i], want.Events[i]) {
			t.Fatalf("fast path on %q: event %d is %q, json.Unmarshal reads %q", body, i, raws[i], want.Events[i])
		}
	}
	return true, true
}

func TestSplitBatch(t *testing.T) {
	e := `{"user_id":"u","event_type":"t","payload":{"a":[1,"]}"],"b":{"c":"\"{"}}}`
	many := func(n int) string { return `{"events":[` + strings.TrimSuffix(strings.Repeat(e+",", n), ",") + `]}` }
	cases := []struct {
		body  string
		split bool // SplitBatch takes it
		fast  bool // and every event decodes: DecodeBatch answers from the split
	}{
		{`{"events":[]}`, true, true},
		{` { "events" : [ ] } `, true, true},
		{`{"events":[` + e + `]}`, true, true},
		{"\t{\n\"events\":\r\n[ " + e + " ,\n" + e + " ]\n}\n", true, true},
		{many(ingest.MaxBatchEvents), true, true},
		{many(ingest.MaxBatchEvents + 1), false, false},    // batch_too_large: encoding/json's path says so
		{`{"events":[` + e + ` ` + e + `]}`, false, false}, // missing comma
		{`{"events":[` + e + `,]}`, false, false},
		{`{"events":[,` + e + `]}`, false, false},
		{`{"events":[` + e + `]}x`, false, false},
		{`{"events":[` + e + `]`, false, false},
		{`{"events":[` + e, false, false},
		{`{"events":[{"a":1]]}`, true, false}, // brackets crossed: the event does not decode
		{`{"events":[{"a":"1}]}`, false, false},
		{`{"events":[{"a":1}}]}`, false, false},
		{`{"events":["x"]}`, false, false}, // not an object: encoding/json's path reports it by index
		{`{"events":[1]}`, false, false},
		{`{"events":null}`, false, false},
		{`{"events":{}}`, false, false},
		{`{"Events":[]}`, false, false}, // encoding/json matches keys case-insensitively
		{`{"events":[],"events":[]}`, false, false},
		{`{"other":1,"events":[]}`, false, false},
		{`{"even\u0074s":[]}`, false, false},
		{`[]`, false, false},
		{``, false, false},
		{"\ufeff{\"events\":[]}", false, false},
	}
	for _, tc := range cases {
		split, fast := checkSplit(t, []byte(tc.body))
		if split != tc.split || fast != tc.fast {
			name := tc.body
			if len(name) > 80 {
				name = name[:80] + "..."
			}
			t.Errorf("%s: split %v fast %v, want %v %v", name, split, fast, tc.split, tc.fast)
		}
	}
}

func FuzzSplitBatch(f *testing.F) {
	for _, s := range []string{
		`{"events":[]}`,
		`{"events":[{"user_id":"u","event_type":"t"},{"user_id":"v","event_type":"t","payload":{"x":"]"}}]}`,
		` { "events" : [ {"a":1} , {"b":[2]} ] } `,
		`{"events":[{"a":"\"]}"}]}`,
		`{"events":[{"a":1]]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkSplit(t, body) })
}
