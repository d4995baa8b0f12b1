package design

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/safehttp"
)

// Colors of the test image: a white page with a large blue panel, a smaller orange button and a
// dark grey block of "text".
var (
	white  = color.NRGBA{0xff, 0xff, 0xff, 0xff}
	blue   = color.NRGBA{0x1e, 0x40, 0xaf, 0xff}
	orange = color.NRGBA{0xf9, 0x73, 0x16, 0xff}
	dark   = color.NRGBA{0x22, 0x22, 0x22, 0xff}
)

func fill(img *image.NRGBA, r image.Rectangle, c color.NRGBA) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetNRGBA(x, y, c)
		}
	}
}

// brandImage is 300x200: white background (58%), blue panel (29%), orange (8%), dark grey (5%).
func brandImage() *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, 300, 200))
	fill(img, img.Bounds(), white)
	fill(img, image.Rect(40, 30, 260, 110), blue)
	fill(img, image.Rect(40, 130, 160, 170), orange)
	fill(img, image.Rect(180, 130, 260, 170), dark)
	return img
}

func encodePNG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeJPEG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// file is what the image server answers for a path.
type file struct {
	ctype string
	body  []byte
}

func imageServer(t *testing.T, files map[string]file) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", f.ctype)
		_, _ = w.Write(f.body)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func extractor(allowPrivate bool, fonts FontSuggester) *Extractor {
	return NewExtractor(ExtractorOptions{
		HTTP:     safehttp.NewClient(safehttp.Options{AllowPrivate: allowPrivate, Timeout: 10 * time.Second}),
		MaxBytes: 1 << 20,
		Fonts:    fonts,
	})
}

func collect(t *testing.T, x *Extractor, src *Source) []Event {
	t.Helper()
	var evs []Event
	if err := x.Stream(context.Background(), src, func(e Event) error { evs = append(evs, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 || evs[len(evs)-1].Type != EventDone {
		t.Fatalf("stream does not end with done: %+v", evs)
	}
	return evs
}

func extracted(evs []Event) map[string]string {
	out := map[string]string{}
	for _, e := range evs {
		if e.Type == EventExtracted {
			out[e.Field] = e.Value
		}
	}
	return out
}

func hexOf(c color.NRGBA) string { return Color{c.R, c.G, c.B}.Hex() }

// near reports whether two hex colors are within tol on every channel.
func near(a, b string, tol int) bool {
	ca, ok1 := ParseHex(a)
	cb, ok2 := ParseHex(b)
	if !ok1 || !ok2 {
		return false
	}
	d := func(x, y uint8) int {
		if x > y {
			return int(x - y)
		}
		return int(y - x)
	}
	return d(ca.R, cb.R) <= tol && d(ca.G, cb.G) <= tol && d(ca.B, cb.B) <= tol
}

func TestExtractColorsFromPNGAndJPEG(t *testing.T) {
	img := brandImage()
	ts := imageServer(t, map[string]file{
		"/brand.png": {"image/png", encodePNG(t, img)},
		"/brand.jpg": {"image/jpeg; charset=binary", encodeJPEG(t, img)},
	})
	x := extractor(true, nil)
	want := map[string]string{
		"primary_color":    hexOf(blue),
		"secondary_color":  hexOf(orange),
		"background_color": hexOf(white),
		"text_color":       hexOf(dark), // the palette's dark grey: 15.9:1 on white
	}
	for _, tc := range []struct {
		path string
		tol  int
	}{{"/brand.png", 0}, {"/brand.jpg", 10}} {
		t.Run(tc.path, func(t *testing.T) {
			src, err := x.Fetch(context.Background(), ts.URL+tc.path)
			if err != nil {
				t.Fatal(err)
			}
			evs := collect(t, x, src)
			got := extracted(evs)
			for field, w := range want {
				if !near(got[field], w, tc.tol) {
					t.Errorf("%s = %q, want %s (±%d)", field, got[field], w, tc.tol)
				}
			}
			if _, ok := got["heading_font"]; ok {
				t.Errorf("fonts suggested without a vision model: %+v", evs)
			}
			var noted bool
			for _, e := range evs {
				if e.Type == EventNote && strings.Contains(e.Content, "vision-capable") {
					noted = true
				}
			}
			if !noted {
				t.Errorf("no note that fonts need a vision model: %+v", evs)
			}
			// The first events follow the order of fields in api/openapi.yaml (extractDesignSystem).
			if evs[0].Field != "primary_color" || evs[1].Field != "secondary_color" {
				t.Errorf("order %+v", evs[:2])
			}
		})
	}
}

func TestExtractTextFallsBackToBlackOrWhite(t *testing.T) {
	// A dark navy page with a light-blue and a teal area: no palette color reaches 4.5:1 against
	// navy except... none, so white is chosen.
	img := image.NewNRGBA(image.Rect(0, 0, 120, 120))
	navy := color.NRGBA{0x0b, 0x1f, 0x3a, 0xff}
	fill(img, img.Bounds(), navy)
	fill(img, image.Rect(20, 20, 100, 60), color.NRGBA{0x1d, 0x4e, 0x89, 0xff})
	fill(img, image.Rect(20, 70, 100, 100), color.NRGBA{0x0e, 0x6b, 0x6b, 0xff})
	pal, ok := ExtractPalette(img)
	if !ok {
		t.Fatal("no palette")
	}
	if pal.Background.Hex() != hexOf(navy) {
		t.Errorf("background %s, want %s", pal.Background.Hex(), hexOf(navy))
	}
	if pal.Text.Hex() != "#ffffff" || pal.TextContrast < minTextRatio {
		t.Errorf("text %s (%.2f:1), want #ffffff", pal.Text.Hex(), pal.TextContrast)
	}
}

func TestExtractTransparentLogo(t *testing.T) {
	// A logo on a transparent canvas: transparent pixels are ignored; a single color is the
	// primary, and no secondary is invented.
	img := image.NewNRGBA(image.Rect(0, 0, 64, 64))
	fill(img, image.Rect(16, 16, 48, 48), blue)
	pal, ok := ExtractPalette(img)
	if !ok || pal.Primary.Hex() != hexOf(blue) || pal.HasSecondary {
		t.Fatalf("palette %+v %v", pal, ok)
	}
	if _, ok := ExtractPalette(image.NewNRGBA(image.Rect(0, 0, 8, 8))); ok {
		t.Error("a fully transparent image gave a palette")
	}
}

func TestExtractRefusals(t *testing.T) {
	big := make([]byte, 2<<20) // over the 1 MB cap of the test extractor
	copy(big, encodePNG(t, brandImage()))
	ts := imageServer(t, map[string]file{
		"/page.html":  {"text/html; charset=utf-8", []byte("<!doctype html><title>x</title>")},
		"/huge.png":   {"image/png", big},
		"/liar.png":   {"image/png", []byte("<html>not a png</html>")},
		"/mixed.png":  {"image/png", encodeJPEG(t, brandImage())},
		"/broken.png": {"image/png", []byte("\x89PNG\r\n\x1a\n broken")},
		"/anim.webp":  {"image/webp", []byte("RIFF\x00\x00\x00\x00WEBPVP8 ")},
		"/ok.png":     {"image/png", encodePNG(t, brandImage())},
	})
	x := extractor(true, nil)
	tests := []struct {
		name, url, want string
	}{
		{"empty", "", "required"},
		{"relative", "/brand.png", "absolute http"},
		{"ftp", "ftp://example.com/a.png", "absolute http"},
		{"userinfo", "http://user:pw@example.com/a.png", "absolute http"},
		{"html", ts.URL + "/page.html", "not a PNG, JPEG or GIF"},
		{"huge", ts.URL + "/huge.png", "larger than"},
		{"content is not an image", ts.URL + "/liar.png", "does not match"},
		{"content of another type", ts.URL + "/mixed.png", "does not match"},
		{"corrupt", ts.URL + "/broken.png", "does not decode"},
		{"webp", ts.URL + "/anim.webp", "WebP"},
		{"404", ts.URL + "/missing.png", "HTTP 404"},
		{"too many pixels", "", ""}, // below
	}
	for _, tt := range tests[:len(tests)-1] {
		t.Run(tt.name, func(t *testing.T) {
			_, err := x.Fetch(context.Background(), tt.url)
			var ve *errs.ValidationError
			if !errors.As(err, &ve) || ve.Fields["image_url"] == "" {
				t.Fatalf("error %v, want a 400 on image_url", err)
			}
			if !strings.Contains(ve.Error(), tt.want) {
				t.Errorf("message %q does not say %q", ve.Error(), tt.want)
			}
		})
	}
	t.Run("too many pixels", func(t *testing.T) {
		small := NewExtractor(ExtractorOptions{HTTP: safehttp.NewClient(safehttp.Options{AllowPrivate: true}), MaxPixels: 1000})
		_, err := small.Fetch(context.Background(), ts.URL+"/ok.png")
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "300x200") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("loopback refused when private networks are not allowed", func(t *testing.T) {
		strict := extractor(false, nil)
		for _, u := range []string{ts.URL + "/ok.png", strings.Replace(ts.URL, "127.0.0.1", "localhost", 1) + "/ok.png"} {
			_, err := strict.Fetch(context.Background(), u)
			var ve *errs.ValidationError
			if !errors.As(err, &ve) || !strings.Contains(ve.Error(), "not allowed") {
				t.Fatalf("%s: error %v, want destination not allowed", u, err)
			}
			for _, leak := range []string{"127.0.0.1", "::1", "localhost", "dial"} {
				if strings.Contains(ve.Error(), leak) || strings.Contains(ve.Fields["image_url"], leak) {
					t.Errorf("message %q reveals %q", ve.Error(), leak)
				}
			}
		}
	})
	t.Run("redirect to a refused address names the hop, not the allowed host", func(t *testing.T) {
		moved := httptest.NewServer(http.RedirectHandler("http://169.254.169.254/latest/meta-data/logo.png", http.StatusFound))
		t.Cleanup(moved.Close)
		_, err := x.Fetch(context.Background(), moved.URL+"/logo.png")
		var ve *errs.ValidationError
		if !errors.As(err, &ve) || !strings.Contains(ve.Fields["image_url"], "a redirect target") {
			t.Fatalf("error %v, want a 400 on image_url naming a redirect target", err)
		}
		for _, leak := range []string{"169.254", "127.0.0.1", "this destination"} {
			if strings.Contains(ve.Error(), leak) {
				t.Errorf("message %q says %q", ve.Error(), leak)
			}
		}
	})
}

// fakeVision is an OpenAI-compatible chat endpoint on loopback that answers fonts and records the
// request, so the real provider code (internal/ai) runs.
type fakeVision struct {
	mu     sync.Mutex
	bodies []map[string]any
	answer string
	status int
}

func (f *fakeVision) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.mu.Unlock()
	if f.status != 0 {
		w.WriteHeader(f.status)
		_, _ = w.Write([]byte(`{"error":{"message":"model does not support image input","type":"invalid_request_error"}}`))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	resp := map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": f.answer}}},
		"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
	}
	_ = json.NewEncoder(w).Encode(resp)
}

func visionProvider(t *testing.T, f *fakeVision) ai.Provider {
	t.Helper()
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	p, err := ai.New(ai.Config{Provider: ai.ProviderOpenAI, BaseURL: ts.URL + "/v1", APIKey: "sk-test", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExtractFontsFromVisionModel(t *testing.T) {
	img := brandImage()
	src := &Source{Image: img, Format: "png"}

	t.Run("suggested", func(t *testing.T) {
		f := &fakeVision{answer: `{"heading_font": "Playfair Display", "body_font": "Source Sans 3"}`}
		x := extractor(true, AIFonts{Provider: visionProvider(t, f)})
		got := extracted(collect(t, x, src))
		if got["heading_font"] != "Playfair Display" || got["body_font"] != "Source Sans 3" {
			t.Fatalf("fonts %v", got)
		}
		if len(f.bodies) != 1 {
			t.Fatalf("%d requests", len(f.bodies))
		}
		msgs, _ := f.bodies[0]["messages"].([]any)
		var sawImage, sawText bool
		for _, m := range msgs {
			parts, _ := m.(map[string]any)["content"].([]any)
			for _, p := range parts {
				part := p.(map[string]any)
				switch part["type"] {
				case "image_url":
					u, _ := part["image_url"].(map[string]any)["url"].(string)
					sawImage = strings.HasPrefix(u, "data:image/jpeg;base64,")
				case "text":
					sawText = strings.Contains(part["text"].(string), "heading_font")
				}
			}
		}
		if !sawImage || !sawText {
			t.Errorf("request did not carry the image and prompt as content parts: %v", f.bodies[0])
		}
	})

	t.Run("unusable names become notes", func(t *testing.T) {
		f := &fakeVision{answer: `{"heading_font": "Inter; color: red", "body_font": "Lora"}`}
		x := extractor(true, AIFonts{Provider: visionProvider(t, f)})
		evs := collect(t, x, src)
		got := extracted(evs)
		if _, ok := got["heading_font"]; ok || got["body_font"] != "Lora" {
			t.Fatalf("fonts %v", got)
		}
	})

	t.Run("model refuses images", func(t *testing.T) {
		f := &fakeVision{status: http.StatusBadRequest}
		x := extractor(true, AIFonts{Provider: visionProvider(t, f)})
		evs := collect(t, x, src)
		if _, ok := extracted(evs)["heading_font"]; ok {
			t.Fatal("font from a refusal")
		}
		var note string
		for _, e := range evs {
			if e.Type == EventNote && strings.Contains(e.Content, "vision model") {
				note = e.Content
			}
		}
		if !strings.Contains(note, "accept images") {
			t.Errorf("note %q does not explain the refusal", note)
		}
	})
}

func TestStreamStopsWhenClientLeaves(t *testing.T) {
	x := extractor(true, nil)
	gone := errors.New("client left")
	n := 0
	err := x.Stream(context.Background(), &Source{Image: brandImage()}, func(Event) error { n++; return gone })
	if !errors.Is(err, gone) || n != 1 {
		t.Fatalf("err %v after %d events", err, n)
	}
}
