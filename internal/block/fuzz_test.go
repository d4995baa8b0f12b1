package block

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/errs"
)

// FuzzValidate feeds raw JSON through ParseBlocks and Validate. Neither panics; every refusal is
// a *errs.ValidationError with a bounded set of fields under "blocks"; a page that validates has
// unique, well-formed ids, keeps the ids it was given, validates again to the same blocks, and
// survives a JSON round trip unchanged.
func FuzzValidate(f *testing.F) {
	seeds := []string{
		`[]`,
		`null`,
		`[{"type":"hero","props":{"headline":"Linen dresses","subheadline":"Cool all summer","cta_label":"Shop","cta_url":"https://shop.example/linen","image_url":"/img/linen.jpg"}}]`,
		`[{"id":"grid-1","type":"product_grid","props":{"product_skus":["A-1","B-2"],"columns":3}}]`,
		`[{"type":"product_grid","props":{"product_skus":["A"],"columns":3.0}},{"type":"product_grid","props":{"product_skus":["A"],"columns":1e400}}]`,
		`[{"type":"text_section","props":{"heading":"Why linen","body":"It breathes.\nIt lasts.","align":"center"}}]`,
		`[{"type":"cta_banner","props":{"headline":"Ready?","body":"Free returns","cta_label":"Shop now","cta_url":"/c/linen"}}]`,
		`[{"type":"feature_list","props":{"heading":"Features","items":[{"title":"Soft"},{"title":"Cool","description":"Breathes"}]}}]`,
		`[{"type":"testimonial","props":{"quote":"Love it","author":"Ana","role":"Buyer","avatar_url":"https://cdn.example/a.png"}}]`,
		`[{"id":"x","type":"hero","props":{"headline":"h"}},{"id":"x","type":"hero","props":{"headline":"h"}}]`,
		`[{"type":"hero","props":{"headline":"h","cta_url":"javascript:alert(1)"}}]`,
		`[{"type":"hero","props":{"headline":"h","cta_url":"/\\evil.example"}}]`,
		`[{"type":"hero","props":{"headline":null}},{"type":"nope"},{"type":"hero","color":1}]`,
		`[{"type":"feature_list","props":{"items":[{"title":"a"},{"title":"b","x":[1,{"y":null}]}]}}]`,
		`[{"type":"hero","props":{"headline":"\u0000\ud800"}}]`,
		`[1, "a", [], {}]`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		blocks, err := ParseBlocks(raw)
		if err != nil {
			checkRefusal(t, "ParseBlocks", err)
			return
		}
		before, err := json.Marshal(blocks)
		if err != nil {
			t.Fatalf("marshal parsed blocks: %v", err)
		}
		out, err := Validate("blocks", blocks)
		if after, _ := json.Marshal(blocks); !bytes.Equal(before, after) {
			t.Fatalf("Validate changed its input:\n%s\n%s", before, after)
		}
		if err != nil {
			checkRefusal(t, "Validate", err)
			return
		}
		if len(out) != len(blocks) {
			t.Fatalf("%d blocks out of %d", len(out), len(blocks))
		}
		ids := map[string]bool{}
		for i, b := range out {
			if msg := CheckID(b.ID); msg != "" {
				t.Fatalf("blocks[%d].id %q: %s", i, b.ID, msg)
			}
			if ids[b.ID] {
				t.Fatalf("id %q repeated", b.ID)
			}
			ids[b.ID] = true
			if blocks[i].ID != "" && blocks[i].ID != b.ID {
				t.Fatalf("blocks[%d].id %q became %q", i, blocks[i].ID, b.ID)
			}
			if err := ValidateProps("props", b.Type, b.Props); err != nil {
				t.Fatalf("ValidateProps refuses validated blocks[%d]: %v", i, err)
			}
			one, err := ValidateOne("b", b)
			if err != nil || !reflect.DeepEqual(one, b) {
				t.Fatalf("ValidateOne of validated blocks[%d]: %v\n%#v\n%#v", i, err, b, one)
			}
		}
		again, err := Validate("blocks", out)
		if err != nil {
			t.Fatalf("validated blocks do not validate again: %v", err)
		}
		if !reflect.DeepEqual(again, out) {
			t.Fatalf("second Validate changed the blocks:\n%#v\n%#v", out, again)
		}
		encoded, err := json.Marshal(out)
		if err != nil {
			t.Fatalf("marshal validated blocks: %v", err)
		}
		reparsed, err := ParseBlocks(encoded)
		if err != nil {
			t.Fatalf("validated blocks do not parse again: %v\n%s", err, encoded)
		}
		round, err := Validate("blocks", reparsed)
		if err != nil {
			t.Fatalf("validated blocks do not validate after a JSON round trip: %v\n%s", err, encoded)
		}
		if !reflect.DeepEqual(round, out) {
			t.Fatalf("JSON round trip changed the blocks:\n%#v\n%#v", out, round)
		}
	})
}

func checkRefusal(t *testing.T, what string, err error) {
	t.Helper()
	var ve *errs.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("%s: error %T %v, want *errs.ValidationError", what, err, err)
	}
	if len(ve.Fields) == 0 || len(ve.Fields) > maxErrors {
		t.Fatalf("%s: %d field errors: %v", what, len(ve.Fields), err)
	}
	for k, msg := range ve.Fields {
		if !strings.HasPrefix(k, "blocks") || msg == "" {
			t.Fatalf("%s: field %q: %q", what, k, msg)
		}
	}
}
