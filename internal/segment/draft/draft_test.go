package draft

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/ai/aitest"
)

// assertJSON compares got with want after unmarshalling both, so key order and spacing do not matter.
func assertJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON mismatch\n got: %s\nwant: %s", got, want)
	}
}

// Shorthands for expected conditions.
const (
	orderSum     = `"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum"`
	orderRecency = `"type":"recency","event_type":"order_completed"`
	and1         = `{"logic":"AND","conditions":[`
)

// tenantHints is a tenant whose names differ from the defaults. "Page Viewed" is not a valid
// identifier and must be ignored.
var tenantHints = Hints{
	EventTypes: []string{"Page Viewed", "screen_view", "checkout_started", "order_refunded", "purchase",
		"product_view", "cart_item_added", "user_signed_up", "app_opened", "newsletter_subscribed"},
	Properties: map[string][]string{
		"purchase":    {"currency", "order_total", "items"},
		"screen_view": {"screen", "page_url"},
	},
	Traits: []string{"subscription_plan", "country_code", "email_address", "Age"},
}

func TestRules(t *testing.T) {
	tests := []struct {
		name  string
		desc  string
		hints Hints
		want  string
	}{
		// Spending.
		{
			name: "spent over on orders in window",
			desc: "spent over 100 on orders in the last 30 days",
			want: and1 + `{` + orderSum + `,"operator":"gt","value":100,"window_days":30}]}`,
		},
		{
			name: "spent but not recently negates the short window",
			desc: "spent over 100 in the last 30 days but not in the last 7 days",
			want: and1 + `{` + orderSum + `,"operator":"gt","value":100,"window_days":30},{` + orderSum + `,"operator":"gt","value":100,"window_days":7,"negate":true}]}`,
		},
		{
			name: "average order value",
			desc: "Average order value above 50.",
			want: and1 + `{"type":"monetary","event_type":"order_completed","property":"amount","metric":"avg","operator":"gt","value":50}]}`,
		},
		{
			name: "currency sign and thousands separator",
			desc: "Spent at least $1,000 in the last year",
			want: and1 + `{` + orderSum + `,"operator":"gte","value":1000,"window_days":365}]}`,
		},
		{
			name: "currency code after the amount and a month",
			desc: "spent less than 100 EUR a month",
			want: and1 + `{` + orderSum + `,"operator":"lt","value":100,"window_days":30}]}`,
		},
		{
			name: "currency code with window a month",
			desc: "spent under 100 EUR within a month",
			want: and1 + `{` + orderSum + `,"operator":"lt","value":100,"window_days":30}]}`,
		},
		{
			name: "decimal and or more",
			desc: "spent 99.5 or more this year",
			want: and1 + `{` + orderSum + `,"operator":"gte","value":99.5,"window_days":365}]}`,
		},
		{
			name: "k suffix and euro sign",
			desc: "users who spent more than €2.5k in the past 3 months",
			want: and1 + `{` + orderSum + `,"operator":"gt","value":2500,"window_days":90}]}`,
		},
		{
			name: "at most and exactly",
			desc: "spent at most 20 in the last week or exactly 0 in the last 30 days",
			want: `{"logic":"OR","conditions":[{` + orderSum + `,"operator":"lte","value":20,"window_days":7},{` + orderSum + `,"operator":"eq","value":0,"window_days":30}]}`,
		},
		{
			name: "between amounts",
			desc: "spent between 50 and 100 in the last 30 days",
			want: and1 + `{` + orderSum + `,"operator":"gte","value":50,"window_days":30},{` + orderSum + `,"operator":"lte","value":100,"window_days":30}]}`,
		},
		{
			name: "single order over is max",
			desc: "placed an order over $200",
			want: and1 + `{"type":"monetary","event_type":"order_completed","property":"amount","metric":"max","operator":"gt","value":200}]}`,
		},
		{
			name: "spent nothing is a negated positive sum",
			desc: "haven't spent anything in the last 60 days",
			want: and1 + `{` + orderSum + `,"operator":"gt","value":0,"window_days":60,"negate":true}]}`,
		},
		{
			name:  "spending with tenant hints",
			desc:  "spent over 100 on orders in the last 30 days",
			hints: tenantHints,
			want:  and1 + `{"type":"monetary","event_type":"purchase","property":"order_total","metric":"sum","operator":"gt","value":100,"window_days":30}]}`,
		},
		// Recency.
		{
			name: "haven't ordered in N days",
			desc: "haven't ordered in 30 days",
			want: and1 + `{` + orderRecency + `,"operator":"gt","window_days":30}]}`,
		},
		{
			name: "no purchase in the last N days",
			desc: "No purchase in the last 30 days",
			want: and1 + `{` + orderRecency + `,"operator":"gt","window_days":30}]}`,
		},
		{
			name: "lapsed for over",
			desc: "lapsed for over 60 days",
			want: and1 + `{` + orderRecency + `,"operator":"gt","window_days":60}]}`,
		},
		{
			name: "last ordered more than N days ago",
			desc: "last ordered more than 90 days ago",
			want: and1 + `{` + orderRecency + `,"operator":"gt","window_days":90}]}`,
		},
		{
			name: "ordered in the last week",
			desc: "ordered in the last 7 days",
			want: and1 + `{` + orderRecency + `,"operator":"lte","window_days":7}]}`,
		},
		{
			name: "purchased within a week",
			desc: "purchased within a week",
			want: and1 + `{` + orderRecency + `,"operator":"lte","window_days":7}]}`,
		},
		{
			name: "bought yesterday",
			desc: "customers who bought something yesterday",
			want: and1 + `{` + orderRecency + `,"operator":"lte","window_days":1}]}`,
		},
		{
			name:  "recency with tenant hints",
			desc:  "haven't ordered in 30 days",
			hints: tenantHints,
			want:  and1 + `{"type":"recency","event_type":"purchase","operator":"gt","window_days":30}]}`,
		},
		{
			name: "ordered but not recently",
			desc: "ordered in the last 30 days but not in the last 7 days",
			want: and1 + `{` + orderRecency + `,"operator":"lte","window_days":30},{"logic":"AND","negate":true,"conditions":[{` + orderRecency + `,"operator":"lte","window_days":7}]}]}`,
		},
		{
			name: "between days ago",
			desc: "ordered between 7 and 30 days ago",
			want: and1 + `{"type":"frequency","event_type":"order_completed","operator":"gte","value":1,"between_days":[7,30]}]}`,
		},
		// Frequency.
		{
			name: "visited more than N times in a week",
			desc: "visited more than 5 times in the last week",
			want: and1 + `{"type":"frequency","event_type":"page_view","operator":"gt","value":5,"window_days":7}]}`,
		},
		{
			name: "viewed at least N pages",
			desc: "viewed at least 3 pages",
			want: and1 + `{"type":"frequency","event_type":"page_view","operator":"gte","value":3}]}`,
		},
		{
			name: "number words",
			desc: "made at least three purchases in the last ninety days",
			want: and1 + `{"type":"frequency","event_type":"order_completed","operator":"gte","value":3,"window_days":90}]}`,
		},
		{
			name:  "visits with tenant hints",
			desc:  "visited more than 5 times in the last week",
			hints: tenantHints,
			want:  and1 + `{"type":"frequency","event_type":"screen_view","operator":"gt","value":5,"window_days":7}]}`,
		},
		{
			name: "never ordered",
			desc: "never ordered",
			want: and1 + `{"type":"frequency","event_type":"order_completed","operator":"eq","value":0}]}`,
		},
		{
			name: "count range joined by but",
			desc: "ordered more than 3 times but less than 10 times",
			want: and1 + `{"type":"frequency","event_type":"order_completed","operator":"gt","value":3},{"type":"frequency","event_type":"order_completed","operator":"lt","value":10}]}`,
		},
		{
			name: "added to cart but not purchased",
			desc: "added to cart in the last 3 days but haven't purchased",
			want: and1 + `{"type":"recency","event_type":"add_to_cart","operator":"lte","window_days":3},{"type":"frequency","event_type":"order_completed","operator":"eq","value":0}]}`,
		},
		{
			name:  "signed up and product views with hints",
			desc:  "signed up in the last 7 days and viewed a product",
			hints: tenantHints,
			want:  and1 + `{"type":"recency","event_type":"user_signed_up","operator":"lte","window_days":7},{"type":"frequency","event_type":"product_view","operator":"gte","value":1}]}`,
		},
		{
			name:  "tenant event spelled out in words",
			desc:  "opened the app at least 5 times in the last 2 weeks",
			hints: tenantHints,
			want:  and1 + `{"type":"frequency","event_type":"app_opened","operator":"gte","value":5,"window_days":14}]}`,
		},
		// Page properties.
		{
			name: "viewed the pricing page",
			desc: "viewed the pricing page",
			want: and1 + `{"type":"event_property","event_type":"page_view","property":"path","operator":"contains","value":"/pricing"}]}`,
		},
		{
			name:  "pricing page with tenant url property",
			desc:  "viewed the pricing page in the last 14 days",
			hints: tenantHints,
			want:  and1 + `{"type":"event_property","event_type":"screen_view","property":"page_url","operator":"contains","value":"/pricing","window_days":14}]}`,
		},
		{
			name: "did not visit a path",
			desc: "didn't visit /checkout in the last 7 days",
			want: and1 + `{"logic":"AND","negate":true,"conditions":[{"type":"event_property","event_type":"page_view","property":"path","operator":"contains","value":"/checkout","window_days":7}]}]}`,
		},
		// Traits.
		{
			name: "on the pro plan",
			desc: "on the pro plan",
			want: and1 + `{"type":"trait","trait":"plan","operator":"eq","value":"pro"}]}`,
		},
		{
			name: "plan is pro",
			desc: "plan is pro",
			want: and1 + `{"type":"trait","trait":"plan","operator":"eq","value":"pro"}]}`,
		},
		{
			name:  "plan with tenant trait name",
			desc:  "users on the Pro plan",
			hints: tenantHints,
			want:  and1 + `{"type":"trait","trait":"subscription_plan","operator":"eq","value":"Pro"}]}`,
		},
		{
			name: "plan alternatives become in",
			desc: "plan is pro, business or enterprise",
			want: and1 + `{"type":"trait","trait":"plan","operator":"in","value":["pro","business","enterprise"]}]}`,
		},
		{
			name: "not on plan",
			desc: "not on the free plan",
			want: and1 + `{"type":"trait","trait":"plan","operator":"neq","value":"free"}]}`,
		},
		{
			name: "has an email",
			desc: "has an email",
			want: and1 + `{"type":"trait","trait":"email","operator":"exists"}]}`,
		},
		{
			name: "has no phone number",
			desc: "customers with no phone number",
			want: and1 + `{"type":"trait","trait":"phone","operator":"not_exists"}]}`,
		},
		{
			name:  "email with tenant trait name",
			desc:  "has an email",
			hints: tenantHints,
			want:  and1 + `{"type":"trait","trait":"email_address","operator":"exists"}]}`,
		},
		{
			name: "from a country",
			desc: "from Germany",
			want: and1 + `{"type":"trait","trait":"country","operator":"eq","value":"Germany"}]}`,
		},
		{
			name: "country is code",
			desc: "country is DE",
			want: and1 + `{"type":"trait","trait":"country","operator":"eq","value":"DE"}]}`,
		},
		{
			name: "several countries",
			desc: "customers from Germany, Austria or Switzerland",
			want: and1 + `{"type":"trait","trait":"country","operator":"in","value":["Germany","Austria","Switzerland"]}]}`,
		},
		{
			name: "numeric trait at least becomes gt or eq",
			desc: "age at least 18",
			want: and1 + `{"logic":"OR","conditions":[{"type":"trait","trait":"age","operator":"gt","value":18},{"type":"trait","trait":"age","operator":"eq","value":18}]}]}`,
		},
		{
			name: "contains and negated contains",
			desc: "email contains gmail.com and email does not contain test",
			want: and1 + `{"type":"trait","trait":"email","operator":"contains","value":"gmail.com"},{"logic":"AND","negate":true,"conditions":[{"type":"trait","trait":"email","operator":"contains","value":"test"}]}]}`,
		},
		{
			name: "starts with",
			desc: "first name starts with A",
			want: and1 + `{"type":"trait","trait":"first_name","operator":"starts_with","value":"A"}]}`,
		},
		// Segments and combinations.
		{
			name: "not in segment",
			desc: "in segment 12 but not in segment #7",
			want: and1 + `{"type":"in_segment","segment_id":12},{"logic":"AND","negate":true,"conditions":[{"type":"in_segment","segment_id":7}]}]}`,
		},
		{
			name: "and binds tighter than or",
			desc: "haven't ordered in over 60 days and are from Germany, or never ordered",
			want: `{"logic":"OR","conditions":[{"logic":"AND","conditions":[{` + orderRecency + `,"operator":"gt","window_days":60},{"type":"trait","trait":"country","operator":"eq","value":"Germany"}]},{"type":"frequency","event_type":"order_completed","operator":"eq","value":0}]}`,
		},
		{
			name: "who clauses and symbols",
			desc: "Pro plan users who spent > 100 and visits >= 3",
			want: and1 + `{"type":"trait","trait":"plan","operator":"eq","value":"Pro"},{` + orderSum + `,"operator":"gt","value":100},{"type":"frequency","event_type":"page_view","operator":"gte","value":3}]}`,
		},
		{
			name: "elliptical amount with its own window",
			desc: "spent over 100 in the last 30 days or over 500 in the last year",
			want: `{"logic":"OR","conditions":[{` + orderSum + `,"operator":"gt","value":100,"window_days":30},{` + orderSum + `,"operator":"gt","value":500,"window_days":365}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Rules(tt.desc, tt.hints)
			if err != nil {
				t.Fatalf("Rules(%q): %v", tt.desc, err)
			}
			assertJSON(t, got, tt.want)
		})
	}
}

func TestRulesNotUnderstood(t *testing.T) {
	tests := []struct {
		name, desc string
		wantInErr  string
	}{
		{name: "empty", desc: "", wantInErr: "no condition"},
		{name: "only filler", desc: "all users, everyone", wantInErr: "no condition"},
		{name: "gibberish", desc: "hello world", wantInErr: `"hello world"`},
		{name: "one bad clause spoils the rest", desc: "spent over 100 and likes cats", wantInErr: `"likes cats"`},
		{name: "ends with is unsupported", desc: "email ends with gmail.com", wantInErr: "ends with"},
		{name: "lapsed without a duration", desc: "lapsed customers", wantInErr: "for how long"},
		{name: "average without amount", desc: "average order value in the last 30 days", wantInErr: "which amount"},
		{name: "point in time for a sum", desc: "spent over 100 30 days ago", wantInErr: "not a point in time"},
		{name: "two windows", desc: "ordered in the last 30 days in the last 7 days", wantInErr: "more than one time range"},
		{name: "window too long", desc: "ordered in the last 500 years", wantInErr: "whole number of days"},
		{name: "zero days", desc: "ordered in the last 0 days", wantInErr: "whole number of days"},
		{name: "count of one page", desc: "viewed the pricing page 3 times", wantInErr: "counting views of one page"},
		{name: "fractional count", desc: "visited 2.5 times", wantInErr: "whole number"},
		{name: "too long", desc: strings.Repeat("spent over 100 and ", 300), wantInErr: "longer than"},
		{name: "too many conditions", desc: strings.Repeat("spent over 100 and ", 51) + "never ordered", wantInErr: "at most 50"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Rules(tt.desc, Hints{})
			if !errors.Is(err, ErrNotUnderstood) {
				t.Fatalf("Rules(%q) = %s, %v; want ErrNotUnderstood", tt.desc, got, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.wantInErr) {
				t.Errorf("error %q does not mention %q", msg, tt.wantInErr)
			}
			if !strings.Contains(msg, "understands") || !strings.Contains(msg, "spent over 100 in the last 30 days") {
				t.Errorf("error %q does not list what the rules understand", msg)
			}
			if msg != strings.ToLower(msg[:1])+msg[1:] {
				t.Errorf("error %q is not lower case", msg)
			}
		})
	}
}

func TestRulesDeterministic(t *testing.T) {
	desc := "spent over 100 in the last 30 days, on the pro plan or viewed the pricing page"
	first, err := Rules(desc, tenantHints)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		got, err := Rules(desc, tenantHints)
		if err != nil || string(got) != string(first) {
			t.Fatalf("Rules is not deterministic: %s vs %s (%v)", got, first, err)
		}
	}
}

func TestPromptExamplesMatchRules(t *testing.T) {
	examples := []struct{ desc, want string }{
		{example1Desc, example1},
		{example2Desc, example2},
		{example3Desc, example3},
	}
	system := Messages("x", Hints{}, "")[0].Content
	for _, ex := range examples {
		t.Run(ex.desc, func(t *testing.T) {
			if !strings.Contains(system, "Description: "+ex.desc+"\n"+ex.want) {
				t.Errorf("system prompt lacks the example %q", ex.desc)
			}
			got, err := Rules(ex.desc, Hints{})
			if err != nil {
				t.Fatal(err)
			}
			assertJSON(t, got, ex.want)
		})
	}
}

func TestExtract(t *testing.T) {
	const def = `{"logic":"AND","conditions":[{"type":"trait","trait":"plan","operator":"eq","value":"pro"}]}`
	tests := []struct {
		name    string
		content string
		want    string // compact JSON; "" means ErrNoJSON
	}{
		{name: "plain object", content: def, want: def},
		{name: "pretty object with space", content: "\n  {\n \"logic\": \"AND\",\n \"conditions\": []\n}\n", want: `{"logic":"AND","conditions":[]}`},
		{name: "fenced json", content: "Here you go:\n```json\n" + def + "\n```\nDone.", want: def},
		{name: "json fence preferred over earlier plain fence", content: "```\nnot json\n```\n```JSON\n" + def + "\n```", want: def},
		{name: "plain fence", content: "```\n" + def + "\n```", want: def},
		{name: "unterminated fence", content: "```json\n" + def, want: def},
		{name: "prose around", content: "Sure! The definition is " + def + " - let me know.", want: def},
		{name: "invalid first braces skipped", content: "Use {placeholders} like this: " + def, want: def},
		{name: "braces inside strings", content: `answer: {"logic":"AND","conditions":[{"type":"trait","trait":"note","operator":"contains","value":"a}b{c\"}"}]} trailing }`, want: `{"logic":"AND","conditions":[{"type":"trait","trait":"note","operator":"contains","value":"a}b{c\"}"}]}`},
		{name: "definition key unwrapped", content: `{"definition":` + def + `,"explanation":"pro users"}`, want: def},
		{name: "definition key in fence", content: "```json\n{\"definition\": " + def + "}\n```", want: def},
		{name: "definition key that is not an object is kept", content: `{"definition":"none"}`, want: `{"definition":"none"}`},
		{name: "array around object", content: "[" + def + "]", want: def},
		{name: "garbage", content: "I cannot help with that.", want: ""},
		{name: "empty", content: "   ", want: ""},
		{name: "broken json", content: `{"logic":"AND","conditions":[}`, want: ""},
		{name: "unbalanced", content: `{"logic":"AND"`, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Extract(tt.content)
			if tt.want == "" {
				if !errors.Is(err, ErrNoJSON) {
					t.Fatalf("Extract = %s, %v; want ErrNoJSON", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("Extract = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	t.Run("first attempt", func(t *testing.T) {
		msgs := Messages("  spent over 100\nin the last 30 days ", tenantHints, "")
		if len(msgs) != 2 {
			t.Fatalf("got %d messages, want 2", len(msgs))
		}
		if msgs[0].Role != ai.RoleSystem || msgs[1].Role != ai.RoleUser {
			t.Fatalf("roles = %s, %s", msgs[0].Role, msgs[1].Role)
		}
		if want := "Description: spent over 100 in the last 30 days"; msgs[1].Content != want {
			t.Errorf("user message = %q, want %q", msgs[1].Content, want)
		}
		sys := msgs[0].Content
		for _, want := range []string{
			"ONE JSON object", `"between_days":[7,30]`, `"type":"in_segment"`, "not_exists",
			"order_completed", "negate",
			"Event types (most frequent first): screen_view, checkout_started",
			"- purchase: currency, order_total, items",
			"Profile traits: subscription_plan, country_code, email_address, Age",
		} {
			if !strings.Contains(sys, want) {
				t.Errorf("system prompt lacks %q", want)
			}
		}
		if strings.Contains(sys, "Page Viewed") {
			t.Error("system prompt lists the invalid event name \"Page Viewed\"")
		}
	})
	t.Run("no hints", func(t *testing.T) {
		sys := Messages("x", Hints{}, "")[0].Content
		if !strings.Contains(sys, "Event types: none seen yet") || !strings.Contains(sys, "Profile traits: none seen yet") {
			t.Errorf("system prompt does not say the vocabulary is empty:\n%s", sys)
		}
	})
	t.Run("retry carries the previous error", func(t *testing.T) {
		msgs := Messages("never ordered", Hints{}, `conditions[0].operator: "bigger" is not valid`)
		if len(msgs) != 3 {
			t.Fatalf("got %d messages, want 3", len(msgs))
		}
		last := msgs[2]
		want := `Your previous answer was invalid: conditions[0].operator: "bigger" is not valid; answer again with a corrected JSON object only.`
		if last.Role != ai.RoleUser || last.Content != want {
			t.Errorf("retry message = %s %q, want user %q", last.Role, last.Content, want)
		}
	})
	t.Run("long previous error is cut", func(t *testing.T) {
		msgs := Messages("never ordered", Hints{}, strings.Repeat("é", 3000))
		if n := len(msgs[2].Content); n > maxPreviousError+200 {
			t.Errorf("retry message is %d bytes", n)
		}
		if !utf8.ValidString(msgs[2].Content) {
			t.Error("retry message is not valid UTF-8")
		}
	})
}

func TestRequest(t *testing.T) {
	req := Request("never ordered", Hints{}, "bad")
	if !req.JSONMode || req.Temperature != 0 || len(req.Tools) != 0 {
		t.Errorf("request = JSONMode %v, Temperature %v, %d tools; want JSON mode, 0, none", req.JSONMode, req.Temperature, len(req.Tools))
	}
	if !reflect.DeepEqual(req.Messages, Messages("never ordered", Hints{}, "bad")) {
		t.Error("request messages differ from Messages")
	}
}

func TestDraftWithModel(t *testing.T) {
	const def = `{"logic":"AND","conditions":[{"type":"frequency","event_type":"order_completed","operator":"eq","value":0}]}`
	f := aitest.New(aitest.Content("Here is the segment:\n```json\n" + def + "\n```"))
	got, err := Draft(context.Background(), f, "never ordered", tenantHints, "previous was bad")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != def {
		t.Errorf("Draft = %s, want %s", got, def)
	}
	if f.Calls() != 1 {
		t.Fatalf("Chat called %d times, want 1", f.Calls())
	}
	req := f.Requests()[0]
	if !req.JSONMode {
		t.Error("the chat request is not in JSON mode")
	}
	if !reflect.DeepEqual(req, Request("never ordered", tenantHints, "previous was bad")) {
		t.Error("the chat request differs from Request(...)")
	}
}

func TestDraftErrors(t *testing.T) {
	t.Run("provider error is wrapped", func(t *testing.T) {
		f := aitest.New(aitest.Fail(ai.ErrRateLimited))
		_, err := Draft(context.Background(), f, "never ordered", Hints{}, "")
		if !errors.Is(err, ai.ErrRateLimited) {
			t.Fatalf("err = %v, want ai.ErrRateLimited", err)
		}
	})
	t.Run("no json", func(t *testing.T) {
		f := aitest.New(aitest.Content("I am not sure what you mean."))
		_, err := Draft(context.Background(), f, "never ordered", Hints{}, "")
		if !errors.Is(err, ErrNoJSON) {
			t.Fatalf("err = %v, want ErrNoJSON", err)
		}
	})
	t.Run("cut off answer says so", func(t *testing.T) {
		f := aitest.New(aitest.Step{Response: ai.ChatResponse{Content: `{"logic":"AND","conditions":[`, FinishReason: ai.FinishLength}})
		_, err := Draft(context.Background(), f, "never ordered", Hints{}, "")
		if !errors.Is(err, ErrNoJSON) || !strings.Contains(err.Error(), "token limit") {
			t.Fatalf("err = %v, want ErrNoJSON mentioning the token limit", err)
		}
	})
	t.Run("nil provider", func(t *testing.T) {
		if _, err := Draft(context.Background(), nil, "never ordered", Hints{}, ""); err == nil {
			t.Fatal("want an error for a nil provider")
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		f := aitest.New(aitest.Content("{}"))
		if _, err := Draft(ctx, f, "never ordered", Hints{}, ""); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if f.Calls() != 0 {
			t.Error("Chat was called with a cancelled context")
		}
	})
}

func TestDraftLocal(t *testing.T) {
	p, err := ai.New(ai.Config{Provider: ai.ProviderLocal})
	if err != nil {
		t.Fatal(err)
	}
	for _, desc := range []string{
		"spent over 100 on orders in the last 30 days",
		"on the pro plan and viewed the pricing page in the last 14 days",
	} {
		got, err := Draft(context.Background(), p, desc, tenantHints, "ignored by the rules")
		if err != nil {
			t.Fatal(err)
		}
		want, err := Rules(desc, tenantHints)
		if err != nil {
			t.Fatal(err)
		}
		assertJSON(t, got, string(want))
	}
	if _, err := Draft(context.Background(), p, "likes cats", Hints{}, ""); !errors.Is(err, ErrNotUnderstood) {
		t.Errorf("err = %v, want ErrNotUnderstood", err)
	}

	// A fake provider named "local" must not be asked to chat.
	f := &aitest.Provider{ProviderName: ai.ProviderLocal}
	if _, err := Draft(context.Background(), f, "never ordered", Hints{}, ""); err != nil {
		t.Fatal(err)
	}
	if f.Calls() != 0 {
		t.Errorf("Chat was called %d times for the local provider", f.Calls())
	}
}

// checkShape walks a produced definition and checks the structural rules the validator enforces
// that Rules can get wrong: known keys per node kind, valid identifiers, depth and counts.
func checkShape(t *testing.T, def []byte) {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal(def, &root); err != nil {
		t.Fatalf("Rules returned invalid JSON %s: %v", def, err)
	}
	leaves := 0
	var walk func(n map[string]any, depth int)
	walk = func(n map[string]any, depth int) {
		if depth > 5 {
			t.Fatalf("depth over 5 in %s", def)
		}
		if _, ok := n["logic"]; ok {
			for k := range n {
				if k != "logic" && k != "conditions" && k != "negate" {
					t.Fatalf("group key %q in %s", k, def)
				}
			}
			subs, _ := n["conditions"].([]any)
			if len(subs) == 0 {
				t.Fatalf("empty group in %s", def)
			}
			for _, s := range subs {
				walk(s.(map[string]any), depth+1)
			}
			return
		}
		leaves++
		for _, k := range []string{"event_type", "property", "trait"} {
			if v, ok := n[k]; ok && !identRE.MatchString(v.(string)) {
				t.Fatalf("%s %q is not an identifier in %s", k, v, def)
			}
		}
		if _, ok := n["window_days"]; ok {
			if _, both := n["between_days"]; both {
				t.Fatalf("window_days and between_days together in %s", def)
			}
		}
	}
	walk(root, 1)
	if leaves == 0 || leaves > maxConditions {
		t.Fatalf("%d conditions in %s", leaves, def)
	}
}

func FuzzRules(f *testing.F) {
	for _, s := range []string{
		"spent over 100 on orders in the last 30 days",
		"spent over 100 in the last 30 days but not in the last 7 days",
		"average order value above 50",
		"haven't ordered in 30 days or never ordered",
		"lapsed for over 60 days",
		"visited more than 5 times in the last week",
		"plan is pro, business or enterprise",
		"from Germany and has an email",
		"viewed the pricing page between 7 and 30 days ago",
		"age at least 18 and in segment 12",
		"spent between $1,000 and 2k EUR this year",
		"", ",,,", "or or and", "between 5 and", "in the last 99999999999999999999 days",
		"spent over 1e400", "plan is \"pro", "\xff\xfe", "segment 99999999999999999999",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, desc string) {
		got, err := Rules(desc, tenantHints)
		if err != nil {
			if got != nil {
				t.Fatalf("Rules returned output %s and error %v", got, err)
			}
			if !errors.Is(err, ErrNotUnderstood) {
				t.Fatalf("Rules error %v does not wrap ErrNotUnderstood", err)
			}
			return
		}
		if !json.Valid(got) {
			t.Fatalf("Rules(%q) returned invalid JSON %s", desc, got)
		}
		checkShape(t, got)
	})
}
