// Package ai is the LLM and embedding provider family: one Provider interface, a factory (New) and
// two adapters: OpenAI (any OpenAI-compatible HTTP API through sashabaranov/go-openai) and Local,
// a deterministic in-process provider (hashed n-gram embeddings, no chat model) used by `cohort
// dev` and tests. Test code scripts a chat model with package aitest.
//
// Errors that callers map to HTTP match one of the sentinels with errors.Is: ErrUnavailable (503),
// ErrRateLimited (429, see ProviderError.RetryAfter), ErrInvalidRequest (400) and ErrUnauthorized
// (the provider rejected our credentials: a server-side configuration problem, not the caller's).
package ai

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
)

// Provider names accepted by Config.Provider.
const (
	ProviderLocal  = "local"
	ProviderOpenAI = "openai"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Finish reasons reported in ChatResponse.FinishReason.
const (
	FinishStop      = "stop"
	FinishLength    = "length"
	FinishToolCalls = "tool_calls"
)

// Defaults applied by the constructors.
const (
	DefaultOpenAIBaseURL        = "https://api.openai.com/v1"
	DefaultOpenAIChatModel      = "gpt-4o-mini"
	DefaultOpenAIEmbeddingModel = "text-embedding-3-small"
	DefaultLocalChatModel       = "local-template"
	DefaultLocalEmbeddingModel  = "local-ngram-v1"
	DefaultLocalDimensions      = 384
	DefaultEmbedBatchSize       = 256
	DefaultTimeout              = 30 * time.Second

	maxDimensions = 1 << 16
)

// Provider is an LLM + embedding backend. Implementations are safe for concurrent use.
type Provider interface {
	Name() string           // "local" or "openai"
	ChatModel() string      // model used by Chat and ChatStream
	EmbeddingModel() string // recorded with stored embeddings
	Dimensions() int        // embedding vector length
	// Embed returns one L2-normalised vector per text, in order. Implementations batch internally
	// (openai: at most Config.EmbedBatchSize texts per HTTP call, default 256). An empty or
	// whitespace-only text yields a zero vector.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Chat runs one chat completion, possibly returning tool calls instead of / in addition to content.
	Chat(ctx context.Context, req ChatRequest) (ChatResponse, error)
	// ChatStream streams content deltas and (complete) tool calls to fn; returns the final assembled
	// response. An error returned by fn stops the stream and is returned (wrapped).
	ChatStream(ctx context.Context, req ChatRequest, fn func(StreamEvent) error) (ChatResponse, error)
}

// Replay streams a complete response to fn as a streaming provider would: its content as one
// delta, then each tool call. Providers that answer whole (the offline planner, test scripts) use
// it for ChatStream. A nil fn receives nothing.
func Replay(resp ChatResponse, fn func(StreamEvent) error) error {
	if fn == nil {
		return nil
	}
	if resp.Content != "" {
		if err := fn(StreamEvent{ContentDelta: resp.Content}); err != nil {
			return err
		}
	}
	for i := range resp.ToolCalls {
		if err := fn(StreamEvent{ToolCall: &resp.ToolCalls[i]}); err != nil {
			return err
		}
	}
	return nil
}

// Message is one turn of a conversation.
type Message struct {
	Role       string     // system | user | assistant | tool
	Content    string     // text; for role tool, the tool's result (usually JSON)
	ToolCalls  []ToolCall // assistant turns that called tools
	ToolCallID string     // role tool: the ToolCall.ID this message answers
	Name       string     // optional participant name; for role tool, the tool's name
	// ImageURLs are images a user turn shows the model (https or data: URLs), sent by the openai
	// provider as image_url content parts beside Content; they need a vision-capable chat model.
	ImageURLs []string
}

// Tool is a function the model may call.
type Tool struct {
	Name        string         // ^[a-zA-Z0-9_-]{1,64}$
	Description string         // what the tool does, used by the model to choose it
	Parameters  map[string]any // JSON schema of the arguments object; nil means no arguments
}

// ToolCall is one call of a Tool requested by the model.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // a JSON object
}

// ChatRequest is the input of one chat completion.
type ChatRequest struct {
	Messages    []Message
	Tools       []Tool
	Temperature float32 // 0 means the provider's default; valid range [0, 2]
	MaxTokens   int     // 0 means no limit beyond the model's
	JSONMode    bool    // the content must be a single JSON object
}

// ChatResponse is the assembled result of one chat completion.
type ChatResponse struct {
	Content      string
	ToolCalls    []ToolCall
	FinishReason string // stop | length | tool_calls | content_filter
	Usage        Usage
}

// Usage counts tokens as the provider reports them.
type Usage struct {
	PromptTokens, CompletionTokens int
}

// StreamEvent is either a content delta or one complete tool call.
type StreamEvent struct {
	ContentDelta string
	ToolCall     *ToolCall
}

// Config selects and configures a provider. It is filled once from the environment by main.
type Config struct {
	Provider                  string       // "local" (default) or "openai"
	BaseURL, APIKey           string       // openai-compatible base URL, e.g. https://api.openai.com/v1
	ChatModel, EmbeddingModel string       // defaults gpt-4o-mini / text-embedding-3-small (openai), local-template / local-ngram-v1 (local)
	Dimensions                int          // local default 384; openai: sent as `dimensions` when > 0
	EmbedBatchSize            int          // texts per embeddings call, default 256
	HTTPClient                *http.Client // optional
	// Timeout (OPENAI_TIMEOUT, default 30 s) bounds each call: a whole embeddings or chat call,
	// and a streamed chat only while it is silent (the deadline moves with every chunk).
	Timeout time.Duration
	// BreakerFailures consecutive unavailable chat calls open the chat circuit breaker (default
	// 5) for BreakerCooldown (default 30 s); Now is its clock (default time.Now).
	BreakerFailures int
	BreakerCooldown time.Duration
	Now             func() time.Time
	Metrics         *Metrics // optional: the openai provider records its calls there
}

// New builds the provider named by cfg.Provider.
func New(cfg Config) (Provider, error) {
	switch name := strings.ToLower(strings.TrimSpace(cfg.Provider)); name {
	case "", ProviderLocal:
		p, err := NewLocal(cfg)
		if err != nil {
			return nil, err
		}
		return p, nil
	case ProviderOpenAI:
		p, err := NewOpenAI(cfg)
		if err != nil {
			return nil, err
		}
		return p, nil
	default:
		return nil, fmt.Errorf("unknown ai provider %q (want %q or %q)", cfg.Provider, ProviderLocal, ProviderOpenAI)
	}
}

// kindError is a sentinel that also matches the project-wide error kind it corresponds to, so the
// API's one error mapper can handle it either way.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }

func (e *kindError) Is(target error) bool { return e.kind != nil && target == e.kind }

// Sentinel errors. Match them with errors.Is.
var (
	// ErrUnavailable: the provider could not be reached, timed out, or failed on its side (5xx).
	// It also matches errs.ErrUnavailable.
	ErrUnavailable error = &kindError{msg: "ai provider unavailable", kind: errs.ErrUnavailable}
	// ErrRateLimited: the provider said 429; ProviderError.RetryAfter carries its hint when sent.
	ErrRateLimited = errors.New("ai provider rate limited")
	// ErrInvalidRequest: the request was rejected as malformed (400, 404, 422, ...) or failed
	// validation before being sent. It also matches errs.ErrInvalid.
	ErrInvalidRequest error = &kindError{msg: "invalid ai request", kind: errs.ErrInvalid}
	// ErrUnauthorized: the provider rejected our credentials (401/403). This is a server
	// configuration problem (bad or missing API key), not the API caller's credentials.
	ErrUnauthorized = errors.New("ai provider rejected credentials")
)

// ProviderError describes a failed provider call. It matches its Kind (one of the sentinels) and
// its underlying cause with errors.Is. Its text never contains the API key.
type ProviderError struct {
	Provider   string        // "openai"
	Op         string        // "embed", "chat", "chat stream"
	Kind       error         // ErrUnavailable, ErrRateLimited, ErrInvalidRequest or ErrUnauthorized
	StatusCode int           // HTTP status of the provider's answer, 0 when there was none
	Message    string        // the provider's own message, when it sent one
	RetryAfter time.Duration // the provider's Retry-After hint on 429, 0 when absent
	cause      error
}

func (e *ProviderError) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider)
	b.WriteString(" ")
	b.WriteString(e.Op)
	b.WriteString(": ")
	b.WriteString(e.Kind.Error())
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, " (http %d)", e.StatusCode)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Unwrap exposes the kind and the cause to errors.Is / errors.As.
func (e *ProviderError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.cause}
}

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// validateChatRequest applies the rules an OpenAI-compatible server enforces, so both providers
// reject the same requests with ErrInvalidRequest.
func validateChatRequest(req ChatRequest) error {
	if len(req.Messages) == 0 {
		return invalidf("messages: at least one message is required")
	}
	if req.Temperature < 0 || req.Temperature > 2 || math.IsNaN(float64(req.Temperature)) {
		return invalidf("temperature: %v is outside [0, 2]", req.Temperature)
	}
	if req.MaxTokens < 0 {
		return invalidf("max tokens: %d is negative", req.MaxTokens)
	}
	seenTools := make(map[string]bool, len(req.Tools))
	for i, t := range req.Tools {
		if !toolNameRE.MatchString(t.Name) {
			return invalidf("tools[%d].name: %q must match ^[a-zA-Z0-9_-]{1,64}$", i, t.Name)
		}
		if seenTools[t.Name] {
			return invalidf("tools[%d].name: %q is declared twice", i, t.Name)
		}
		seenTools[t.Name] = true
		if t.Parameters != nil {
			if typ, ok := t.Parameters["type"]; ok && typ != "object" {
				return invalidf("tools[%d].parameters: type must be \"object\"", i)
			}
		}
	}
	callIDs := map[string]bool{}
	for i, m := range req.Messages {
		switch m.Role {
		case RoleSystem, RoleUser:
			if strings.TrimSpace(m.Content) == "" {
				return invalidf("messages[%d]: a %s message needs content", i, m.Role)
			}
		case RoleAssistant:
			for j, tc := range m.ToolCalls {
				if tc.ID == "" || tc.Name == "" {
					return invalidf("messages[%d].tool_calls[%d]: id and name are required", i, j)
				}
				callIDs[tc.ID] = true
			}
		case RoleTool:
			if m.ToolCallID == "" {
				return invalidf("messages[%d]: a tool message needs tool_call_id", i)
			}
			if !callIDs[m.ToolCallID] {
				return invalidf("messages[%d]: tool_call_id %q does not answer an earlier assistant tool call", i, m.ToolCallID)
			}
		default:
			return invalidf("messages[%d].role: %q is not one of system, user, assistant, tool", i, m.Role)
		}
		if m.Role != RoleAssistant && len(m.ToolCalls) > 0 {
			return invalidf("messages[%d]: only assistant messages carry tool calls", i)
		}
	}
	return nil
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
}

// Cosine returns the cosine similarity of a and b (0 when either is a zero vector or the lengths
// differ). For the unit vectors Embed returns it equals the dot product.
func Cosine(a, b []float32) float32 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return float32(dot / (math.Sqrt(na) * math.Sqrt(nb)))
}

// normalize scales v to unit L2 length in place; zero, NaN or infinite vectors become all zeros.
func normalize(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 || math.IsNaN(sum) || math.IsInf(sum, 0) {
		for i := range v {
			v[i] = 0
		}
		return v
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
	return v
}
