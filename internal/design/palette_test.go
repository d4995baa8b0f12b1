package design

import (
	"context"
	"image"
	"image/color"
	"testing"
)

// TestExtractBrandPalettes: on brand-like images (encoded as PNG and fetched like a user's upload),
// the primary is the brand's colour, never a near-white or near-black while a saturated colour
// covers a fifth of the image, and text on the background meets WCAG AA.
func TestExtractBrandPalettes(t *testing.T) {
	brandBlue := color.NRGBA{0x1e, 0x5b, 0xd6, 0xff}
	nearBlack := color.NRGBA{0x11, 0x12, 0x14, 0xff}
	red := color.NRGBA{0xe6, 0x39, 0x46, 0xff}
	grey := color.NRGBA{0x33, 0x33, 0x33, 0xff}
	orange := color.NRGBA{0xf9, 0x73, 0x16, 0xff}
	purple := color.NRGBA{0x6d, 0x28, 0xd9, 0xff}

	tests := []struct {
		name                string
		img                 func() *image.NRGBA
		primary, background string
		text                string // "" when any AA colour other than the primary will do
		secondary           string // "" when not asserted
		wantNoSecondary     bool
	}{
		{
			// The image: 64x64, 56% brand blue around a white panel (30%) and a band of
			// near-black text (14%). The blue holds the border, yet it is the brand colour.
			name: "brand blue frame with white panel and dark text",
			img: func() *image.NRGBA {
				img := image.NewNRGBA(image.Rect(0, 0, 64, 64))
				fill(img, img.Bounds(), brandBlue)
				fill(img, image.Rect(8, 20, 56, 46), white)
				fill(img, image.Rect(8, 50, 56, 62), nearBlack)
				return img
			},
			primary: hexOf(brandBlue), background: hexOf(white), text: hexOf(nearBlack), secondary: hexOf(nearBlack),
		},
		{
			name: "logo on white",
			img: func() *image.NRGBA {
				img := image.NewNRGBA(image.Rect(0, 0, 120, 80))
				fill(img, img.Bounds(), white)
				fill(img, image.Rect(10, 10, 40, 40), red)   // the mark, 9%
				fill(img, image.Rect(50, 20, 110, 30), grey) // the word mark, 6%
				return img
			},
			primary: hexOf(red), background: hexOf(white), text: hexOf(grey),
		},
		{
			name: "dark hero with an orange call to action",
			img: func() *image.NRGBA {
				img := image.NewNRGBA(image.Rect(0, 0, 160, 90))
				fill(img, img.Bounds(), nearBlack)
				fill(img, image.Rect(20, 15, 140, 35), white)  // headline, 17%
				fill(img, image.Rect(40, 50, 120, 80), orange) // button, 17%
				return img
			},
			primary: hexOf(orange), background: hexOf(nearBlack), text: hexOf(white),
		},
		{
			name: "two-colour banner",
			img: func() *image.NRGBA {
				img := image.NewNRGBA(image.Rect(0, 0, 200, 50))
				fill(img, img.Bounds(), purple)
				fill(img, image.Rect(120, 0, 200, 50), white) // 40%, on the right edge
				return img
			},
			// The only other colour, purple, reads on white at 7.1:1 (AA), so it is the text too.
			primary: hexOf(purple), background: hexOf(white), text: hexOf(purple), wantNoSecondary: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := imageServer(t, map[string]file{"/brand.png": {"image/png", encodePNG(t, tt.img())}})
			x := extractor(true, nil)
			src, err := x.Fetch(context.Background(), ts.URL+"/brand.png")
			if err != nil {
				t.Fatal(err)
			}
			got := extracted(collect(t, x, src))
			if got["primary_color"] != tt.primary {
				t.Errorf("primary_color %s, want %s", got["primary_color"], tt.primary)
			}
			if got["background_color"] != tt.background {
				t.Errorf("background_color %s, want %s", got["background_color"], tt.background)
			}
			if tt.text != "" && got["text_color"] != tt.text {
				t.Errorf("text_color %s, want %s", got["text_color"], tt.text)
			}
			if tt.secondary != "" && got["secondary_color"] != tt.secondary {
				t.Errorf("secondary_color %s, want %s", got["secondary_color"], tt.secondary)
			}
			if _, ok := got["secondary_color"]; ok && tt.wantNoSecondary {
				t.Errorf("secondary_color %s, want none", got["secondary_color"])
			}
			p, _ := ParseHex(got["primary_color"])
			if p.neutral() {
				t.Errorf("primary %s is a near-white, near-black or grey", p.Hex())
			}
			text, ok1 := ParseHex(got["text_color"])
			bg, ok2 := ParseHex(got["background_color"])
			if !ok1 || !ok2 {
				t.Fatalf("colours %v", got)
			}
			if r := ContrastRatio(text, bg); r < 4.5 {
				t.Errorf("text %s on %s is %.2f:1, below WCAG AA 4.5:1", text.Hex(), bg.Hex(), r)
			}
		})
	}
}
