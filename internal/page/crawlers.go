package page

// Crawlers are the User-Agent tokens of known AI crawlers and assistants. A public read whose
// User-Agent contains one of them as a whole word (case-insensitively; letters, digits, "_" and
// "-" make up words, so "GPTBot/1.1" matches GPTBot and "NotGPTBotX" does not) sets the page's
// last_ai_crawl_at and counts under that name in its ai_crawls (page_ai_crawls keeps a row per
// page and crawler name, so a token added here needs no migration; one removed keeps its rows).
// Google-Extended and Applebot-Extended are robots.txt tokens their crawlers do not send; they
// count when a User-Agent names them. Add a token here to track it.
var Crawlers = []string{
	"GPTBot",
	"OAI-SearchBot",
	"ChatGPT-User",
	"ClaudeBot",
	"Claude-User",
	"Claude-SearchBot",
	"PerplexityBot",
	"Perplexity-User",
	"CCBot",
	"Bytespider",
	"meta-externalagent",
	"Amazonbot",
	"Applebot",
	"DuckAssistBot",
	"MistralAI-User",
	"Google-Extended",
	"anthropic-ai",
	"cohere-ai",
	"Applebot-Extended",
	"meta-externalfetcher",
	"FacebookBot",
	"Google-CloudVertexBot",
	"Gemini-Deep-Research",
	"YouBot",
	"AI2Bot",
	"Diffbot",
	"cohere-training-data-crawler",
}

// crawlerMatcher finds the first known crawler token in a User-Agent.
type crawlerMatcher struct {
	names  []string
	tokens [][]byte // lower-case ASCII
}

func newCrawlerMatcher(names []string) *crawlerMatcher {
	m := &crawlerMatcher{names: names, tokens: make([][]byte, len(names))}
	for i, n := range names {
		m.tokens[i] = []byte(lowerASCII(n))
	}
	return m
}

func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// match returns the index in names of the crawler the User-Agent names, or -1.
func (m *crawlerMatcher) match(ua string) int {
	if len(ua) == 0 {
		return -1
	}
	if len(ua) > 1024 {
		ua = ua[:1024]
	}
	var buf [1024]byte
	lower := buf[:len(ua)]
	for i := 0; i < len(ua); i++ {
		c := ua[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	for i, tok := range m.tokens {
		if containsWord(lower, tok) {
			return i
		}
	}
	return -1
}

// containsWord reports whether tok occurs in s with no word byte right before or after it.
func containsWord(s, tok []byte) bool {
	n := len(tok)
	for i := 0; i+n <= len(s); i++ {
		if s[i] != tok[0] || string(s[i:i+n]) != string(tok) {
			continue
		}
		if (i == 0 || !isWordByte(s[i-1])) && (i+n == len(s) || !isWordByte(s[i+n])) {
			return true
		}
	}
	return false
}

// Crawler returns the known AI crawler a User-Agent names ("" for none), by the rule of Crawlers.
func Crawler(userAgent string) string {
	m := newCrawlerMatcher(Crawlers)
	if i := m.match(userAgent); i >= 0 {
		return m.names[i]
	}
	return ""
}
