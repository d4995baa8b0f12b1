package design

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/safehttp"
)

// Event types of the extract stream.
const (
	EventExtracted = "extracted"
	EventNote      = "note"
	EventDone      = "done"
)

// Event is one message of the extract stream.
type Event struct {
	Type    string `json:"type"`
	Field   string `json:"field,omitempty"`
	Value   string `json:"value,omitempty"`
	Content string `json:"content,omitempty"`
}

// Extraction limits (ExtractorOptions overrides the first three).
const (
	DefaultMaxImageBytes  = 10 << 20 // bytes of the fetched image
	DefaultMaxImagePixels = 25_000_000
	DefaultFetchTimeout   = 15 * time.Second
	DefaultFontTimeout    = 25 * time.Second
	MaxImageURLLength     = 2048
	visionSide            = 512 // longest side of the copy shown to the vision model
)

// FontSuggester suggests a heading and a body font for an image (a vision-capable chat model).
type FontSuggester interface {
	SuggestFonts(ctx context.Context, img image.Image) (heading, body string, err error)
}

// ExtractorOptions configure an Extractor.
type ExtractorOptions struct {
	// HTTP fetches the image; it must be a safehttp client (SSRF-safe). Its body cap is replaced
	// by MaxBytes' check here.
	HTTP *http.Client
	// MaxBytes caps the image (default 10 MB); MaxPixels caps its decoded size (default 25
	// megapixels); FetchTimeout bounds the fetch (default 15 s).
	MaxBytes     int64
	MaxPixels    int
	FetchTimeout time.Duration
	// Fonts suggests fonts; nil: the stream notes that fonts need a vision-capable model.
	Fonts FontSuggester
	// FontTimeout bounds the font suggestion (default 25 s).
	FontTimeout time.Duration
	Logger      *slog.Logger
}

// Extractor suggests a design system from an image: its palette from the pixels (ExtractPalette)
// and its fonts from a vision-capable chat model.
type Extractor struct {
	opts ExtractorOptions
}

// NewExtractor builds an extractor. opts.HTTP is required.
func NewExtractor(opts ExtractorOptions) *Extractor {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxImageBytes
	}
	if opts.MaxPixels <= 0 {
		opts.MaxPixels = DefaultMaxImagePixels
	}
	if opts.FetchTimeout <= 0 {
		opts.FetchTimeout = DefaultFetchTimeout
	}
	if opts.FontTimeout <= 0 {
		opts.FontTimeout = DefaultFontTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Extractor{opts: opts}
}

// Source is a fetched, decoded image, ready to be extracted from.
type Source struct {
	Image  image.Image
	Format string // png, jpeg or gif
}

// Supported image types: the formats Go's standard library decodes (golang.org/x/image, which
// would add WebP, is not a dependency).
var imageTypes = map[string]string{"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif"}

// sniff names the format of data by its magic bytes ("" when none of png, jpeg, gif).
func sniff(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return "png"
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")):
		return "jpeg"
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return "gif"
	case len(data) >= 12 && bytes.Equal(data[:4], []byte("RIFF")) && bytes.Equal(data[8:12], []byte("WEBP")):
		return "webp"
	}
	return ""
}

func refuse(msg string, args ...any) error {
	return &errs.ValidationError{Code: "invalid_image", Msg: "image_url: " + fmt.Sprintf(msg, args...),
		Fields: map[string]string{"image_url": fmt.Sprintf(msg, args...)}}
}

// Fetch checks rawURL, fetches it through the SSRF-safe client and decodes it. Every refusal is
// a *errs.ValidationError on image_url (400): not an absolute http(s) URL, a destination that is
// not allowed (private and loopback addresses unless allowed; the message never names the
// address), an unreachable server or a non-2xx answer, more than MaxBytes, a Content-Type or
// content that is not PNG, JPEG or GIF (both must agree), more than MaxPixels, or an image that
// does not decode.
func (x *Extractor) Fetch(ctx context.Context, rawURL string) (*Source, error) {
	rawURL = strings.TrimSpace(rawURL)
	switch {
	case rawURL == "":
		return nil, errs.Invalid("image_url", "is required")
	case len(rawURL) > MaxImageURLLength:
		return nil, errs.Invalid("image_url", fmt.Sprintf("must be at most %d bytes", MaxImageURLLength))
	}
	u, err := safehttp.CheckURL(rawURL)
	if err != nil {
		return nil, errs.Invalid("image_url", "must be an absolute http or https URL without credentials")
	}
	if x.opts.HTTP == nil {
		return nil, errs.Coded(errs.ErrUnavailable, "unavailable", "image fetching is not configured in this process")
	}
	fctx, cancel := context.WithTimeout(ctx, x.opts.FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(fctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, errs.Invalid("image_url", "must be an absolute http or https URL without credentials")
	}
	req.Header.Set("Accept", "image/png, image/jpeg, image/gif")
	resp, err := x.opts.HTTP.Do(req)
	if err != nil {
		return nil, fetchError(ctx, fctx, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, refuse("the server answered HTTP %d", resp.StatusCode)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	mt = strings.ToLower(mt)
	format, ok := imageTypes[mt]
	if !ok {
		if mt == "image/webp" {
			return nil, refuse("WebP images are not supported; use PNG, JPEG or GIF")
		}
		if mt == "" {
			mt = "none"
		}
		return nil, refuse("is not a PNG, JPEG or GIF image (Content-Type %s)", mt)
	}
	if resp.ContentLength > x.opts.MaxBytes {
		return nil, refuse("the image is larger than %d bytes", x.opts.MaxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, x.opts.MaxBytes+1))
	if err != nil {
		if errors.Is(err, safehttp.ErrResponseTooLarge) {
			return nil, refuse("the image is larger than %d bytes", x.opts.MaxBytes)
		}
		return nil, fetchError(ctx, fctx, err)
	}
	if int64(len(data)) > x.opts.MaxBytes {
		return nil, refuse("the image is larger than %d bytes", x.opts.MaxBytes)
	}
	if got := sniff(data); got != format {
		if got == "" {
			got = "not an image"
		}
		return nil, refuse("the content (%s) does not match its Content-Type %s", got, mt)
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, refuse("the %s image does not decode", format)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width > x.opts.MaxPixels/max(cfg.Height, 1) {
		return nil, refuse("the image is %dx%d; at most %d pixels are accepted", cfg.Width, cfg.Height, x.opts.MaxPixels)
	}
	var img image.Image
	switch format {
	case "png":
		img, err = png.Decode(bytes.NewReader(data))
	case "jpeg":
		img, err = jpeg.Decode(bytes.NewReader(data))
	case "gif":
		img, err = gif.Decode(bytes.NewReader(data))
	}
	if err != nil {
		return nil, refuse("the %s image does not decode", format)
	}
	return &Source{Image: img, Format: format}, nil
}

// fetchError turns a failed fetch into a 400 that names neither the address the host resolved
// to nor the transport's detail (which can carry it). A caller that went away is its own error.
func fetchError(ctx, fctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, safehttp.ErrBlockedRedirect):
		return refuse("it redirects to a redirect target that is not allowed")
	case errors.Is(err, safehttp.ErrBlockedAddress):
		return refuse("this destination is not allowed")
	case errors.Is(err, safehttp.ErrTooManyRedirects):
		return refuse("too many redirects")
	case errors.Is(err, safehttp.ErrBadURL):
		return refuse("redirects to a URL that is not allowed")
	case errors.Is(err, safehttp.ErrResponseTooLarge):
		return refuse("the image is too large")
	case fctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return refuse("the image could not be fetched in time")
	}
	return refuse("the image could not be fetched")
}

// Stream sends the suggestions for src to emit: extracted primary_color, secondary_color,
// background_color and text_color (from the pixels), a note with the palette, then
// heading_font and body_font from the FontSuggester (or a note that fonts need a vision-capable
// model, or why it gave none), and done. An error from emit (the client left) stops it.
func (x *Extractor) Stream(ctx context.Context, src *Source, emit func(Event) error) error {
	pal, ok := ExtractPalette(src.Image)
	if ok {
		events := []Event{{Type: EventExtracted, Field: "primary_color", Value: pal.Primary.Hex()}}
		if pal.HasSecondary {
			events = append(events, Event{Type: EventExtracted, Field: "secondary_color", Value: pal.Secondary.Hex()})
		} else {
			events = append(events, Event{Type: EventNote, Content: "the image has no second color besides the background and the primary; secondary_color is not suggested"})
		}
		events = append(events,
			Event{Type: EventExtracted, Field: "background_color", Value: pal.Background.Hex()},
			Event{Type: EventExtracted, Field: "text_color", Value: pal.Text.Hex()})
		for _, e := range events {
			if err := emit(e); err != nil {
				return err
			}
		}
		parts := make([]string, 0, len(pal.Swatches))
		for _, s := range pal.Swatches {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", s.Color.Hex(), s.Share*100))
		}
		note := fmt.Sprintf("palette: %s; text contrast against the background %.1f:1", strings.Join(parts, ", "), pal.TextContrast)
		if err := emit(Event{Type: EventNote, Content: note}); err != nil {
			return err
		}
	} else if err := emit(Event{Type: EventNote, Content: "the image has no opaque pixels; no colors are suggested"}); err != nil {
		return err
	}

	if err := x.fonts(ctx, src, emit); err != nil {
		return err
	}
	return emit(Event{Type: EventDone})
}

func (x *Extractor) fonts(ctx context.Context, src *Source, emit func(Event) error) error {
	if x.opts.Fonts == nil {
		return emit(Event{Type: EventNote, Content: "fonts need a vision-capable chat model: configure an OpenAI-compatible provider (COHORT_AI_PROVIDER=openai) whose chat model accepts images"})
	}
	fctx, cancel := context.WithTimeout(ctx, x.opts.FontTimeout)
	defer cancel()
	heading, body, err := x.opts.Fonts.SuggestFonts(fctx, src.Image)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		x.opts.Logger.WarnContext(ctx, "design extract: font suggestion failed", "error", err)
		return emit(Event{Type: EventNote, Content: "the vision model suggested no fonts: " + fontFailure(err)})
	}
	for _, f := range []struct{ field, value string }{{"heading_font", heading}, {"body_font", body}} {
		name, msg := NormalizeFont(f.value)
		var e Event
		if msg != "" {
			e = Event{Type: EventNote, Content: fmt.Sprintf("the vision model's %s was not a usable font family name", f.field)}
		} else {
			e = Event{Type: EventExtracted, Field: f.field, Value: name}
		}
		if err := emit(e); err != nil {
			return err
		}
	}
	return nil
}

// fontFailure says why the model gave no fonts without repeating the provider's text.
func fontFailure(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "it did not answer in time"
	case errors.Is(err, ai.ErrRateLimited):
		return "it is rate limited; try again shortly"
	case errors.Is(err, ai.ErrInvalidRequest):
		return "it refused the request (does the configured chat model accept images?)"
	case errors.Is(err, ai.ErrUnauthorized):
		return "the provider refused the service's credentials"
	case errors.Is(err, errInvalidAnswer):
		return "its answer was not the expected JSON"
	}
	return "the provider is unavailable"
}

var errInvalidAnswer = errors.New("invalid font answer")

// AIFonts asks an OpenAI-compatible, vision-capable chat model (through internal/ai) to name the
// fonts an image suggests. The image is sent downscaled (longest side 512 px) as a JPEG data URL.
type AIFonts struct {
	Provider ai.Provider
}

const fontPrompt = `You are a brand designer. Look at the image (a logo, screenshot or mood board) and suggest two web fonts that match its style: one for headings and one for body text. Prefer widely available families (Google Fonts). Answer with a JSON object {"heading_font": "<family name>", "body_font": "<family name>"}: family names only, no fallbacks, quotes inside names or CSS.`

// SuggestFonts implements FontSuggester.
func (a AIFonts) SuggestFonts(ctx context.Context, img image.Image) (string, string, error) {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, downscale(img, visionSide), &jpeg.Options{Quality: 85}); err != nil {
		return "", "", fmt.Errorf("encode image: %w", err)
	}
	dataURL := "data:image/jpeg;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
	resp, err := a.Provider.Chat(ctx, ai.ChatRequest{
		Messages:  []ai.Message{{Role: ai.RoleUser, Content: fontPrompt, ImageURLs: []string{dataURL}}},
		JSONMode:  true,
		MaxTokens: 200,
	})
	if err != nil {
		return "", "", err
	}
	var out struct {
		Heading string `json:"heading_font"`
		Body    string `json:"body_font"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(resp.Content)), &out); err != nil {
		return "", "", fmt.Errorf("%w: %v", errInvalidAnswer, err)
	}
	return out.Heading, out.Body, nil
}

// downscale returns img scaled (nearest neighbour) so its longest side is at most side pixels,
// on an opaque white background.
func downscale(img image.Image, side int) image.Image {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	scale := 1.0
	if w > side || h > side {
		scale = float64(side) / float64(max(w, h))
	}
	nw, nh := max(1, int(float64(w)*scale)), max(1, int(float64(h)*scale))
	scaled := image.NewRGBA(image.Rect(0, 0, nw, nh))
	for y := range nh {
		sy := b.Min.Y + y*h/nh
		for x := range nw {
			sx := b.Min.X + x*w/nw
			scaled.Set(x, y, img.At(sx, sy))
		}
	}
	out := image.NewRGBA(scaled.Bounds())
	draw.Draw(out, out.Bounds(), image.White, image.Point{}, draw.Src)
	draw.Draw(out, out.Bounds(), scaled, image.Point{}, draw.Over)
	return out
}
