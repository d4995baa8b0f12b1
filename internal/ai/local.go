package ai

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/cohort-dev/cohort/internal/errs"
)

// Local is the deterministic in-process provider used by `cohort dev` and tests. It needs no
// network and no model files:
//
//   - Embed: hashed feature vectors (word unigrams, word bigrams and character trigrams with word
//     boundary markers, hashed with FNV-1a into signed buckets, sublinear tf, L2-normalised), so
//     texts that share words and word pieces score higher than unrelated ones.
//   - Chat and ChatStream: none. The local provider has no chat model; they fail with
//     ErrNoChatModel. Each capability that needs one has its own offline path with this provider:
//     page copy (pagegen's template copy), the page builder (pagebuild.Planner, a rule-based chat
//     model for its tool loop) and segment drafts (draft.Rules); fonts are not suggested.
//
// The same input always gives the same output: no randomness, no clock.
type Local struct {
	chatModel      string
	embeddingModel string
	dims           int
}

var _ Provider = (*Local)(nil)

// NewLocal returns the local provider.
func NewLocal(cfg Config) (*Local, error) {
	if cfg.Dimensions < 0 || cfg.Dimensions > maxDimensions {
		return nil, fmt.Errorf("local dimensions %d: want 1..%d", cfg.Dimensions, maxDimensions)
	}
	l := &Local{
		chatModel:      orDefault(cfg.ChatModel, DefaultLocalChatModel),
		embeddingModel: orDefault(cfg.EmbeddingModel, DefaultLocalEmbeddingModel),
		dims:           cfg.Dimensions,
	}
	if l.dims == 0 {
		l.dims = DefaultLocalDimensions
	}
	return l, nil
}

func (l *Local) Name() string           { return ProviderLocal }
func (l *Local) ChatModel() string      { return l.chatModel }
func (l *Local) EmbeddingModel() string { return l.embeddingModel }
func (l *Local) Dimensions() int        { return l.dims }

// ErrNoChatModel is the local provider's answer to a chat call. It matches errs.ErrUnavailable
// (503 if it ever reached a caller), not ErrUnavailable, so nothing retries it.
var ErrNoChatModel error = &kindError{msg: "the local ai provider has no chat model (set COHORT_AI_PROVIDER=openai for one)", kind: errs.ErrUnavailable}

// Chat fails with ErrNoChatModel.
func (l *Local) Chat(context.Context, ChatRequest) (ChatResponse, error) {
	return ChatResponse{}, ErrNoChatModel
}

// ChatStream fails with ErrNoChatModel without calling fn.
func (l *Local) ChatStream(context.Context, ChatRequest, func(StreamEvent) error) (ChatResponse, error) {
	return ChatResponse{}, ErrNoChatModel
}

// Feature weights of the embedding's three feature families.
const (
	weightUnigram = 1.0
	weightBigram  = 0.6
	weightTrigram = 0.35
)

// Embed returns one unit vector per text (a zero vector for text without tokens).
func (l *Local) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	e := embedder{dims: l.dims}
	for i, t := range texts {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("local embed: %w", err)
			}
		}
		out[i] = e.embed(t)
	}
	return out, nil
}

type feature struct {
	h uint64
	w float32
}

// embedder holds scratch buffers reused across the texts of one Embed call.
type embedder struct {
	dims   int
	tokens []string
	feats  []feature
	acc    []float64
	runes  []int
}

func (e *embedder) embed(text string) []float32 {
	vec := make([]float32, e.dims)
	e.tokens = contentTokens(e.tokens[:0], text)
	if len(e.tokens) == 0 {
		return vec
	}
	e.feats = e.feats[:0]
	for i, tok := range e.tokens {
		e.feats = append(e.feats, feature{h: mix64(fnvString(fnvByte(fnvOffset, 'w'), tok)), w: weightUnigram})
		if i+1 < len(e.tokens) {
			h := fnvString(fnvByte(fnvOffset, 'b'), tok)
			h = fnvString(fnvByte(h, ' '), e.tokens[i+1])
			e.feats = append(e.feats, feature{h: mix64(h), w: weightBigram})
		}
		e.feats = e.appendTrigrams(e.feats, tok)
	}
	// Sorting makes both the tf counting and the order of floating-point additions independent of
	// anything but the text.
	slices.SortFunc(e.feats, func(a, b feature) int {
		switch {
		case a.h < b.h:
			return -1
		case a.h > b.h:
			return 1
		}
		return 0
	})
	if cap(e.acc) < e.dims {
		e.acc = make([]float64, e.dims)
	}
	acc := e.acc[:e.dims]
	clear(acc)
	for i := 0; i < len(e.feats); {
		j := i + 1
		for j < len(e.feats) && e.feats[j].h == e.feats[i].h {
			j++
		}
		h := e.feats[i].h
		// The explicit conversions forbid fused multiply-adds, so every platform gets the same bits.
		v := float64(float64(e.feats[i].w) * (1 + math.Log(float64(j-i))))
		if h>>63 == 1 {
			v = -v
		}
		acc[(h&0x7fffffffffffffff)%uint64(e.dims)] += v
		i = j
	}
	var sum float64
	for _, x := range acc {
		sum += float64(x * x)
	}
	if sum == 0 {
		return vec
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range acc {
		vec[i] = float32(x * inv)
	}
	return vec
}

// appendTrigrams adds the character trigrams of "<tok>" ('<' and '>' mark the word boundaries).
func (e *embedder) appendTrigrams(feats []feature, tok string) []feature {
	// e.runes holds the byte offset of each rune of tok, plus len(tok).
	e.runes = e.runes[:0]
	for i := range tok {
		e.runes = append(e.runes, i)
	}
	e.runes = append(e.runes, len(tok))
	n := len(e.runes) - 1 // runes in tok; the padded word has n+2
	piece := func(h uint64, j int) uint64 {
		switch {
		case j == 0:
			return fnvByte(h, '<')
		case j == n+1:
			return fnvByte(h, '>')
		default:
			return fnvString(h, tok[e.runes[j-1]:e.runes[j]])
		}
	}
	for j := 0; j+2 <= n+1; j++ {
		h := fnvByte(fnvOffset, 'c')
		h = piece(h, j)
		h = piece(h, j+1)
		h = piece(h, j+2)
		feats = append(feats, feature{h: mix64(h), w: weightTrigram})
	}
	return feats
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime }

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

// mix64 is the murmur3 finaliser: it spreads FNV-1a's low-entropy high bits, which pick the sign.
func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// tokenize appends the lowercase word tokens of s to dst: maximal runs of letters, digits and
// combining marks (so accented and non-Latin words stay whole). Everything else separates tokens.
func tokenize(dst []string, s string) []string {
	lower := strings.ToLower(s)
	start := -1
	for i, r := range lower {
		word := unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || unicode.IsNumber(r)
		if word && start < 0 {
			start = i
		} else if !word && start >= 0 {
			dst = append(dst, lower[start:i])
			start = -1
		}
	}
	if start >= 0 {
		dst = append(dst, lower[start:])
	}
	return dst
}

// contentTokens is tokenize without stop words, unless the text has nothing else.
func contentTokens(dst []string, s string) []string {
	base := len(dst)
	dst = tokenize(dst, s)
	kept := dst[:base]
	for _, t := range dst[base:] {
		if !stopWords[t] {
			kept = append(kept, t)
		}
	}
	if len(kept) == base {
		return dst // only stop words: keep them all rather than return nothing
	}
	return kept
}

var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true,
	"for": true, "from": true, "has": true, "have": true, "in": true, "into": true, "is": true,
	"it": true, "its": true, "of": true, "on": true, "or": true, "our": true, "s": true, "t": true,
	"that": true, "the": true, "this": true, "these": true, "those": true, "to": true, "was": true,
	"were": true, "will": true, "with": true, "your": true, "you": true, "we": true, "i": true,
	"me": true, "my": true, "some": true, "any": true, "all": true, "can": true, "could": true,
	"would": true, "should": true, "please": true, "do": true, "does": true, "but": true,
	"if": true, "so": true, "than": true, "then": true, "there": true, "their": true, "them": true,
	"they": true, "what": true, "which": true, "who": true, "how": true, "about": true, "up": true,
	"out": true, "not": true, "no": true, "just": true, "also": true, "very": true, "via": true,
}
