package pagebuild

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/search"
)

// fakeSearch answers every query with the same products, or none for "nothing".
type fakeSearch struct{}

func (fakeSearch) Search(_ context.Context, _ int64, in search.In) (*search.Result, error) {
	if strings.Contains(in.Query, "nothing") {
		return &search.Result{Query: in.Query}, nil
	}
	return &search.Result{Query: in.Query, Products: []search.Product{{SKU: "RUN-1", Name: "Runner"}, {SKU: "RUN-2", Name: "Trail runner"}}}, nil
}

func basePage() *page.Page {
	return &page.Page{ID: 1, Title: "Winter", IntroCopy: "Intro", Version: 1, Blocks: []block.Block{
		{ID: "h1", Type: block.Hero, Props: map[string]any{"headline": "Winter deals", "subheadline": "Warm up", "cta_label": "Shop", "cta_url": "/shop"}},
		{ID: "t1", Type: block.TextSection, Props: map[string]any{"heading": "About us", "body": "We sell shoes."}},
		{ID: "g1", Type: block.ProductGrid, Props: map[string]any{"product_skus": []any{"SKU-1", "SKU-2"}, "columns": float64(3)}},
		{ID: "q1", Type: block.Testimonial, Props: map[string]any{"quote": "Great shoes", "author": "Sam"}},
	}}
}

// localRun is a build on basePage run by the local planner through the agent's tool loop, in
// memory (no database).
func localRun(msg string) (*Run, []Event) {
	s := &Service{search: fakeSearch{}, model: Planner{}, opts: Options{}.withDefaults()}
	p := basePage()
	r := &Run{s: s, tenantID: 1, page: p, message: msg, wc: newWorkingCopy(p)}
	var evs []Event
	if err := r.runModel(context.Background(), func(e Event) { evs = append(evs, e) }); err != nil {
		panic(err)
	}
	return r, evs
}

// render writes blocks as "id:type{props}" with new blocks' ids as "new".
func render(blocks []block.Block) string {
	var parts []string
	for _, b := range blocks {
		id := b.ID
		if strings.HasPrefix(id, "blk_") {
			id = "new"
		}
		raw, _ := json.Marshal(b.Props)
		parts = append(parts, id+":"+b.Type+string(raw))
	}
	return strings.Join(parts, " ")
}

const (
	h1 = `h1:hero{"cta_label":"Shop","cta_url":"/shop","headline":"Winter deals","subheadline":"Warm up"}`
	t1 = `t1:text_section{"body":"We sell shoes.","heading":"About us"}`
	g1 = `g1:product_grid{"columns":3,"product_skus":["SKU-1","SKU-2"]}`
	q1 = `q1:testimonial{"author":"Sam","quote":"Great shoes"}`
)

func TestLocalCommands(t *testing.T) {
	base := []string{h1, t1, g1, q1}
	with := func(parts ...string) string { return strings.Join(parts, " ") }
	cases := []struct {
		name, msg string
		want      string
		title     string // the page title afterwards, when the command sets it
		intro     string
		says      string // the closing text event contains this
	}{
		{"testimonial from a person about a topic", "add a testimonial from Jane about fast shipping",
			with(append(base, `new:testimonial{"author":"Jane","quote":"I love the fast shipping!"}`)...), "", "", ""},
		{"grid columns in words", "make the grid four columns",
			with(h1, t1, `g1:product_grid{"columns":4,"product_skus":["SKU-1","SKU-2"]}`, q1), "", "", ""},
		{"grid columns in digits", "set the grid to 2 columns",
			with(h1, t1, `g1:product_grid{"columns":2,"product_skus":["SKU-1","SKU-2"]}`, q1), "", "", ""},
		{"move above", "move the product grid above the text", with(h1, g1, t1, q1), "", "", ""},
		{"move to the top", "move the testimonial to the top", with(q1, h1, t1, g1), "", "", ""},
		{"move to the bottom", "move the hero to the bottom", with(t1, g1, q1, h1), "", "", ""},
		{"move below", "move the hero below the grid", with(t1, g1, h1, q1), "", "", ""},
		{"remove", "remove the testimonial", with(h1, t1, g1), "", "", ""},
		{"headline", "change the headline to Summer sale",
			with(`h1:hero{"cta_label":"Shop","cta_url":"/shop","headline":"Summer sale","subheadline":"Warm up"}`, t1, g1, q1), "", "", ""},
		{"subheadline", "change the subheadline to Cosy layers for cold days",
			with(`h1:hero{"cta_label":"Shop","cta_url":"/shop","headline":"Winter deals","subheadline":"Cosy layers for cold days"}`, t1, g1, q1), "", "", ""},
		{"hero button", "change the button to Buy now",
			with(`h1:hero{"cta_label":"Buy now","cta_url":"/shop","headline":"Winter deals","subheadline":"Warm up"}`, t1, g1, q1), "", "", ""},
		{"page title", "set the title to Spring picks", with(base...), "Spring picks", "", ""},
		{"page intro", "set the intro to Fresh picks for spring", with(base...), "", "Fresh picks for spring", ""},
		{"call to action with a link", "add a call to action 'Shop now' linking to /sale",
			with(append(base, `new:cta_banner{"cta_label":"Shop now","cta_url":"/sale","headline":"Shop now"}`)...), "", "", ""},
		{"call to action at the top", "add a call to action saying Join the club linking to https://example.com/join at the top",
			with(append([]string{`new:cta_banner{"cta_label":"Join the club","cta_url":"https://example.com/join","headline":"Join the club"}`}, base...)...), "", "", ""},
		{"text section about a topic", "add a text section about our returns policy",
			with(append(base, `new:text_section{"body":"Learn about our returns policy.","heading":"Our returns policy"}`)...), "", "", ""},
		{"feature list", "add a feature list with free shipping, easy returns",
			with(append(base, `new:feature_list{"items":[{"title":"Free shipping"},{"title":"Easy returns"}]}`)...), "", "", ""},
		{"center text", "center the text section",
			with(h1, `t1:text_section{"align":"center","body":"We sell shoes.","heading":"About us"}`, g1, q1), "", "", ""},
		{"right-align text", "right-align the text",
			with(h1, `t1:text_section{"align":"right","body":"We sell shoes.","heading":"About us"}`, g1, q1), "", "", ""},
		{"text heading", "rename the text section heading to Why us",
			with(h1, `t1:text_section{"body":"We sell shoes.","heading":"Why us"}`, g1, q1), "", "", ""},
		{"text body", "make the text say We ship worldwide",
			with(h1, `t1:text_section{"body":"We ship worldwide","heading":"About us"}`, g1, q1), "", "", ""},
		{"testimonial author", "change the testimonial author to Maria",
			with(h1, t1, g1, `q1:testimonial{"author":"Maria","quote":"Great shoes"}`), "", "", ""},
		{"quoted testimonial below a block", `add a testimonial "Best shoes ever" from Ana below the grid`,
			with(h1, t1, g1, `new:testimonial{"author":"Ana","quote":"Best shoes ever"}`, q1), "", "", ""},
		{"hero with a headline", "add a hero with the headline Big summer sale",
			with(append([]string{`new:hero{"headline":"Big summer sale"}`}, base...)...), "", "", ""},
		{"product grid from a search", "add a product grid of running shoes",
			with(append(base, `new:product_grid{"product_skus":["RUN-1","RUN-2"]}`)...), "", "", ""},
		{"two commands joined by and", "remove the hero and make the grid 2 columns",
			with(t1, `g1:product_grid{"columns":2,"product_skus":["SKU-1","SKU-2"]}`, q1), "", "", ""},
		{"two sentences", "Remove the testimonial. Move the text to the top.", with(t1, h1, g1), "", "", ""},
		{"align left", "align the text left",
			with(h1, `t1:text_section{"align":"left","body":"We sell shoes.","heading":"About us"}`, g1, q1), "", "", ""},
		{"hero button link", "change the button link to /new.",
			with(`h1:hero{"cta_label":"Shop","cta_url":"/new","headline":"Winter deals","subheadline":"Warm up"}`, t1, g1, q1), "", "", ""},
		{"testimonial quote", "change the quote to 'Wow'",
			with(h1, t1, g1, `q1:testimonial{"author":"Sam","quote":"Wow"}`), "", "", ""},
		{"invalid link refused", "change the button link to javascript:alert(1)", with(base...), "", "", "I could not do that: invalid block"},
		{"javascript link of a new call to action refused", "add a call to action 'Go' linking to javascript:alert(1)", with(base...), "", "", "I could not do that: invalid block"},
		{"data link refused", "add a call to action 'Go' linking to data:text/html,hi", with(base...), "", "", "cta_url"},
		{"ftp link refused", "add a call to action 'Go' linking to ftp://example.com/x", with(base...), "", "", "cta_url"},
		{"bare word link refused", "add a call to action 'Go' linking to shop", with(base...), "", "", "cta_url"},
		{"scheme after to refused", "add a call to action saying Go to javascript:alert(1)", with(base...), "", "", "cta_url"},
		{"link refused, the next command still runs", "add a call to action 'Go' linking to shop; remove the hero", with(t1, g1, q1), "", "", "Done: 1 change."},
		{"sentence starting with then", "Add a testimonial from Jane. Then remove the hero.",
			with(t1, g1, q1, `new:testimonial{"author":"Jane","quote":"I love it!"}`), "", "", "Done: 2 changes."},
		{"sentences with next and finally", "Remove the hero. Next, center the text. Finally remove the testimonial.",
			with(`t1:text_section{"align":"center","body":"We sell shoes.","heading":"About us"}`, g1), "", "", "Done: 3 changes."},
		{"grid then more", "add a product grid of running shoes at the top, then remove the testimonial",
			with(`new:product_grid{"product_skus":["RUN-1","RUN-2"]}`, h1, t1, g1), "", "", "Done: 2 changes."},
		{"no products", "add a product grid of nothing", with(base...), "", "", `No products match "nothing".`},
		{"link ends at a space", "add a call to action 'Go' linking to /x y",
			with(append(base, `new:cta_banner{"cta_label":"Go","cta_url":"/x","headline":"Go"}`)...), "", "", ""},
		{"not understood", "make it pop", with(base...), "", "", "I did not understand"},
		{"missing block", "remove the feature list", with(base...), "", "", "The page has no feature list block."},
		{"not understood, then a command", "make it pop, then remove the hero", with(t1, g1, q1), "", "", "I did not understand \"make it pop\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, evs := localRun(tc.msg)
			if got := render(r.wc.blocks); got != tc.want {
				t.Fatalf("blocks after %q:\n got %s\nwant %s", tc.msg, got, tc.want)
			}
			if tc.title != "" && r.wc.title != tc.title {
				t.Errorf("title = %q, want %q", r.wc.title, tc.title)
			}
			if tc.intro != "" && r.wc.introCopy != tc.intro {
				t.Errorf("intro = %q, want %q", r.wc.introCopy, tc.intro)
			}
			if _, err := block.Validate("blocks", r.wc.blocks); err != nil {
				t.Fatalf("the page is not valid: %v", err)
			}
			if len(evs) == 0 || evs[len(evs)-1].Type != EventText {
				t.Fatalf("events = %+v, want the closing text last", evs)
			}
			if !strings.Contains(evs[len(evs)-1].Content, tc.says) {
				t.Fatalf("closing text %q, want it to say %q", evs[len(evs)-1].Content, tc.says)
			}
		})
	}
}
