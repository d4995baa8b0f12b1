package page

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCrawler(t *testing.T) {
	for _, tc := range []struct {
		ua, want string
	}{
		{"GPTBot/1.1", "GPTBot"},
		{"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.1; +https://openai.com/gptbot)", "GPTBot"},
		{"gptbot", "GPTBot"},
		{"NotGPTBotX", ""},
		{"GPTBotX/1.0", ""},
		{"XGPTBot/1.0", ""},
		{"Mozilla/5.0 (compatible; ClaudeBot/1.0; +claudebot@anthropic.com)", "ClaudeBot"},
		{"Claude-User/1.0", "Claude-User"},
		{"Claude-SearchBot", "Claude-SearchBot"},
		{"Mozilla/5.0 (compatible; OAI-SearchBot/1.0; +https://openai.com/searchbot)", "OAI-SearchBot"},
		{"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; ChatGPT-User/1.0; +https://openai.com/bot", "ChatGPT-User"},
		{"Mozilla/5.0 (compatible; PerplexityBot/1.0; +https://perplexity.ai/perplexitybot)", "PerplexityBot"},
		{"Perplexity-User/1.0", "Perplexity-User"},
		{"CCBot/2.0 (https://commoncrawl.org/faq/)", "CCBot"},
		{"Mozilla/5.0 (Linux; Android 5.0) AppleWebKit/537.36 (KHTML, like Gecko) Mobile Safari/537.36 (compatible; Bytespider; spider-feedback@bytedance.com)", "Bytespider"},
		{"meta-externalagent/1.1 (+https://developers.facebook.com/docs/sharing/webmasters/crawler)", "meta-externalagent"},
		{"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Amazonbot/0.1; +https://developer.amazon.com/support/amazonbot)", "Amazonbot"},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)", "Applebot"},
		{"DuckAssistBot/1.0; (+http://duckduckgo.com/duckassistbot.html)", "DuckAssistBot"},
		{"MistralAI-User/1.0", "MistralAI-User"},
		{"anthropic-ai", "anthropic-ai"},
		{"cohere-ai/1.0", "cohere-ai"},
		{"Applebot-Extended", "Applebot-Extended"},
		{"meta-externalfetcher/1.1 (+https://developers.facebook.com/docs/sharing/webmasters/crawler)", "meta-externalfetcher"},
		{"Mozilla/5.0 (compatible; FacebookBot/1.0; +https://developers.facebook.com/docs/sharing/webmasters/facebookbot/)", "FacebookBot"},
		{"Google-CloudVertexBot", "Google-CloudVertexBot"},
		{"Mozilla/5.0 (compatible; Gemini-Deep-Research; +https://gemini.google/overview/deep-research/)", "Gemini-Deep-Research"},
		{"Mozilla/5.0 (compatible; YouBot (+http://www.you.com))", "YouBot"},
		{"Mozilla/5.0 (compatible) AI2Bot (+https://www.allenai.org/crawler)", "AI2Bot"},
		{"Mozilla/5.0 (compatible; Diffbot/3.0; +http://www.diffbot.com)", "Diffbot"},
		{"cohere-training-data-crawler", "cohere-training-data-crawler"},
		{"Mozilla/5.0 (compatible;PetalBot;+https://webmaster.petalsearch.com/site/petalbot)", ""}, // a search crawler
		{"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", ""},
		{"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", ""},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36", ""},
		{"Googlebot/2.1", ""},
		{"", ""},
		{strings.Repeat("x", 5000) + " GPTBot", ""}, // only the first KiB is read
		{"Ünïcödé GPTBot/1.0", "GPTBot"},
	} {
		if got := Crawler(tc.ua); got != tc.want {
			t.Errorf("Crawler(%.80q) = %q, want %q", tc.ua, got, tc.want)
		}
	}
}

func TestDeriveSlug(t *testing.T) {
	for _, tc := range []struct {
		text, want string
	}{
		{"linen summer dresses under 80 euros", "linen-summer-dresses-under-80-euros"},
		{"  Linen   Summer -- Dresses!  ", "linen-summer-dresses"},
		{"Sommerkleider für Strand & Stadt", "sommerkleider-fur-strand-stadt"},
		{"Crème brûlée Æsthetic ß", "creme-brulee-aesthetic-ss"},
		{"日本語", "page"},
		{"!!!", "page"},
		{"a", "a"},
		{strings.Repeat("abc ", 40), strings.TrimSuffix(strings.Repeat("abc-", 20), "-")},
		{strings.Repeat("x", 200), strings.Repeat("x", 80)},
	} {
		got := deriveSlug(tc.text)
		if got != tc.want {
			t.Errorf("deriveSlug(%q) = %q, want %q", tc.text, got, tc.want)
		}
		if msg := checkSlug(got); msg != "" {
			t.Errorf("deriveSlug(%q) = %q, which is not a valid slug: %s", tc.text, got, msg)
		}
	}
}

func TestUniqueSlug(t *testing.T) {
	taken := map[string]bool{"dresses": true, "dresses-2": true}
	if got := uniqueSlug("dresses", taken); got != "dresses-3" {
		t.Errorf("got %q", got)
	}
	if got := uniqueSlug("coats", taken); got != "coats" {
		t.Errorf("got %q", got)
	}
	long := strings.Repeat("y", 80)
	got := uniqueSlug(long, map[string]bool{long: true})
	if got != strings.Repeat("y", 78)+"-2" || checkSlug(got) != "" {
		t.Errorf("got %q", got)
	}
	if !strings.HasPrefix(got, slugStem(long)) {
		t.Errorf("%q does not start with the stem %q", got, slugStem(long))
	}
}

func TestCheckSlug(t *testing.T) {
	for _, s := range []string{"", "A", "a_b", "a--b", "-a", "a-", "a b", "ä", strings.Repeat("a", 81)} {
		if checkSlug(s) == "" {
			t.Errorf("checkSlug(%q) accepted it", s)
		}
	}
	for _, s := range []string{"a", "a-b", "summer-2025", strings.Repeat("a", 80)} {
		if msg := checkSlug(s); msg != "" {
			t.Errorf("checkSlug(%q): %s", s, msg)
		}
	}
}

// TestPublicCacheBytesBound: the public cache counts the bytes of its entries and of the
// renderings kept with them, and an insertion past its byte bound drops the expired entries
// first, then every entry, so what it holds stays within the bound.
func TestPublicCacheBytesBound(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	c := newPublicCache(time.Minute)
	c.max = 10_000
	entry := func(n int) func() (*publicEntry, error) {
		return func() (*publicEntry, error) { return &publicEntry{found: true, rest: make([]byte, n)}, nil }
	}
	// baseSize is 2*len(rest)+256: 2,256 bytes each.
	for i := range 4 {
		if _, err := c.get(fmt.Sprint("a", i), now, entry(1000)); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.stats(); st.Entries != 4 || st.Bytes != 4*2256 {
		t.Fatalf("four entries: %+v, want 4 entries of 2,256 bytes", st)
	}
	e, _ := c.get("a0", now, entry(1000)) // a hit: nothing added
	c.grow(e, 500)                        // a rendering kept with a cached entry counts
	if st := c.stats(); st.Bytes != 4*2256+500 {
		t.Fatalf("after a rendering: %+v", st)
	}
	// A fifth entry would pass the bound; none has expired, so every entry goes.
	if _, err := c.get("b", now, entry(1000)); err != nil {
		t.Fatal(err)
	}
	if st := c.stats(); st.Entries != 1 || st.Bytes != 2256 {
		t.Fatalf("past the bound: %+v, want only the new entry", st)
	}
	c.grow(e, 500) // e left the cache: its rendering no longer counts
	if st := c.stats(); st.Bytes != 2256 {
		t.Fatalf("a dropped entry's rendering counted: %+v", st)
	}
	// Expired entries go first: three fresh ones stay when the old one is dropped.
	later := now.Add(2 * time.Minute)
	for i := range 3 {
		if _, err := c.get(fmt.Sprint("c", i), later, entry(1000)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.get("d", later, entry(1000)); err != nil {
		t.Fatal(err)
	}
	if st := c.stats(); st.Entries != 4 || st.Bytes != 4*2256 {
		t.Fatalf("expired entry dropped first: %+v, want the four fresh entries", st)
	}
	// Replacing a key's entry does not count it twice.
	c.invalidate()
	if _, err := c.get("d", later, entry(1000)); err != nil {
		t.Fatal(err)
	}
	if st := c.stats(); st.Bytes > c.max {
		t.Fatalf("over the bound: %+v", st)
	}
}
