package pagebuild

import (
	"context"
	"testing"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/block"
)

// FuzzBuildMessage runs the local agent on basePage with any message: no panic, and the working
// copy is always a valid page. Run it with
//
//	go test ./internal/pagebuild -run '^$' -fuzz FuzzBuildMessage -fuzztime 30s
func FuzzBuildMessage(f *testing.F) {
	for _, s := range []string{
		"add a testimonial from Jane about fast shipping", "make the grid four columns; remove the hero",
		"move the product grid above the text", "add a call to action 'Shop now' linking to javascript:alert(1)",
		"add a feature list with " + string(make([]byte, 40)), "set the title to \x00", "change the headline to ",
		"add a product grid of nothing", "move the hero below the hero", "make the grid 99 columns", "add a hero at the top then remove the hero",
		"add a feature list with a, b, c, d, e, f, g, h, i, j, k, l, m, n", "set the intro to 'x'", "”“''\"\"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		m, err := CheckMessage(msg)
		if err != nil {
			return
		}
		r, _ := localRun(m)
		if _, err := block.Validate("blocks", r.wc.blocks); err != nil {
			t.Fatalf("message %q left an invalid page: %v", msg, err)
		}
		if !utf8.ValidString(r.wc.title) || r.wc.title == "" {
			t.Fatalf("message %q left title %q", msg, r.wc.title)
		}
	})
}

// FuzzToolArguments sends any tool name and arguments into the apply path: no panic, the result
// is JSON for the model, and the working copy stays a valid page. Run it with
//
//	go test ./internal/pagebuild -run '^$' -fuzz FuzzToolArguments -fuzztime 30s
func FuzzToolArguments(f *testing.F) {
	seeds := [][2]string{
		{ToolAddBlock, `{"type":"hero","props":{"headline":"H"},"position":0}`},
		{ToolAddBlock, `{"type":"product_grid","props":{"product_skus":["A","a"]}}`},
		{ToolAddBlock, `{"type":"feature_list","props":{"items":[{"title":1}]}}`},
		{ToolAddBlock, `{"type":"cta_banner","props":{"headline":"x","cta_label":"y","cta_url":"ftp://x"}}`},
		{ToolUpdateBlock, `{"id":"g1","props":{"columns":1e300}}`},
		{ToolUpdateBlock, `{"id":"h1","props":{"headline":null}}`},
		{ToolUpdateBlock, `{"id":"h1","props":{"subheadline":null}}`},
		{ToolMoveBlock, `{"id":"q1","position":-1}`},
		{ToolMoveBlock, `{"id":"q1","position":3}`},
		{ToolRemoveBlock, `{"id":""}`},
		{ToolSetPage, `{"title":"  "}`},
		{ToolSetPage, `{"intro_copy":"ok"}`},
		{ToolSearchProducts, `{"query":"shoes","limit":1000}`},
		{ToolGetBlock, `{"id":"t1"}`},
		{ToolListBlocks, `{"x":1}`},
		{"nope", `[]`},
		{ToolAddBlock, `{"type":"hero","props":{"headline":"H"}} {}`},
		{ToolAddBlock, `{"type":"hero","props":{"headline":"H"},"position":9223372036854775808}`},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, name, args string) {
		r, _ := localRun("")
		a := r.call(context.Background(), ai.ToolCall{ID: "c", Name: name, Arguments: args})
		if a.result == "" || a.result[0] != '{' {
			t.Fatalf("result %q is not a JSON object", a.result)
		}
		if _, err := block.Validate("blocks", r.wc.blocks); err != nil {
			t.Fatalf("%s %s left an invalid page: %v", name, args, err)
		}
		if a.err != nil && len(r.wc.ops) != 0 {
			t.Fatalf("a refused call was recorded: %+v", r.wc.ops)
		}
	})
}
