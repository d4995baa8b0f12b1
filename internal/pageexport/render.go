package pageexport

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/page"
)

// jsonDoc is the JSON export.
type jsonDoc struct {
	Format     string               `json:"format"`
	ExportedAt time.Time            `json:"exported_at"`
	Page       jsonPage             `json:"page"`
	Blocks     []block.Block        `json:"blocks"`
	Products   []page.PublicProduct `json:"products"`
	Design     Tokens               `json:"design_tokens"`
	Tracking   Tracking             `json:"tracking"`
}

type jsonPage struct {
	ID          int64      `json:"id"`
	Slug        string     `json:"slug"`
	Title       string     `json:"title"`
	Published   bool       `json:"published"`
	IntroCopy   string     `json:"intro_copy"`
	ProductSKUs []string   `json:"product_skus"`
	Version     int        `json:"version"`
	GeneratedAt *time.Time `json:"generated_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
}

// RenderJSON renders the JSON export: the page, its blocks, its products and the design tokens
// (as stored: the document is data, not markup).
func RenderJSON(c Content) ([]byte, error) {
	p := c.Page
	blocks := p.Blocks
	if blocks == nil {
		blocks = []block.Block{}
	}
	products := c.Products
	if products == nil {
		products = []page.PublicProduct{}
	}
	skus := GridSKUs(p)
	doc := jsonDoc{
		Format: "cohort.page-export/v1", ExportedAt: c.At.UTC(),
		Page: jsonPage{ID: p.ID, Slug: p.Slug, Title: p.Title, Published: p.Published, IntroCopy: p.IntroCopy,
			ProductSKUs: skus, Version: p.Version, GeneratedAt: p.GeneratedAt, UpdatedAt: p.UpdatedAt},
		Blocks: blocks, Products: products, Design: c.Tokens, Tracking: c.Tracking,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render json: %w", err)
	}
	return append(b, '\n'), nil
}

const zipReadme = `Cohort page export
==================

page.json   the page, its blocks, its products and the design tokens
page.html   a self-contained HTML5 document: open it in a browser or upload it as is
Page.tsx    a React component (it imports nothing but React): drop it into a React app and
            render its default export, <CohortPage />

Both page.html and Page.tsx load the Cohort client library from your Cohort API and record a
page view with your public (pk_) key, so visits (and visits referred by AI assistants) show up
in Cohort from the first one. A view is recorded as the visitor's anonymous id, which the library
keeps in the browser (localStorage and a first-party cookie on your site's domain); when the
visitor signs up or logs in on a page of the same site, call identify({ userId }) with the
client library there, and the views made before count for that user. Remove the snippet (the last <script> of page.html,
useCohortPageView in Page.tsx) to stop tracking.
`

// RenderZip renders the zip export: page.json, page.html, Page.tsx and a README.
func RenderZip(c Content) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	at := c.At
	if at.IsZero() {
		at = time.Unix(0, 0)
	}
	files := []struct {
		name   string
		render func(Content) ([]byte, error)
	}{
		{"README.md", func(Content) ([]byte, error) { return []byte(zipReadme), nil }},
		{"page.json", RenderJSON},
		{"page.html", RenderHTML},
		{"Page.tsx", RenderTSX},
	}
	for _, f := range files {
		body, err := f.render(c)
		if err != nil {
			return nil, err
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: at.UTC()})
		if err != nil {
			return nil, fmt.Errorf("render zip: %w", err)
		}
		if _, err := w.Write(body); err != nil {
			return nil, fmt.Errorf("render zip: %w", err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("render zip: %w", err)
	}
	return buf.Bytes(), nil
}

// Render renders an export of the format.
func Render(f Format, c Content) ([]byte, error) {
	switch f {
	case JSON:
		return RenderJSON(c)
	case HTML:
		return RenderHTML(c)
	case TSX:
		return RenderTSX(c)
	case Zip:
		return RenderZip(c)
	}
	return nil, fmt.Errorf("render: unknown format %q", f)
}
