package csvimport

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/catalog"
)

// bad marks a case that must fail with ErrInvalidValue.
type bad struct{}

func TestConvert(t *testing.T) {
	const (
		str   = catalog.TypeString
		text  = catalog.TypeText
		num   = catalog.TypeNumber
		integ = catalog.TypeInteger
		boo   = catalog.TypeBoolean
		date  = catalog.TypeDate
		link  = catalog.TypeURL
		img   = catalog.TypeImage
		arr   = catalog.TypeArray
		price = catalog.TypePrice
	)
	tests := []struct {
		name, typ, cell string
		want            any
	}{
		// absent
		{"empty string", str, "", nil},
		{"blank integer", integ, "   ", nil},
		{"blank price", price, "\u00a0", nil},
		// string and text
		{"string trimmed", str, "  Moss Green \t", "Moss Green"},
		{"text keeps inner line breaks", text, "\n<p>a</p>\n<p>b</p>\n", "<p>a</p>\n<p>b</p>"},
		{"leading zeros stay in a string", str, "00123", "00123"},
		// integer
		{"integer", integ, "42", int64(42)},
		{"integer negative", integ, "-7", int64(-7)},
		{"integer plus sign", integ, "+7", int64(7)},
		{"integer space thousands", integ, "1 234", int64(1234)},
		{"integer no-break space thousands", integ, "1\u00a0234\u00a0567", int64(1234567)},
		{"integer comma thousands", integ, "1,234", int64(1234)},
		{"integer dot thousands", integ, "1.234.567", int64(1234567)},
		{"integer swiss thousands", integ, "1'234", int64(1234)},
		{"integer written as x.0", integ, "12.0", int64(12)},
		{"integer leading zeros", integ, "007", int64(7)},
		{"integer with a fraction", integ, "12.5", bad{}},
		{"integer decimal comma fraction", integ, "12,5", bad{}},
		{"integer bad grouping", integ, "12,34", bad{}},
		{"integer overflow", integ, "99999999999999999999", bad{}},
		{"integer word", integ, "twelve", bad{}},
		{"integer with a unit", integ, "12 pcs", bad{}},
		// number
		{"number point", num, "12.5", 12.5},
		{"number decimal comma", num, "12,5", 12.5},
		{"number German thousands", num, "1.234,56", 1234.56},
		{"number English thousands", num, "1,234.56", 1234.56},
		{"number French thousands", num, "1 234,56", 1234.56},
		{"number ambiguous comma is thousands", num, "1,234", 1234.0},
		{"number ambiguous point is a decimal", num, "1.234", 1.234},
		{"number zero comma", num, "0,123", 0.123},
		{"number leading point", num, ".5", 0.5},
		{"number negative", num, "-0.75", -0.75},
		{"number minus sign", num, "\u22123,5", -3.5},
		{"number exponent", num, "1.5e3", 1500.0},
		{"number two decimal separators", num, "1,234,56.7.8", bad{}},
		{"number bad grouping", num, "1,23,456", bad{}},
		{"number trailing separator", num, "12.", bad{}},
		{"number with a unit", num, "12kg", bad{}},
		{"number infinity", num, "1e999", bad{}},
		{"number NaN", num, "NaN", bad{}},
		{"number hex", num, "0x1F", bad{}},
		// price
		{"price euro before", price, "€12,50", 12.5},
		{"price code after", price, "12.50 EUR", 12.5},
		{"price dollar thousands", price, "$1,299.00", 1299.0},
		{"price euro after", price, "12,50 €", 12.5},
		{"price code before", price, "USD 10", 10.0},
		{"price German thousands", price, "1.299,00 €", 1299.0},
		{"price Swiss", price, "CHF 1'299.50", 1299.5},
		{"price US$", price, "US$ 9.99", 9.99},
		{"price kr.", price, "149,00 kr.", 149.0},
		{"price minus before symbol", price, "-€5.00", -5.0},
		{"price minus after symbol", price, "€-5.00", -5.0},
		{"price German dash", price, "12,-", 12.0},
		{"price plain", price, "24.90", 24.9},
		{"price unknown code", price, "12 XYZ", bad{}},
		{"price only a symbol", price, "€", bad{}},
		{"price word", price, "free", bad{}},
		{"price two amounts", price, "€12 €13", bad{}},
		// boolean
		{"boolean TRUE", boo, "TRUE", true},
		{"boolean false", boo, "false", false},
		{"boolean yes", boo, "Yes", true},
		{"boolean n", boo, "n", false},
		{"boolean 1", boo, "1", true},
		{"boolean 0", boo, "0", false},
		{"boolean t", boo, "T", true},
		{"boolean ja", boo, "ja", true},
		{"boolean nein", boo, "Nein", false},
		{"boolean oui", boo, "OUI", true},
		{"boolean non", boo, "non", false},
		{"boolean maybe", boo, "maybe", bad{}},
		{"boolean 2", boo, "2", bad{}},
		// date
		{"date ISO", date, "2024-03-01", "2024-03-01"},
		{"date ISO short parts", date, "2024-3-1", "2024-03-01"},
		{"date RFC 3339 kept", date, "2024-03-01T10:00:00Z", "2024-03-01T10:00:00Z"},
		{"date RFC 3339 offset kept", date, "2024-03-01T10:00:00.5+01:00", "2024-03-01T10:00:00.5+01:00"},
		{"date Shopify timestamp", date, "2024-03-01 10:00:00 -0500", "2024-03-01T10:00:00-05:00"},
		{"date local timestamp is UTC", date, "2024-03-01 10:30", "2024-03-01T10:30:00Z"},
		{"date local midnight is a date", date, "2024-03-01 00:00:00", "2024-03-01"},
		{"date slashes month first", date, "01/03/2024", "2024-01-03"},
		{"date slashes day > 12", date, "25/03/2024", "2024-03-25"},
		{"date slashes month first, day > 12", date, "03/25/2024", "2024-03-25"},
		{"date dots day first", date, "1.3.2024", "2024-03-01"},
		{"date dots padded", date, "01.03.2024", "2024-03-01"},
		{"date two-digit year", date, "3/1/24", "2024-03-01"},
		{"date with time", date, "3/1/2024 4:05 PM", "2024-03-01T16:05:00Z"},
		{"date month name", date, "Mar 1, 2024", "2024-03-01"},
		{"date day month name", date, "1 March 2024", "2024-03-01"},
		{"date Excel style", date, "1-Mar-24", "2024-03-01"},
		{"date invalid day", date, "2024-02-30", bad{}},
		{"date invalid month", date, "13/13/2024", bad{}},
		{"date zero date", date, "0000-00-00", bad{}},
		{"date word", date, "soon", bad{}},
		{"date number", date, "20240301", bad{}},
		{"date version", date, "1.2.3", bad{}},
		// url and image
		{"url https", link, "https://example.com/a?b=c#d", "https://example.com/a?b=c#d"},
		{"url http upper case scheme", link, "HTTP://Example.com", "HTTP://Example.com"},
		{"url without scheme", link, "www.example.com", bad{}},
		{"url relative", link, "/products/mug", bad{}},
		{"url protocol-relative", link, "//cdn.example.com/a.jpg", bad{}},
		{"url ftp", link, "ftp://example.com/a", bad{}},
		{"url mailto", link, "mailto:a@example.com", bad{}},
		{"url with a space", link, "https://example.com/a b.jpg", bad{}},
		{"url no host", link, "https:///a", bad{}},
		{"image", img, "https://cdn.shopify.com/s/files/1/0612/products/a.jpg?v=1", "https://cdn.shopify.com/s/files/1/0612/products/a.jpg?v=1"},
		{"image any URL", img, "https://example.com/media/123", "https://example.com/media/123"},
		{"image not a URL", img, "a.jpg", bad{}},
		// array
		{"array pipes", arr, "red| blue ||green ", []string{"red", "blue", "green"}},
		{"array semicolons", arr, "red; blue", []string{"red", "blue"}},
		{"array pipes win over semicolons", arr, "a;b|c", []string{"a;b", "c"}},
		{"array commas are not separators", arr, "cotton, organic", []string{"cotton, organic"}},
		{"array single", arr, "red", []string{"red"}},
		{"array separators only", arr, " | | ", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Convert(tt.typ, tt.cell)
			if _, wantErr := tt.want.(bad); wantErr {
				if err == nil || !errors.Is(err, ErrInvalidValue) {
					t.Errorf("Convert(%s, %q) = %#v, %v; want an invalid value error", tt.typ, tt.cell, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Convert(%s, %q): %v", tt.typ, tt.cell, err)
			}
			if f, ok := tt.want.(float64); ok {
				if g, ok := got.(float64); !ok || math.Abs(g-f) > 1e-9 {
					t.Errorf("Convert(%s, %q) = %#v, want %v", tt.typ, tt.cell, got, f)
				}
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Convert(%s, %q) = %#v, want %#v", tt.typ, tt.cell, got, tt.want)
			}
		})
	}
}

func TestConvertWith(t *testing.T) {
	eu := OptionsFor(";")
	tests := []struct {
		name, typ, cell string
		opts            ConvertOptions
		want            any
	}{
		{"day first", catalog.TypeDate, "01/03/2024", eu, "2024-03-01"},
		{"day first keeps unambiguous month first", catalog.TypeDate, "03/25/2024", eu, "2024-03-25"},
		{"decimal comma ambiguous comma", catalog.TypeNumber, "1,234", eu, 1.234},
		{"decimal comma ambiguous point", catalog.TypeNumber, "1.234", eu, 1234.0},
		{"decimal comma price", catalog.TypePrice, "1.234 €", eu, 1234.0},
		{"integer ignores the locale", catalog.TypeInteger, "1,234", eu, int64(1234)},
		{"default options", catalog.TypeNumber, "1.234", OptionsFor(","), 1.234},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ConvertWith(tt.typ, tt.cell, tt.opts)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ConvertWith(%s, %q) = %#v, %v; want %#v", tt.typ, tt.cell, got, err, tt.want)
			}
		})
	}
}

func TestConvertErrors(t *testing.T) {
	if _, err := Convert("color", "red"); err == nil || errors.Is(err, ErrInvalidValue) {
		t.Errorf("unknown type: %v", err)
	}
	if _, err := Convert("color", ""); err == nil {
		t.Error("unknown type with an empty cell: no error")
	}
	_, err := Convert(catalog.TypeNumber, strings.Repeat("x", 200))
	if err == nil || len(err.Error()) > 120 || !strings.Contains(err.Error(), "...") {
		t.Errorf("long cell: %v", err)
	}
	_, err = Convert(catalog.TypeInteger, "abc")
	if err == nil || err.Error() != `invalid value: "abc" is not a whole number` {
		t.Errorf("message: %v", err)
	}
}

// TestConvertAfterAnalyze: every cell of the test files converts to the type inferred for its column.
func TestConvertAfterAnalyze(t *testing.T) {
	for _, file := range []string{"shopify_products.csv", "european_semicolon.csv", "bom.csv", "tabs.tsv"} {
		t.Run(file, func(t *testing.T) {
			a := analyzeFile(t, file)
			r := openReader(t, file, a.Delimiter)
			for {
				row, n, err := r.Next()
				if err != nil {
					break
				}
				for _, f := range a.SuggestedSchema {
					if _, err := ConvertWith(f.Type, row[f.Label], a.Options); err != nil {
						t.Errorf("row %d, %s: %v", n, f.Label, err)
					}
				}
			}
		})
	}
}

func FuzzConvert(f *testing.F) {
	for _, s := range []string{"", "12,50 €", "1.234,56", "$1,299.00", "2024-03-01T10:00:00Z", "01.03.2024", "3/1/24 4:05 PM",
		"https://x.example/a.jpg", "a|b;c", "yes", "1e5", "-€5", "Fr. 12.-", "\u22121 234,5", "1-Mar-24"} {
		f.Add(s, false, false)
	}
	f.Fuzz(func(t *testing.T, cell string, dayFirst, decimalComma bool) {
		opts := ConvertOptions{DayFirst: dayFirst, DecimalComma: decimalComma}
		for _, typ := range catalog.Types {
			v, err := ConvertWith(typ, cell, opts)
			if err != nil {
				if !errors.Is(err, ErrInvalidValue) {
					t.Fatalf("%s %q: %v", typ, cell, err)
				}
				continue
			}
			if v == nil {
				continue
			}
			ok := false
			switch typ {
			case catalog.TypeString, catalog.TypeText, catalog.TypeURL, catalog.TypeImage, catalog.TypeDate:
				_, ok = v.(string)
			case catalog.TypeInteger:
				_, ok = v.(int64)
			case catalog.TypeNumber, catalog.TypePrice:
				var f float64
				f, ok = v.(float64)
				ok = ok && !math.IsNaN(f) && !math.IsInf(f, 0)
			case catalog.TypeBoolean:
				_, ok = v.(bool)
			case catalog.TypeArray:
				var a []string
				a, ok = v.([]string)
				ok = ok && len(a) > 0
			}
			if !ok {
				t.Fatalf("%s %q: %#v", typ, cell, v)
			}
			if typ == catalog.TypeDate {
				// a date converts to itself
				again, err := ConvertWith(typ, v.(string), opts)
				if err != nil || again != v {
					t.Fatalf("date %q -> %q -> %#v, %v", cell, v, again, err)
				}
			}
		}
	})
}
