package pageexport

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/cohort-dev/cohort/internal/block"
)

// TestHTMLEscapesEveryProp parses the HTML export of a page whose every text is hostile: the
// document has exactly the one style and the one (tracking) script element, no event handler
// attribute, every block type, lazy images, and the hostile text comes back as text.
func TestHTMLEscapesEveryProp(t *testing.T) {
	c := fullContent(hostile, "https://cohort.example")
	out, err := RenderHTML(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out, []byte("<!DOCTYPE html>")) {
		t.Fatal("no HTML5 doctype")
	}
	doc, err := html.Parse(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	var scripts, styles, imgs, lazy int
	types := map[string]bool{}
	var texts []string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script":
				scripts++
			case "style":
				styles++
			case "img":
				imgs++
			}
			for _, a := range n.Attr {
				if strings.HasPrefix(a.Key, "on") {
					t.Errorf("<%s> has an event handler attribute %s=%q", n.Data, a.Key, a.Val)
				}
				if a.Key == "loading" && a.Val == "lazy" {
					lazy++
				}
				if a.Key == "data-block-type" {
					types[a.Val] = true
				}
			}
		}
		if n.Type == html.TextNode && n.Parent != nil && n.Parent.Data != "script" && n.Parent.Data != "style" {
			texts = append(texts, n.Data)
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(doc)
	if scripts != 1 || styles != 1 {
		t.Errorf("%d script and %d style elements, want the tracking script and one stylesheet", scripts, styles)
	}
	if imgs == 0 || lazy != imgs {
		t.Errorf("%d images, %d lazy", imgs, lazy)
	}
	for _, typ := range block.Types() {
		if !types[typ] {
			t.Errorf("block type %s not rendered", typ)
		}
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{"Hero " + hostile, "Sub " + hostile, "Go " + hostile, "Heading " + hostile, "CTA " + hostile,
		"CTA body " + hostile, "Buy " + hostile, "Features " + hostile, "Fast " + hostile, "Really " + hostile,
		"Quote " + hostile, "Ann " + hostile, "Buyer " + hostile, "Dress " + hostile, "Skirt " + hostile, "Intro " + hostile, "Title " + hostile} {
		if !strings.Contains(all, want) {
			t.Errorf("text %q not rendered as text", want[:12])
		}
	}
	s := string(out)
	// Outside the stylesheet (where the custom CSS holds the text with every "<" escaped) the
	// hostile markup appears only escaped.
	head, rest, _ := strings.Cut(s, "<style>")
	css, body, _ := strings.Cut(rest, "</style>")
	for _, bad := range []string{"<script>window.__pwned", "</style></script>", "onerror=\"window", "<!-- "} {
		if strings.Contains(head+body, bad) {
			t.Errorf("output contains %q unescaped", bad)
		}
	}
	if strings.Contains(css, "<") {
		t.Error("the stylesheet contains a <")
	}
	if !strings.Contains(s, "--cohort-primary:#112233") || !strings.Contains(s, `\3c /style`) {
		t.Error("tokens or escaped custom CSS missing from the stylesheet")
	}
}

// TestHTMLDropsUnsafeTokensAndLinks: malformed tokens fall back to the defaults; links that are
// not http(s) or a same-site path are dropped.
func TestHTMLDropsUnsafeTokensAndLinks(t *testing.T) {
	c := fullContent("x", "https://cohort.example")
	c.Tokens = Tokens{PrimaryColor: "red;}</style><script>", HeadingFont: `Inter"; } body{display:none`, BorderRadius: "expression(alert(1))", SpacingUnit: 1000}
	c.Page.Blocks[0].Props["cta_url"] = "javascript:alert(1)"
	c.Page.Blocks[0].Props["image_url"] = "//evil.example/x.png"
	out, err := RenderHTML(c)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	d := DefaultTokens()
	for _, want := range []string{"--cohort-primary:" + d.PrimaryColor, "--cohort-radius:" + d.BorderRadius, `--cohort-heading-font:"Inter"`, "--cohort-space:8px"} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q", want)
		}
	}
	for _, bad := range []string{"javascript:", "evil.example", "expression(", "display:none"} {
		if strings.Contains(s, bad) {
			t.Errorf("output contains %q", bad)
		}
	}
}

// TestTSXEscapesEveryProp: every text reaches the TSX only inside JSON string literals.
func TestTSXEscapesEveryProp(t *testing.T) {
	out, err := RenderTSX(fullContent(hostile, "https://cohort.example"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if strings.Count(s, "import ") != 1 || !strings.Contains(s, `import { useEffect } from "react";`) {
		t.Error("the file must import React only")
	}
	if !strings.Contains(s, "export default function CohortPage()") {
		t.Error("no default-exported page component")
	}
	for _, c := range []string{"interface HeroProps", "interface ProductGridProps", "interface TextSectionProps",
		"interface CtaBannerProps", "interface FeatureListProps", "interface TestimonialProps"} {
		if !strings.Contains(s, c) {
			t.Errorf("missing %s", c)
		}
	}
	for _, bad := range []string{"</script>", "<script>", "<img src=x", "\u2028", "\u2029"} {
		if strings.Contains(s, bad) {
			t.Errorf("output contains %q unescaped", bad)
		}
	}
	// A page using only a hero declares only the hero's component.
	c := fullContent("x", "")
	c.Page.Blocks = c.Page.Blocks[:1]
	out, _ = RenderTSX(c)
	if strings.Contains(string(out), "TestimonialProps") || !strings.Contains(string(out), "HeroProps") {
		t.Error("components of unused block types declared")
	}
}

func TestJSONAndZip(t *testing.T) {
	c := fullContent(hostile, "https://cohort.example")
	out, err := RenderJSON(c)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Page struct {
			Title string `json:"title"`
		} `json:"page"`
		Blocks   []block.Block    `json:"blocks"`
		Products []map[string]any `json:"products"`
		Design   Tokens           `json:"design_tokens"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Page.Title != "Title "+hostile || len(doc.Blocks) != 6 || len(doc.Products) != 2 || doc.Design.PrimaryColor != "#112233" {
		t.Errorf("json export: title %q, %d blocks, %d products, tokens %+v", doc.Page.Title, len(doc.Blocks), len(doc.Products), doc.Design)
	}
	z, err := RenderZip(c)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]func(Content) ([]byte, error){"page.json": RenderJSON, "page.html": RenderHTML, "Page.tsx": RenderTSX, "README.md": nil}
	for _, f := range zr.File {
		render, ok := want[f.Name]
		if !ok {
			t.Errorf("unexpected file %s", f.Name)
			continue
		}
		delete(want, f.Name)
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(rc)
		_ = rc.Close()
		if render != nil {
			if exp, _ := render(c); !bytes.Equal(body, exp) {
				t.Errorf("%s differs from its own export", f.Name)
			}
		} else if !strings.Contains(string(body), "Page.tsx") {
			t.Errorf("README: %s", body)
		}
	}
	if len(want) != 0 {
		t.Errorf("missing files %v", want)
	}
	if again, _ := RenderZip(c); !bytes.Equal(again, z) {
		t.Error("the zip is not reproducible")
	}
}

// TestExportsKeepFragmentLinks: a CTA whose URL is a fragment of the page (a generated hero's
// "#blk_products") keeps its link in the HTML and TSX exports, and every block's element carries
// its block id as its HTML id, so the fragment lands on the block it names.
func TestExportsKeepFragmentLinks(t *testing.T) {
	c := fullContent("x", "https://cohort.example")
	c.Page.Blocks[0].Props["cta_url"] = "#blk_grid"
	c.Page.Blocks[3].Props["cta_url"] = "#blk_quote"
	out, err := RenderHTML(c)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{} // id -> data-block-type
	var hrefs []string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			var id, typ string
			for _, a := range n.Attr {
				switch a.Key {
				case "id":
					id = a.Val
				case "data-block-type":
					typ = a.Val
				case "href":
					if n.Data == "a" {
						hrefs = append(hrefs, a.Val)
					}
				}
			}
			if id != "" {
				if _, dup := ids[id]; dup {
					t.Errorf("id %q twice", id)
				}
				ids[id] = typ
			}
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(doc)
	for _, want := range []string{"#blk_grid", "#blk_quote"} {
		if !slices.Contains(hrefs, want) {
			t.Errorf("no <a href=%q> (links %q)", want, hrefs)
		}
	}
	for _, b := range c.Page.Blocks {
		if ids[b.ID] != b.Type {
			t.Errorf("block %s (%s): element with its id has data-block-type %q", b.ID, b.Type, ids[b.ID])
		}
	}

	tsx, err := RenderTSX(c)
	if err != nil {
		t.Fatal(err)
	}
	s := string(tsx)
	for _, want := range []string{`ctaUrl={"#blk_grid"}`, `ctaUrl={"#blk_quote"}`, `id={"blk_grid"}`, `id={"blk_hero"}`, `id={"blk_quote"}`,
		`<section id={props.id} className="cohort-block cohort-hero"`, `<section id={props.id} className="cohort-block cohort-products"`} {
		if !strings.Contains(s, want) {
			t.Errorf("TSX export lacks %s", want)
		}
	}
}

// TestExportsKeepUnicodeFonts: a font family the design system accepts (letters of any script)
// reaches the HTML and TSX stylesheets as a quoted CSS string, not replaced by the default; a
// name the design system refuses falls back to it, and the quoting escapes anything that could
// end the string or the <style> element.
func TestExportsKeepUnicodeFonts(t *testing.T) {
	c := fullContent("x", "https://cohort.example")
	c.Tokens.HeadingFont, c.Tokens.BodyFont = "Ωmega", "Noto Sans 日本"
	out, err := RenderHTML(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`--cohort-heading-font:"Ωmega", system-ui`, `--cohort-body-font:"Noto Sans 日本", system-ui`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("HTML export lacks %s", want)
		}
	}
	tsx, err := RenderTSX(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(tsx), `--cohort-heading-font:\"Ωmega\", system-ui`) {
		t.Errorf("TSX export lacks the heading font: %.400s", tsx)
	}
	for name, want := range map[string]string{
		`Ωmega`:              `"Ωmega", system-ui, sans-serif`,
		`a"b\c<d>&e` + "\n":  `"a\22 b\5c c\3c d\3e \26 e\a ", system-ui, sans-serif`,
		`x</style><script>`:  `"x\3c /style\3e \3c script\3e ", system-ui, sans-serif`,
		"\u2028\u0000\ufeff": `"\2028 \fffd \feff ", system-ui, sans-serif`,
	} {
		if got := quoteFont(name); got != want {
			t.Errorf("quoteFont(%q) = %s, want %s", name, got, want)
		}
	}
}
