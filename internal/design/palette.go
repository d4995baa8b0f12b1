package design

import (
	"fmt"
	"image"
	"math"
	"sort"
	"strconv"
)

// Color is an sRGB color.
type Color struct{ R, G, B uint8 }

// Hex is the color as #rrggbb.
func (c Color) Hex() string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// ParseHex reads #rgb or #rrggbb; ok is false for anything else.
func ParseHex(s string) (Color, bool) {
	s, ok := NormalizeColor(s)
	if !ok {
		return Color{}, false
	}
	if len(s) == 4 { // #rgb -> #rrggbb
		s = string([]byte{'#', s[1], s[1], s[2], s[2], s[3], s[3]})
	}
	n, err := strconv.ParseUint(s[1:], 16, 32)
	if err != nil {
		return Color{}, false
	}
	v := [3]uint8{uint8(n >> 16), uint8(n >> 8), uint8(n)}
	return Color{v[0], v[1], v[2]}, true
}

// channel is the linear value of one sRGB channel (WCAG 2.x relative luminance).
func channel(v uint8) float64 {
	c := float64(v) / 255
	if c <= 0.04045 {
		return c / 12.92
	}
	return math.Pow((c+0.055)/1.055, 2.4)
}

// Luminance is the WCAG relative luminance of c, 0 (black) to 1 (white).
func (c Color) Luminance() float64 {
	return 0.2126*channel(c.R) + 0.7152*channel(c.G) + 0.0722*channel(c.B)
}

// ContrastRatio is the WCAG contrast ratio of two colors, 1 to 21.
func ContrastRatio(a, b Color) float64 {
	la, lb := a.Luminance(), b.Luminance()
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

// chroma is how colorful c is: max - min channel, 0 to 1.
func (c Color) chroma() float64 {
	hi := max(c.R, c.G, c.B)
	lo := min(c.R, c.G, c.B)
	return float64(hi-lo) / 255
}

// neutral reports whether c reads as no colour at all: a near-white, a near-black or a grey. A
// neutral is never a brand's primary while the image has a chromatic colour.
func (c Color) neutral() bool {
	return c.chroma() < neutralChroma || max(c.R, c.G, c.B) <= nearBlackMax || min(c.R, c.G, c.B) >= nearWhiteMin
}

// Swatch is one color of an image's palette and the share of the image's pixels it stands for.
type Swatch struct {
	Color Color
	Share float64 // 0..1 of the opaque sampled pixels
}

// Palette is what Extract finds in an image.
type Palette struct {
	Swatches   []Swatch // most frequent first
	Background Color
	Primary    Color
	Secondary  Color
	// HasSecondary is false when the image has no second color besides the background and the
	// primary.
	HasSecondary bool
	Text         Color
	// TextContrast is the WCAG contrast ratio of Text against Background (at least 4.5 unless
	// even black or white cannot reach it, which cannot happen: one of them always reaches 4.58).
	TextContrast float64
}

// Palette extraction parameters.
const (
	sampleSide   = 96   // the image is sampled on a grid of at most this many cells per side
	maxClusters  = 8    // k-means clusters at most
	seedSpacing  = 48.0 // minimum RGB distance between two seeds
	mergeBelow   = 24.0 // clusters closer than this (RGB distance) are merged
	minSeedShare = 0.005
	kmeansRounds = 20
	minAlpha     = 128 // pixels more transparent than this are ignored
	bgBorderMin  = 0.4 // a cluster holding this share of the border is the background
	minTextRatio = 4.5 // WCAG AA for body text
	// A colour is neutral (see Color.neutral) below this chroma, with every channel at most
	// nearBlackMax, or with every channel at least nearWhiteMin.
	neutralChroma = 0.15
	nearBlackMax  = 40
	nearWhiteMin  = 224
	// A chromatic cluster smaller than this share is an accent or an edge, not a candidate primary.
	minPrimaryShare = 0.02
)

type point struct {
	c      [3]float64
	border bool
}

// sample reads the image on a grid of at most sampleSide x sampleSide cells, taking the pixel at
// the centre of each cell (no blending, so edges do not invent colors). Transparent pixels are
// skipped.
func sample(img image.Image) []point {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if w <= 0 || h <= 0 {
		return nil
	}
	cols, rows := min(w, sampleSide), min(h, sampleSide)
	pts := make([]point, 0, cols*rows)
	for j := range rows {
		y := b.Min.Y + (2*j+1)*h/(2*rows)
		for i := range cols {
			x := b.Min.X + (2*i+1)*w/(2*cols)
			r, g, bb, a := img.At(x, y).RGBA()
			if a>>8 < minAlpha {
				continue
			}
			// Un-premultiply.
			r, g, bb = r*0xffff/a, g*0xffff/a, bb*0xffff/a
			pts = append(pts, point{
				c:      [3]float64{float64(r >> 8), float64(g >> 8), float64(bb >> 8)},
				border: i == 0 || j == 0 || i == cols-1 || j == rows-1,
			})
		}
	}
	return pts
}

func dist2(a, b [3]float64) float64 {
	d0, d1, d2 := a[0]-b[0], a[1]-b[1], a[2]-b[2]
	return d0*d0 + d1*d1 + d2*d2
}

// seeds picks deterministic starting centres: the most populous cells of a 4-bit-per-channel
// histogram, each at least seedSpacing away from the ones already picked.
func seeds(pts []point) [][3]float64 {
	type bin struct {
		n   int
		sum [3]float64
	}
	bins := map[int]*bin{}
	for _, p := range pts {
		k := int(p.c[0])>>4<<8 | int(p.c[1])>>4<<4 | int(p.c[2])>>4
		bn := bins[k]
		if bn == nil {
			bn = &bin{}
			bins[k] = bn
		}
		bn.n++
		for i := range 3 {
			bn.sum[i] += p.c[i]
		}
	}
	keys := make([]int, 0, len(bins))
	for k := range bins {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if bins[keys[i]].n != bins[keys[j]].n {
			return bins[keys[i]].n > bins[keys[j]].n
		}
		return keys[i] < keys[j]
	})
	var out [][3]float64
	minN := max(1, int(minSeedShare*float64(len(pts))))
	for _, k := range keys {
		bn := bins[k]
		if bn.n < minN || len(out) == maxClusters {
			break
		}
		c := [3]float64{bn.sum[0] / float64(bn.n), bn.sum[1] / float64(bn.n), bn.sum[2] / float64(bn.n)}
		far := true
		for _, s := range out {
			if dist2(s, c) < seedSpacing*seedSpacing {
				far = false
				break
			}
		}
		if far {
			out = append(out, c)
		}
	}
	if len(out) == 0 && len(pts) > 0 {
		out = append(out, pts[0].c)
	}
	return out
}

type cluster struct {
	c      [3]float64
	n      int
	border int
}

// kmeans runs Lloyd's algorithm from the seeds and merges clusters that end up close together.
func kmeans(pts []point, centres [][3]float64) []cluster {
	assign := make([]int, len(pts))
	var cl []cluster
	for round := 0; round < kmeansRounds; round++ {
		changed := round == 0
		for i, p := range pts {
			best, bestD := 0, math.Inf(1)
			for k, c := range centres {
				if d := dist2(p.c, c); d < bestD {
					best, bestD = k, d
				}
			}
			if assign[i] != best {
				assign[i] = best
				changed = true
			}
		}
		cl = make([]cluster, len(centres))
		sums := make([][3]float64, len(centres))
		for i, p := range pts {
			k := assign[i]
			cl[k].n++
			if p.border {
				cl[k].border++
			}
			for j := range 3 {
				sums[k][j] += p.c[j]
			}
		}
		for k := range cl {
			if cl[k].n > 0 {
				for j := range 3 {
					centres[k][j] = sums[k][j] / float64(cl[k].n)
				}
			}
			cl[k].c = centres[k]
		}
		if !changed {
			break
		}
	}
	var out []cluster
	for _, c := range cl {
		if c.n > 0 {
			out = append(out, c)
		}
	}
	// Merge near-duplicates, heaviest first.
	sort.SliceStable(out, func(i, j int) bool { return out[i].n > out[j].n })
	var merged []cluster
	for _, c := range out {
		joined := false
		for m := range merged {
			if dist2(merged[m].c, c.c) < mergeBelow*mergeBelow {
				n := float64(merged[m].n + c.n)
				for j := range 3 {
					merged[m].c[j] = (merged[m].c[j]*float64(merged[m].n) + c.c[j]*float64(c.n)) / n
				}
				merged[m].n += c.n
				merged[m].border += c.border
				joined = true
				break
			}
		}
		if !joined {
			merged = append(merged, c)
		}
	}
	sort.SliceStable(merged, func(i, j int) bool { return merged[i].n > merged[j].n })
	return merged
}

func toColor(c [3]float64) Color {
	q := func(v float64) uint8 { return uint8(math.Round(math.Max(0, math.Min(255, v)))) }
	return Color{q(c[0]), q(c[1]), q(c[2])}
}

// ExtractPalette finds an image's palette by k-means clustering of its sampled pixels (seeded
// deterministically, so the same image always gives the same answer) and assigns roles the way a
// user reads a brand image:
//
//   - primary: the most prominent chromatic (not neutral: see Color.neutral) cluster, ranked by
//     share weighted by colourfulness (share x (0.2 + chroma)), so a brand colour beats a large
//     grey area and a near-white or near-black is never the primary while the image has a
//     chromatic colour (of at least 2% of it); an image without one falls back to the other
//     clusters by the same rank;
//   - background: the cluster holding at least 40% of the image's border, else the most frequent
//     very light or very dark cluster, else the most frequent cluster; when that is the primary
//     itself (a brand colour framing the image), the most frequent neutral cluster instead, so the
//     brand colour stays the primary and the page a readable neutral;
//   - secondary: the best-ranked remaining cluster;
//   - text: the palette color (other than the background) with the highest WCAG contrast against
//     the background when it reaches 4.5:1, else black or white, whichever contrasts more.
//
// ok is false when the image has no opaque pixels.
func ExtractPalette(img image.Image) (Palette, bool) {
	pts := sample(img)
	if len(pts) == 0 {
		return Palette{}, false
	}
	borderTotal := 0
	for _, p := range pts {
		if p.border {
			borderTotal++
		}
	}
	cl := kmeans(pts, seeds(pts))
	var pal Palette
	for _, c := range cl {
		pal.Swatches = append(pal.Swatches, Swatch{Color: toColor(c.c), Share: float64(c.n) / float64(len(pts))})
	}

	bg := -1
	for i, c := range cl {
		if borderTotal > 0 && float64(c.border)/float64(borderTotal) >= bgBorderMin {
			bg = i
			break
		}
	}
	if bg < 0 {
		for i := range cl {
			if l := toColor(cl[i].c).Luminance(); l > 0.8 || l < 0.02 {
				bg = i
				break
			}
		}
	}
	if bg < 0 {
		bg = 0
	}

	// Every cluster ranked by share weighted by colourfulness; chromatic ones of a real share first.
	score := func(i int) float64 { return float64(cl[i].n) * (0.2 + toColor(cl[i].c).chroma()) }
	chromatic := func(i int) bool {
		return !toColor(cl[i].c).neutral() && float64(cl[i].n) >= minPrimaryShare*float64(len(pts))
	}
	ranked := make([]int, len(cl))
	for i := range ranked {
		ranked[i] = i
	}
	sort.SliceStable(ranked, func(a, b int) bool {
		if ca, cb := chromatic(ranked[a]), chromatic(ranked[b]); ca != cb {
			return ca
		}
		return score(ranked[a]) > score(ranked[b])
	})

	primary := -1
	if chromatic(ranked[0]) && ranked[0] == bg {
		// The brand colour frames the image: it stays the primary, and the background is the
		// most frequent neutral when there is one (cl is most frequent first).
		for i := range cl {
			if toColor(cl[i].c).neutral() {
				bg, primary = i, ranked[0]
				break
			}
		}
	}
	if primary < 0 {
		for _, i := range ranked {
			if i != bg {
				primary = i
				break
			}
		}
	}
	pal.Background = toColor(cl[bg].c)
	if primary < 0 {
		// One color only: it is the primary as well as the background.
		pal.Primary = pal.Background
	} else {
		pal.Primary = toColor(cl[primary].c)
		for _, i := range ranked {
			if i != bg && i != primary {
				pal.Secondary, pal.HasSecondary = toColor(cl[i].c), true
				break
			}
		}
	}

	bestRatio := 0.0
	for i, c := range cl {
		if i == bg {
			continue
		}
		col := toColor(c.c)
		if r := ContrastRatio(col, pal.Background); r >= minTextRatio && r > bestRatio {
			pal.Text, bestRatio = col, r
		}
	}
	if bestRatio == 0 {
		black, white := Color{0, 0, 0}, Color{255, 255, 255}
		if ContrastRatio(black, pal.Background) >= ContrastRatio(white, pal.Background) {
			pal.Text = black
		} else {
			pal.Text = white
		}
	}
	pal.TextContrast = ContrastRatio(pal.Text, pal.Background)
	return pal, true
}
