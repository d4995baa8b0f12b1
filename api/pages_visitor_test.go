package api

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"testing"

	"github.com/cohort-dev/cohort/internal/page"
)

// TestPublicPageVisitorUserAgent: a storefront's server-side read with the tenant's key counts as
// its visitor's User-Agent (X-Cohort-Visitor-User-Agent); without a key, with another tenant's,
// a browser's (pk_) or an invalid key the header is ignored and the read is a public read of the
// request's own User-Agent, answered 200 (never 401).
func TestPublicPageVisitorUserAgent(t *testing.T) {
	e := pagesServer(t, page.Options{})
	f, ts := e.f, e.ts
	q := e.query(t, f.A, `{"text":"storefront"}`)
	p := e.page(t, f.A, fmt.Sprintf(`{"query":%d,"published":true}`, q.ID))
	target := "/api/ai-pages/public/pages/" + f.A.T.Slug + "/" + p.Slug + "/"
	const header = "X-Cohort-Visitor-User-Agent"
	const renderer = "storefront-renderer/2.0 (node)"
	for _, tc := range []struct {
		name    string
		headers http.Header
		want    string // crawler counted ("" none)
	}{
		{"secret key in Authorization", hdr("Authorization", "ApiKey "+f.A.SK, "User-Agent", renderer, header, "Mozilla/5.0 (compatible; GPTBot/1.1; +https://openai.com/gptbot)"), "GPTBot"},
		{"secret key in X-API-Key", hdr("X-API-Key", f.A.SK, "User-Agent", renderer, header, "Mozilla/5.0 (compatible; ClaudeBot/1.0; +claudebot@anthropic.com)"), "ClaudeBot"},
		{"Bearer token", hdr("Authorization", "Bearer "+f.A.Bearer, "User-Agent", renderer, header, "PerplexityBot/1.0"), "PerplexityBot"},
		{"tenant key, a person visits a crawler-named renderer", hdr("Authorization", "ApiKey "+f.A.SK, "User-Agent", "GPTBot/1.1", header, "Mozilla/5.0 (Windows NT 10.0) Chrome/126.0"), ""},
		{"no key", hdr("User-Agent", renderer, header, "GPTBot/1.1"), ""},
		{"no key, the request's own crawler counts", hdr("User-Agent", "ClaudeBot/1.0", header, "Mozilla/5.0"), "ClaudeBot"},
		{"another tenant's secret key", hdr("Authorization", "ApiKey "+f.B.SK, "User-Agent", renderer, header, "GPTBot/1.1"), ""},
		{"another tenant's secret key in X-API-Key", hdr("X-API-Key", f.B.SK, "User-Agent", renderer, header, "GPTBot/1.1"), ""},
		{"the tenant's public key", hdr("Authorization", "ApiKey "+f.A.PK, "User-Agent", renderer, header, "GPTBot/1.1"), ""},
		{"the tenant's session token", hdr("Authorization", "Bearer "+f.A.Session, "User-Agent", renderer, header, "GPTBot/1.1"), ""},
		{"invalid key", hdr("Authorization", "ApiKey sk_live_not-a-key", "User-Agent", renderer, header, "GPTBot/1.1"), ""},
		{"malformed Authorization", hdr("Authorization", "Basic eDp5", "User-Agent", renderer, header, "GPTBot/1.1"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := e.svc.GetPage(context.Background(), f.A.T.ID, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			crawls := maps.Clone(before.AICrawls)
			var b publicBody
			ok(t, send(t, ts, http.MethodGet, target, tc.headers, nil), http.StatusOK, &b)
			if b.ViewCount != before.ViewCount+1 {
				t.Fatalf("view_count %d, want %d", b.ViewCount, before.ViewCount+1)
			}
			after, err := e.svc.GetPage(context.Background(), f.A.T.ID, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != "" {
				crawls[tc.want]++
			}
			if !maps.Equal(after.AICrawls, crawls) {
				t.Fatalf("ai_crawls %v, want %v", after.AICrawls, crawls)
			}
		})
	}
}
