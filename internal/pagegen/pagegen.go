// Package pagegen writes the copy of a generated page: from the AIQuery's text, the page title
// and the products semantic search found, it produces the page's intro copy and its blocks.
//
// With an OpenAI-compatible provider the chat model writes them: the system prompt carries the
// block registry (internal/block), the answer must be one JSON object {intro_copy, blocks}, and
// it is checked against the registry and against the found products. An invalid answer is asked
// for again with the problems fed back, at most MaxAttempts times in all; an answer that never
// validates is an error, never a page. With the local provider the copy is deterministic
// template copy made from the products' own fields, checked by the same rules.
package pagegen

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/block"
)

// Limits of the generation.
const (
	// MaxAttempts is how many answers the chat model is asked for before invalid output is an
	// error (the first answer and two corrections).
	MaxAttempts = 3
	// MaxProducts is the most found products a page is written from (the page's limit of SKUs).
	MaxProducts = 100
	// MaxIntroCopyLength is the page's limit of intro copy, in characters (page.MaxIntroCopyLength).
	MaxIntroCopyLength = 20000
	// GridColumns is the columns of the product grid the local copy makes.
	GridColumns = 3
	// maxFieldChars bounds a product's string value sent to the model or used in copy.
	maxFieldChars = 300
	// maxDataFields bounds the data fields kept per product.
	maxDataFields = 24
	// maxArrayValues bounds the elements kept of an array field.
	maxArrayValues = 10
)

// ErrInvalidOutput is the error of a generation whose every answer failed validation. It
// matches with errors.Is; its text carries the last answer's problems.
var ErrInvalidOutput = errors.New("the AI provider gave no valid page copy")

// Product is a found product the copy is written from.
type Product struct {
	SKU  string         `json:"sku"`
	Name string         `json:"name"`
	Data map[string]any `json:"data,omitempty"`
}

// Request is what a page is written from.
type Request struct {
	Query    string    // the AIQuery's text
	Title    string    // the page's title (defaults to the query text)
	Products []Product // the found products, best match first
}

// Copy is a generated page's content: intro copy and blocks valid against the registry (with
// ids), and the SKUs of the found products in their order.
type Copy struct {
	IntroCopy   string        `json:"intro_copy"`
	Blocks      []block.Block `json:"blocks"`
	ProductSKUs []string      `json:"product_skus"`
	// Attempts is how many answers the chat model gave (1 for the local copy).
	Attempts int `json:"attempts"`
}

// Generator writes page copy through an AI provider. It is safe for concurrent use.
type Generator struct {
	provider ai.Provider
}

// New returns a generator over provider.
func New(provider ai.Provider) *Generator { return &Generator{provider: provider} }

// Generate writes the copy of one page. The local provider's copy is deterministic template
// copy from the products; any other provider's chat model writes it (see the package comment).
// Errors: ErrInvalidOutput when no answer validated in MaxAttempts; the provider's errors
// (ai.ErrRateLimited, ai.ErrUnavailable, ...) wrapped; a request without products or query is
// errs.ErrInvalid.
func (g *Generator) Generate(ctx context.Context, req Request) (Copy, error) {
	req, err := normalize(req)
	if err != nil {
		return Copy{}, err
	}
	if g.provider == nil || g.provider.Name() == ai.ProviderLocal {
		return localCopy(req)
	}
	return g.chatCopy(ctx, req)
}

// normalize checks a request and trims it to what the copy uses.
func normalize(req Request) (Request, error) {
	req.Query = strings.TrimSpace(req.Query)
	req.Title = strings.TrimSpace(req.Title)
	if req.Title == "" {
		req.Title = req.Query
	}
	if req.Query == "" && req.Title == "" {
		return req, invalidRequest("query", "is required")
	}
	if len(req.Products) == 0 {
		return req, invalidRequest("products", "at least one product is required")
	}
	if len(req.Products) > MaxProducts {
		req.Products = req.Products[:MaxProducts]
	}
	out := make([]Product, 0, len(req.Products))
	seen := make(map[string]bool, len(req.Products))
	for _, p := range req.Products {
		if p.SKU == "" || seen[strings.ToLower(p.SKU)] {
			continue
		}
		seen[strings.ToLower(p.SKU)] = true
		out = append(out, Compact(p))
	}
	if len(out) == 0 {
		return req, invalidRequest("products", "no product has a SKU")
	}
	req.Products = out
	return req, nil
}

// Compact returns p with the data the copy can use: scalar values and arrays of scalars, strings
// cut to a few hundred characters, a bounded number of fields and elements. Search results pass
// through workflow histories in this form.
func Compact(p Product) Product {
	out := Product{SKU: p.SKU, Name: clip(p.Name, maxFieldChars)}
	if len(p.Data) == 0 {
		return out
	}
	keys := sortedKeys(p.Data)
	out.Data = make(map[string]any, min(len(keys), maxDataFields))
	for _, k := range keys {
		if len(out.Data) == maxDataFields {
			break
		}
		if v, ok := compactValue(p.Data[k]); ok {
			out.Data[k] = v
		}
	}
	return out
}

func compactValue(v any) (any, bool) {
	switch t := v.(type) {
	case string:
		if strings.TrimSpace(t) == "" {
			return nil, false
		}
		return clip(t, maxFieldChars), true
	case bool, float64, float32, int, int64, int32:
		return t, true
	case []any:
		var out []any
		for _, e := range t {
			if len(out) == maxArrayValues {
				break
			}
			switch s := e.(type) {
			case string:
				if strings.TrimSpace(s) != "" {
					out = append(out, clip(s, maxFieldChars))
				}
			case bool, float64, int64, int:
				out = append(out, s)
			}
		}
		return out, len(out) > 0
	case []string:
		var out []any
		for _, s := range t {
			if len(out) == maxArrayValues {
				break
			}
			if strings.TrimSpace(s) != "" {
				out = append(out, clip(s, maxFieldChars))
			}
		}
		return out, len(out) > 0
	}
	return nil, false
}

// clip cuts s to at most n characters at a word boundary when there is one, without control
// characters other than line feeds and tabs.
func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || r != '\n' && r != '\t' && unicode.IsControl(r) {
			return -1
		}
		return r
	}, strings.TrimSpace(s))
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)[:n-1]
	cut := string(runes)
	if i := strings.LastIndexAny(cut, " \n\t"); i > len(cut)/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,;:-") + "…"
}

func invalidRequest(field, msg string) error {
	return fmt.Errorf("page copy request: %w", invalidField(field, msg))
}
