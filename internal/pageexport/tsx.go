package pageexport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/cohort-dev/cohort/internal/block"
)

// The TSX export: one React component file that imports nothing but React. It declares a typed
// props interface and a function component for each block type the page uses, the design
// tokens as a CSS string rendered in a <style>, and a default-exported page component (each
// block's <section> has the block id as its id, the target of a "#<block id>" link) whose
// effect injects the client library's script and records a page view. Every text the tenant
// wrote reaches the file only as a JSON string literal (with <, >, &, U+2028 and U+2029
// escaped), so it cannot end its literal or open JSX.

// lit is a TypeScript string literal of s.
func lit(s string) string {
	b, err := json.Marshal(s) // escapes quotes, backslashes, control characters and <>&, U+2028/9
	if err != nil {
		return `""`
	}
	return string(b)
}

// tsxComponents are the props interface and component of each block type, in registry order.
var tsxComponents = map[string]string{
	block.Hero: `export interface HeroProps {
  id?: string;
  headline: string;
  subheadline?: string;
  ctaLabel?: string;
  ctaUrl?: string;
  imageUrl?: string;
}

export function Hero(props: HeroProps) {
  return (
    <section id={props.id} className="cohort-block cohort-hero" data-block-type="hero">
      <h1>{props.headline}</h1>
      {props.subheadline ? <p>{props.subheadline}</p> : null}
      {props.imageUrl ? <img src={props.imageUrl} alt="" loading="lazy" /> : null}
      {props.ctaLabel && props.ctaUrl ? (
        <p>
          <a className="cohort-button" href={props.ctaUrl}>{props.ctaLabel}</a>
        </p>
      ) : null}
    </section>
  );
}
`,
	block.ProductGrid: `export interface Product {
  sku: string;
  name: string;
  price?: string;
  imageUrl?: string;
}

export interface ProductGridProps {
  id?: string;
  columns: number;
  products: Product[];
}

export function ProductGrid(props: ProductGridProps) {
  return (
    <section id={props.id} className="cohort-block cohort-products" data-block-type="product_grid">
      <div className="cohort-grid" style={{ ["--cohort-columns" as string]: String(props.columns) }}>
        {props.products.map((p) => (
          <article className="cohort-product" data-sku={p.sku} key={p.sku}>
            {p.imageUrl ? <img src={p.imageUrl} alt={p.name} loading="lazy" /> : null}
            <h3>{p.name}</h3>
            {p.price ? <p className="cohort-price">{p.price}</p> : null}
          </article>
        ))}
      </div>
    </section>
  );
}
`,
	block.TextSection: `export interface TextSectionProps {
  id?: string;
  heading?: string;
  body: string;
  align: "left" | "center" | "right";
}

export function TextSection(props: TextSectionProps) {
  return (
    <section id={props.id} className="cohort-block cohort-text" data-block-type="text_section" style={{ textAlign: props.align }}>
      {props.heading ? <h2>{props.heading}</h2> : null}
      <p>{props.body}</p>
    </section>
  );
}
`,
	block.CTABanner: `export interface CtaBannerProps {
  id?: string;
  headline: string;
  body?: string;
  ctaLabel: string;
  ctaUrl?: string;
}

export function CtaBanner(props: CtaBannerProps) {
  return (
    <section id={props.id} className="cohort-block cohort-cta" data-block-type="cta_banner">
      <h2>{props.headline}</h2>
      {props.body ? <p>{props.body}</p> : null}
      {props.ctaUrl ? (
        <p>
          <a className="cohort-button" href={props.ctaUrl}>{props.ctaLabel}</a>
        </p>
      ) : null}
    </section>
  );
}
`,
	block.FeatureList: `export interface Feature {
  title: string;
  description?: string;
}

export interface FeatureListProps {
  id?: string;
  heading?: string;
  items: Feature[];
}

export function FeatureList(props: FeatureListProps) {
  return (
    <section id={props.id} className="cohort-block cohort-features" data-block-type="feature_list">
      {props.heading ? <h2>{props.heading}</h2> : null}
      <ul>
        {props.items.map((item, i) => (
          <li key={i}>
            <h3>{item.title}</h3>
            {item.description ? <p>{item.description}</p> : null}
          </li>
        ))}
      </ul>
    </section>
  );
}
`,
	block.Testimonial: `export interface TestimonialProps {
  id?: string;
  quote: string;
  author: string;
  role?: string;
  avatarUrl?: string;
}

export function Testimonial(props: TestimonialProps) {
  return (
    <section id={props.id} className="cohort-block cohort-testimonial" data-block-type="testimonial">
      <figure>
        <blockquote>{props.quote}</blockquote>
        <figcaption>
          {props.avatarUrl ? <img src={props.avatarUrl} alt="" loading="lazy" /> : null}
          <cite>{props.author}</cite>
          {props.role ? <span>, {props.role}</span> : null}
        </figcaption>
      </figure>
    </section>
  );
}
`,
}

// attrs writes JSX attributes name={"literal"}, leaving out empty optional ones.
type attrs struct {
	b *strings.Builder
}

func (a attrs) str(name, v string, optional bool) {
	if optional && v == "" {
		return
	}
	a.b.WriteString(" " + name + "={" + lit(v) + "}")
}

func (a attrs) raw(name, expr string) { a.b.WriteString(" " + name + "={" + expr + "}") }

func tsxProducts(ps []productView) string {
	var b strings.Builder
	b.WriteString("[")
	for i, p := range ps {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("{ sku: " + lit(p.SKU) + ", name: " + lit(p.Name))
		if p.Price != "" {
			b.WriteString(", price: " + lit(p.Price))
		}
		if p.ImageURL != "" {
			b.WriteString(", imageUrl: " + lit(p.ImageURL))
		}
		b.WriteString(" }")
	}
	b.WriteString("]")
	return b.String()
}

func tsxFeatures(items []featureItem) string {
	var b strings.Builder
	b.WriteString("[")
	for i, it := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("{ title: " + lit(it.Title))
		if it.Description != "" {
			b.WriteString(", description: " + lit(it.Description))
		}
		b.WriteString(" }")
	}
	b.WriteString("]")
	return b.String()
}

// tsxBlock is the JSX element of one block in the page component.
func tsxBlock(bv blockView, key string) string {
	var b strings.Builder
	a := attrs{&b}
	switch {
	case bv.Hero != nil:
		h := bv.Hero
		b.WriteString("<Hero")
		a.raw("key", lit(key))
		a.str("headline", h.Headline, false)
		a.str("subheadline", h.Subheadline, true)
		a.str("ctaLabel", h.CTALabel, true)
		a.str("ctaUrl", h.CTAURL, true)
		a.str("imageUrl", h.ImageURL, true)
	case bv.Grid != nil:
		b.WriteString("<ProductGrid")
		a.raw("key", lit(key))
		a.raw("columns", strconv.Itoa(bv.Grid.Columns))
		a.raw("products", tsxProducts(bv.Grid.Products))
	case bv.Text != nil:
		t := bv.Text
		b.WriteString("<TextSection")
		a.raw("key", lit(key))
		a.str("heading", t.Heading, true)
		a.str("body", t.Body, false)
		a.str("align", t.Align, false)
	case bv.CTA != nil:
		c := bv.CTA
		b.WriteString("<CtaBanner")
		a.raw("key", lit(key))
		a.str("headline", c.Headline, false)
		a.str("body", c.Body, true)
		a.str("ctaLabel", c.CTALabel, false)
		a.str("ctaUrl", c.CTAURL, true)
	case bv.Features != nil:
		f := bv.Features
		b.WriteString("<FeatureList")
		a.raw("key", lit(key))
		a.str("heading", f.Heading, true)
		a.raw("items", tsxFeatures(f.Items))
	case bv.Testimonial != nil:
		t := bv.Testimonial
		b.WriteString("<Testimonial")
		a.raw("key", lit(key))
		a.str("quote", t.Quote, false)
		a.str("author", t.Author, false)
		a.str("role", t.Role, true)
		a.str("avatarUrl", t.AvatarURL, true)
	}
	a.str("id", bv.ID, true)
	b.WriteString(" />")
	return b.String()
}

// RenderTSX renders the TSX export.
func RenderTSX(c Content) ([]byte, error) {
	v := newView(c)
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s: exported by Cohort. A React component; it imports nothing but React.\n", lit(v.Title))
	b.WriteString("import { useEffect } from \"react\";\n\n")
	b.WriteString("/** The design system of the page: its tokens as CSS variables, the block styles and the custom CSS. */\n")
	b.WriteString("export const pageCss: string = " + lit(v.CSS) + ";\n\n")
	b.WriteString("/** The tracking snippet's settings: the client library's browser bundle and the tenant's public key. */\n")
	b.WriteString("export const tracking = {\n")
	b.WriteString("  scriptUrl: " + lit(v.Tracking.ScriptURL) + ",\n")
	b.WriteString("  apiUrl: " + lit(v.Tracking.APIURL) + ",\n")
	b.WriteString("  apiKey: " + lit(v.Tracking.PublicKey) + ",\n")
	b.WriteString("} as const;\n\n")
	b.WriteString(tsxTrackingHook)
	for _, t := range v.Types {
		b.WriteString("\n" + tsxComponents[t])
	}
	b.WriteString("\nexport default function CohortPage() {\n")
	b.WriteString("  useCohortPageView();\n")
	b.WriteString("  return (\n")
	b.WriteString("    <main className=\"cohort-page\" data-page-slug={" + lit(v.Slug) + "}>\n")
	b.WriteString("      <style>{pageCss}</style>\n")
	if v.IntroCopy != "" {
		b.WriteString("      <p className=\"cohort-intro\">{" + lit(v.IntroCopy) + "}</p>\n")
	}
	for i, bv := range v.Blocks {
		key := bv.ID
		if key == "" {
			key = "block-" + strconv.Itoa(i)
		}
		b.WriteString("      " + tsxBlock(bv, key) + "\n")
	}
	b.WriteString("    </main>\n")
	b.WriteString("  );\n")
	b.WriteString("}\n")
	return b.Bytes(), nil
}

const tsxTrackingHook = `interface CohortClient {
  trackPageView(): unknown;
}

interface CohortGlobal {
  Client: new (options: { apiUrl: string; apiKey: string }) => CohortClient;
}

/** Loads the client library once and records a page view (with AI referral detection). */
export function useCohortPageView(): void {
  useEffect(() => {
    const track = () => {
      const cohort = (window as unknown as { Cohort?: CohortGlobal }).Cohort;
      if (cohort) {
        new cohort.Client({ apiUrl: tracking.apiUrl, apiKey: tracking.apiKey }).trackPageView();
      }
    };
    const existing = document.querySelector<HTMLScriptElement>('script[data-cohort-sdk]');
    if (existing) {
      if ((window as unknown as { Cohort?: CohortGlobal }).Cohort) {
        track();
      } else {
        existing.addEventListener("load", track, { once: true });
      }
      return;
    }
    const script = document.createElement("script");
    script.src = tracking.scriptUrl;
    script.async = true;
    script.setAttribute("data-cohort-sdk", "");
    script.addEventListener("load", track, { once: true });
    document.head.appendChild(script);
  }, []);
}
`
