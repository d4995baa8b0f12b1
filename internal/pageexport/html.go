package pageexport

import (
	"bytes"
	"fmt"
	"html/template"
)

// The HTML export: one HTML5 document, styled by the design tokens (CSS variables) and the
// tenant's custom CSS in one <style>, every block of the registry drawn (its element's id is the
// block id, the target of a "#<block id>" link), every text escaped by html/template, images
// lazy-loaded, and the tracking snippet at the end of the body: trackingScript, the same text in
// every export (a Content-Security-Policy allows it by hash), with its settings in attributes.

var htmlTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="Cohort page export">
<title>{{.Title}}</title>
{{- with .Head}}
{{- if .Description}}
<meta name="description" content="{{.Description}}">{{end}}
<link rel="canonical" href="{{.Canonical}}">
<meta property="og:type" content="website">
<meta property="og:title" content="{{$.Title}}">
{{- if .Description}}
<meta property="og:description" content="{{.Description}}">{{end}}
<meta property="og:url" content="{{.Canonical}}">
{{- if .Image}}
<meta property="og:image" content="{{.Image}}">{{end}}
<script type="application/ld+json">{{.JSONLD}}</script>
{{- end}}
<style>
{{.CSS}}
</style>
</head>
<body>
<main class="cohort-page" data-page-slug="{{.Slug}}">
{{- if .IntroCopy}}
<p class="cohort-intro">{{.IntroCopy}}</p>
{{- end}}
{{- range .Blocks}}{{$id := .ID}}
{{- if .Hero}}{{with .Hero}}
<section{{if $id}} id="{{$id}}"{{end}} class="cohort-block cohort-hero" data-block-type="hero">
<h1>{{.Headline}}</h1>
{{- if .Subheadline}}
<p>{{.Subheadline}}</p>{{end}}
{{- if .ImageURL}}
<img src="{{.ImageURL}}" alt="" loading="lazy">{{end}}
{{- if and .CTALabel .CTAURL}}
<p><a class="cohort-button" href="{{.CTAURL}}">{{.CTALabel}}</a></p>{{end}}
</section>
{{- end}}{{end}}
{{- if .Grid}}{{with .Grid}}
<section{{if $id}} id="{{$id}}"{{end}} class="cohort-block cohort-products" data-block-type="product_grid">
<div class="cohort-grid" style="--cohort-columns: {{.Columns}}">
{{- range .Products}}
<article class="cohort-product" data-sku="{{.SKU}}">
{{- if .ImageURL}}
<img src="{{.ImageURL}}" alt="{{.Name}}" loading="lazy">{{end}}
<h3>{{.Name}}</h3>
{{- if .Price}}
<p class="cohort-price">{{.Price}}</p>{{end}}
</article>
{{- end}}
</div>
</section>
{{- end}}{{end}}
{{- if .Text}}{{with .Text}}
<section{{if $id}} id="{{$id}}"{{end}} class="cohort-block cohort-text" data-block-type="text_section" style="text-align: {{.Align}}">
{{- if .Heading}}
<h2>{{.Heading}}</h2>{{end}}
<p>{{.Body}}</p>
</section>
{{- end}}{{end}}
{{- if .CTA}}{{with .CTA}}
<section{{if $id}} id="{{$id}}"{{end}} class="cohort-block cohort-cta" data-block-type="cta_banner">
<h2>{{.Headline}}</h2>
{{- if .Body}}
<p>{{.Body}}</p>{{end}}
{{- if .CTAURL}}
<p><a class="cohort-button" href="{{.CTAURL}}">{{.CTALabel}}</a></p>{{end}}
</section>
{{- end}}{{end}}
{{- if .Features}}{{with .Features}}
<section{{if $id}} id="{{$id}}"{{end}} class="cohort-block cohort-features" data-block-type="feature_list">
{{- if .Heading}}
<h2>{{.Heading}}</h2>{{end}}
<ul>
{{- range .Items}}
<li><h3>{{.Title}}</h3>{{if .Description}}<p>{{.Description}}</p>{{end}}</li>
{{- end}}
</ul>
</section>
{{- end}}{{end}}
{{- if .Testimonial}}{{with .Testimonial}}
<section{{if $id}} id="{{$id}}"{{end}} class="cohort-block cohort-testimonial" data-block-type="testimonial">
<figure>
<blockquote>{{.Quote}}</blockquote>
<figcaption>
{{- if .AvatarURL}}<img src="{{.AvatarURL}}" alt="" loading="lazy">{{end}}
<cite>{{.Author}}</cite>{{if .Role}}, <span>{{.Role}}</span>{{end}}</figcaption>
</figure>
</section>
{{- end}}{{end}}
{{- end}}
</main>
<script data-cohort-sdk="{{.Tracking.ScriptURL}}" data-cohort-api="{{.Tracking.APIURL}}" data-cohort-key="{{.Tracking.PublicKey}}">` + trackingScript + `</script>
</body>
</html>
`))

type htmlData struct {
	pageView
	CSS  template.CSS
	Head *headView
}

// headView is Head as the template draws it.
type headView struct {
	Description, Canonical, Image string
	JSONLD                        template.JS
}

// RenderHTML renders the HTML export.
func RenderHTML(c Content) ([]byte, error) {
	v := newView(c)
	var b bytes.Buffer
	// The CSS is built from sanitised tokens and custom CSS whose "<" are escaped (SafeCSS):
	// it is trusted as a stylesheet and cannot leave its <style> element.
	d := htmlData{pageView: v, CSS: template.CSS(v.CSS)}
	if h := c.Head; h != nil {
		// JSONLD is JSON, where "<" can only stand in a string: as \u003c it means the same and
		// no "</script>" can end the element early.
		ld := bytes.ReplaceAll(h.JSONLD, []byte("<"), []byte(`\u003c`))
		d.Head = &headView{Description: h.Description, Canonical: h.Canonical, Image: safeURL(h.Image), JSONLD: template.JS(ld)}
	}
	if err := htmlTemplate.Execute(&b, d); err != nil {
		return nil, fmt.Errorf("render html: %w", err)
	}
	return b.Bytes(), nil
}
