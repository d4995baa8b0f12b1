package csvimport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/catalog"
)

func analyzeFile(t *testing.T, name string) *Analysis {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	a, err := Analyze(f, st.Size())
	if err != nil {
		t.Fatalf("Analyze(%s): %v", name, err)
	}
	return a
}

func analyzeBytes(t *testing.T, data string) (*Analysis, error) {
	t.Helper()
	return Analyze(strings.NewReader(data), int64(len(data)))
}

// flags abbreviates a field's booleans: R required, F facet, S searchable.
func flags(f catalog.Field) string {
	s := ""
	if f.Required {
		s += "R"
	}
	if f.Facet {
		s += "F"
	}
	if f.Searchable {
		s += "S"
	}
	return s
}

var fieldNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// checkInvariants holds for every Analysis.
func checkInvariants(t *testing.T, a *Analysis) {
	t.Helper()
	if len(a.SuggestedMapping) != len(a.Headers) {
		t.Errorf("mapping has %d headers, file has %d", len(a.SuggestedMapping), len(a.Headers))
	}
	names := map[string]bool{}
	for _, f := range a.SuggestedSchema {
		if !fieldNameRE.MatchString(f.Name) || f.Name == "sku" || f.Name == "name" || names[f.Name] {
			t.Errorf("bad or repeated field name %q", f.Name)
		}
		names[f.Name] = true
		if m, ok := a.SuggestedMapping[f.Label]; !ok || (m != nil && *m != f.Name) {
			t.Errorf("field %q: mapping of its header %q is %v", f.Name, f.Label, m)
		}
	}
	skus := 0
	for h, m := range a.SuggestedMapping {
		if m == nil {
			continue
		}
		switch *m {
		case "sku":
			skus++
		case "name":
		default:
			if !names[*m] {
				t.Errorf("header %q maps to %q, not in the schema", h, *m)
			}
		}
	}
	if skus > 1 {
		t.Errorf("%d headers map to sku", skus)
	}
	if len(a.SampleRows) > sampleRowsShown {
		t.Errorf("%d sample rows", len(a.SampleRows))
	}
}

func TestAnalyzeFiles(t *testing.T) {
	tests := []struct {
		name            string
		file            string
		delimiter       string
		headers         string // all headers, joined by the delimiter
		rows            int64
		skuCol, nameCol string // headers mapped to sku and name
		skipped         []string
		// types maps every header with a field to "type flags" (see flags) and unit if any
		types   map[string]string
		options ConvertOptions
		sample0 map[string]string // cells of the first sample row to check
	}{
		{
			name: "shopify product export", file: "shopify_products.csv", delimiter: ",",
			headers: "Handle,Title,Body (HTML),Vendor,Product Category,Type,Tags,Published,Option1 Name,Option1 Value,Option2 Name,Option2 Value,Variant SKU,Variant Grams,Variant Inventory Tracker,Variant Inventory Qty,Variant Inventory Policy,Variant Fulfillment Service,Variant Price,Variant Compare At Price,Variant Requires Shipping,Variant Taxable,Variant Barcode,Image Src,Image Position,Image Alt Text,Gift Card,SEO Title,SEO Description,Variant Image,Variant Weight Unit,Cost per item,Status",
			rows:    16, skuCol: "Variant SKU", nameCol: "Title",
			types: map[string]string{
				"Handle":                      "string R",
				"Body (HTML)":                 "text S",
				"Vendor":                      "string FS",
				"Product Category":            "string S",
				"Type":                        "string S",
				"Tags":                        "string S",
				"Published":                   "boolean",
				"Option1 Name":                "string F",
				"Option1 Value":               "string F",
				"Option2 Name":                "string F",
				"Option2 Value":               "string F",
				"Variant Grams":               "number g",
				"Variant Inventory Tracker":   "string F",
				"Variant Inventory Qty":       "integer",
				"Variant Inventory Policy":    "string F",
				"Variant Fulfillment Service": "string F",
				"Variant Price":               "price",
				"Variant Compare At Price":    "price",
				"Variant Requires Shipping":   "boolean",
				"Variant Taxable":             "boolean",
				"Variant Barcode":             "string",
				"Image Src":                   "image",
				"Image Position":              "integer",
				"Image Alt Text":              "string",
				"Gift Card":                   "boolean",
				"SEO Title":                   "string S",
				"SEO Description":             "text S",
				"Variant Image":               "image",
				"Variant Weight Unit":         "string F",
				"Cost per item":               "price",
				"Status":                      "string F",
			},
			sample0: map[string]string{
				"Handle": "classic-cotton-tee", "Variant SKU": "NW-TEE-WHT-S", "Variant Price": "24.90",
				"Body (HTML)": "<p>Our everyday tee, made from 100% organic cotton.</p>\n<ul>\n<li>Relaxed fit, ribbed collar</li>\n<li>Machine wash cold, tumble dry low</li>\n</ul>",
			},
		},
		{
			name: "european semicolon export", file: "european_semicolon.csv", delimiter: ";",
			headers: "Artikelnummer;Bezeichnung;Preis;Lagerbestand;Kategorie;Aktiv;Gewicht (kg);Erscheinungsdatum;Farben;Größe;Bild-URL;Beschreibung;EAN;Hersteller-Website",
			rows:    10, skuCol: "Artikelnummer", nameCol: "Bezeichnung",
			types: map[string]string{
				"Preis":              "price R",
				"Lagerbestand":       "integer R",
				"Kategorie":          "string RFS",
				"Aktiv":              "boolean R",
				"Gewicht (kg)":       "number R kg",
				"Erscheinungsdatum":  "date R",
				"Farben":             "array RF",
				"Größe":              "string RF",
				"Bild-URL":           "image R",
				"Beschreibung":       "text RS",
				"EAN":                "string R",
				"Hersteller-Website": "url R",
			},
			options: ConvertOptions{DayFirst: true, DecimalComma: true},
			sample0: map[string]string{"Artikelnummer": "100234", "Preis": "89,90 €", "Größe": "M"},
		},
		{
			name: "byte-order mark and CRLF", file: "bom.csv", delimiter: ",",
			headers: "SKU,Name,Price,In Stock,Updated At,Notes", rows: 4, skuCol: "SKU", nameCol: "Name",
			types: map[string]string{
				"Price":      "price R",
				"In Stock":   "boolean R",
				"Updated At": "date R",
				"Notes":      "text",
			},
			sample0: map[string]string{"SKU": "BOM-001", "Notes": ""},
		},
		{
			name: "tab separated, id next to an explicit SKU", file: "tabs.tsv", delimiter: "\t",
			headers: "id\tSKU code\tProduct Title\tBrand\tCategory\tPrice\tCurrency\tWeight (g)\tTags\tLaunch Date\tWebsite\tRating\tDiscontinued",
			rows:    6, skuCol: "SKU code", nameCol: "Product Title", skipped: []string{"id"},
			types: map[string]string{
				"id":           "string",
				"Brand":        "string RFS",
				"Category":     "string RFS",
				"Price":        "price R",
				"Currency":     "string RF",
				"Weight (g)":   "integer R g",
				"Tags":         "array RFS",
				"Launch Date":  "date R",
				"Website":      "url R",
				"Rating":       "number R",
				"Discontinued": "boolean R",
			},
			sample0: map[string]string{"SKU code": "KT-1001", "Product Title": "Pour-Over Set, 2 cups", "Tags": "coffee|ceramic|brewing"},
		},
		{
			name: "broken quotes and ragged rows", file: "broken.csv", delimiter: ",",
			headers: "sku,name,price,qty", rows: 10, skuCol: "sku", nameCol: "name",
			types:   map[string]string{"price": "price R", "qty": "integer R"},
			sample0: map[string]string{"sku": "SKU-1", "name": "Good one"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := analyzeFile(t, tt.file)
			checkInvariants(t, a)
			if a.Delimiter != tt.delimiter {
				t.Errorf("delimiter %q, want %q", a.Delimiter, tt.delimiter)
			}
			if got := strings.Join(a.Headers, a.Delimiter); got != tt.headers {
				t.Errorf("headers %q, want %q", got, tt.headers)
			}
			if a.RowsEstimated != tt.rows {
				t.Errorf("RowsEstimated %d, want %d", a.RowsEstimated, tt.rows)
			}
			if a.Options != tt.options {
				t.Errorf("options %+v, want %+v", a.Options, tt.options)
			}
			for h, want := range map[string]string{tt.skuCol: "sku", tt.nameCol: "name"} {
				if m := a.SuggestedMapping[h]; m == nil || *m != want {
					t.Errorf("mapping[%q] = %v, want %q", h, m, want)
				}
			}
			for _, h := range tt.skipped {
				if m, ok := a.SuggestedMapping[h]; !ok || m != nil {
					t.Errorf("mapping[%q] = %v, want nil", h, m)
				}
			}
			got := map[string]string{}
			for _, f := range a.SuggestedSchema {
				s := f.Type
				if fl := flags(f); fl != "" {
					s += " " + fl
				}
				if f.Unit != "" {
					s += " " + f.Unit
				}
				got[f.Label] = s
			}
			if !reflect.DeepEqual(got, tt.types) {
				for h, w := range tt.types {
					if got[h] != w {
						t.Errorf("%q: %q, want %q", h, got[h], w)
					}
				}
				for h, g := range got {
					if _, ok := tt.types[h]; !ok {
						t.Errorf("unexpected field for %q: %q", h, g)
					}
				}
			}
			if len(a.SampleRows) != int(min(tt.rows, sampleRowsShown)) && tt.file != "broken.csv" {
				t.Errorf("%d sample rows", len(a.SampleRows))
			}
			for h, want := range tt.sample0 {
				if got := a.SampleRows[0][h]; got != want {
					t.Errorf("SampleRows[0][%q] = %q, want %q", h, got, want)
				}
			}
		})
	}
}

// TestAnalyzeMatchesReader: for a file that fits the sample, RowsEstimated is what the Reader yields.
func TestAnalyzeMatchesReader(t *testing.T) {
	for _, file := range []string{"shopify_products.csv", "european_semicolon.csv", "bom.csv", "tabs.tsv", "broken.csv"} {
		t.Run(file, func(t *testing.T) {
			a := analyzeFile(t, file)
			f, err := os.Open(filepath.Join("testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r, err := NewReader(f, a.Delimiter)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.Headers(), a.Headers) {
				t.Errorf("reader headers %q, analysis %q", r.Headers(), a.Headers)
			}
			var n int64
			for {
				_, _, err := r.Next()
				if err == io.EOF {
					break
				}
				var re *RowError
				if err != nil && !errors.As(err, &re) {
					t.Fatal(err)
				}
				n++
			}
			if n != a.RowsEstimated {
				t.Errorf("reader yields %d rows, RowsEstimated %d", n, a.RowsEstimated)
			}
			st, _ := f.Stat()
			if r.BytesRead() != st.Size() {
				t.Errorf("BytesRead %d at the end, file has %d", r.BytesRead(), st.Size())
			}
		})
	}
}

func TestAnalyzeMapping(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		name    string
		csv     string
		mapping map[string]*string
		schema  map[string]string // field name -> type
	}{
		{
			name:    "explicit SKU wins over id; id skipped",
			csv:     "ID,SKU,Product Name,Price\n1,A-1,Mug,4.50\n2,A-2,Cup,3.00\n",
			mapping: map[string]*string{"ID": nil, "SKU": str("sku"), "Product Name": str("name"), "Price": str("price")},
			schema:  map[string]string{"id": "string", "price": "price"},
		},
		{
			name:    "id is the SKU without an explicit one",
			csv:     "Product ID,Title\n10,Mug\n11,Cup\n",
			mapping: map[string]*string{"Product ID": str("sku"), "Title": str("name")},
			schema:  map[string]string{},
		},
		{
			name:    "Shopify handle is the fallback",
			csv:     "Handle,Title,Variant Price\nmug,Mug,4.50\ncup,Cup,3.00\n",
			mapping: map[string]*string{"Handle": str("sku"), "Title": str("name"), "Variant Price": str("variant_price")},
			schema:  map[string]string{"variant_price": "price"},
		},
		{
			name:    "an empty Variant SKU column falls back to the handle",
			csv:     "Handle,Title,Variant SKU\nmug,Mug,\ncup,Cup,\n",
			mapping: map[string]*string{"Handle": str("sku"), "Title": str("name"), "Variant SKU": nil},
			schema:  map[string]string{"variant_sku": "string"},
		},
		{
			name:    "second SKU candidate skipped, handle kept",
			csv:     "Handle,Variant SKU,Artikelnummer,Title\nmug,M-1,100,Mug\n",
			mapping: map[string]*string{"Handle": str("handle"), "Variant SKU": str("sku"), "Artikelnummer": nil, "Title": str("name")},
			schema:  map[string]string{"handle": "string", "artikelnummer": "string"},
		},
		{
			name:    "names ignore case, space and punctuation",
			csv:     "Art.-Nr.;BEZEICHNUNG\n1;Tasse\n",
			mapping: map[string]*string{"Art.-Nr.": str("sku"), "BEZEICHNUNG": str("name")},
			schema:  map[string]string{},
		},
		{
			name:    "item number and French nom",
			csv:     "Item Number,Nom,Prix\nX1,Tasse,\"4,50 €\"\n",
			mapping: map[string]*string{"Item Number": str("sku"), "Nom": str("name"), "Prix": str("prix")},
			schema:  map[string]string{"prix": "price"},
		},
		{
			name:    "article number, product title next to a plain name",
			csv:     "article number,Product Title,Name\nA1,Mug,Mug by Anna\n",
			mapping: map[string]*string{"article number": str("sku"), "Product Title": str("name"), "Name": str("name_2")},
			schema:  map[string]string{"name_2": "string"},
		},
		{
			name: "field names: snake case, digits, repeats, empty and symbol headers, empty column",
			csv:  "sku,Variant Price,variantPrice,2nd Color,Color,Color,,€,Unused\n1,2.5,3.5,red,blue,green,x,y,\n",
			mapping: map[string]*string{
				"sku": str("sku"), "Variant Price": str("variant_price"), "variantPrice": str("variant_price_2"),
				"2nd Color": str("f_2nd_color"), "Color": str("color"), "Color (2)": str("color_2"),
				"Column 7": str("column_7"), "€": str("field_8"), "Unused": nil,
			},
			schema: map[string]string{
				"variant_price": "price", "variant_price_2": "price", "f_2nd_color": "string", "color": "string",
				"color_2": "string", "column_7": "string", "field_8": "string", "unused": "string",
			},
		},
		{
			name: "Akeneo: the first localised name",
			csv:  "sku;family;name-en_US;name-de_DE;description-en_US-ecommerce;price-EUR;enabled\nA1;mugs;Mug;Tasse;A mug;4.50;1\nA2;mugs;Cup;Becher;A cup;3.00;0\n",
			mapping: map[string]*string{
				"sku": str("sku"), "family": str("family"), "name-en_US": str("name"), "name-de_DE": str("name_de_de"),
				"description-en_US-ecommerce": str("description_en_us_ecommerce"), "price-EUR": str("price_eur"), "enabled": str("enabled"),
			},
			schema: map[string]string{
				"family": "string", "name_de_de": "string", "description_en_us_ecommerce": "text", "price_eur": "price", "enabled": "boolean",
			},
		},
		{
			name:    "header only: columns are mapped, not skipped",
			csv:     "SKU,Name,Color\n",
			mapping: map[string]*string{"SKU": str("sku"), "Name": str("name"), "Color": str("color")},
			schema:  map[string]string{"color": "string"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := analyzeBytes(t, tt.csv)
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, a)
			if !reflect.DeepEqual(a.SuggestedMapping, tt.mapping) {
				t.Errorf("mapping %s, want %s", mappingString(a.SuggestedMapping), mappingString(tt.mapping))
			}
			got := map[string]string{}
			for _, f := range a.SuggestedSchema {
				got[f.Name] = f.Type
				if a.SuggestedMapping[f.Label] == nil && f.Required {
					t.Errorf("skipped field %q is required", f.Name)
				}
			}
			if !reflect.DeepEqual(got, tt.schema) {
				t.Errorf("schema %v, want %v", got, tt.schema)
			}
		})
	}
}

func mappingString(m map[string]*string) string {
	out := map[string]any{}
	for k, v := range m {
		if v == nil {
			out[k] = nil
		} else {
			out[k] = *v
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func TestInferType(t *testing.T) {
	tests := []struct {
		name   string
		header string
		cells  []string
		want   string
	}{
		{"true/false", "Published", []string{"TRUE", "false", "True"}, catalog.TypeBoolean},
		{"yes/no/ja/nein", "Active", []string{"yes", "no", "ja", "nein"}, catalog.TypeBoolean},
		{"0 and 1", "Active", []string{"0", "1", "1"}, catalog.TypeBoolean},
		{"only 1 is a number", "Pack", []string{"1", "1", "1"}, catalog.TypeInteger},
		{"0/1 quantity is a number", "Stock", []string{"0", "1", "0"}, catalog.TypeInteger},
		{"single letters need yes and no", "Grade", []string{"F", "F", "F"}, catalog.TypeString},
		{"y/n letters", "Vegan", []string{"y", "n", "Y"}, catalog.TypeBoolean},
		{"integers", "Qty", []string{"12", "-3", "1 200"}, catalog.TypeInteger},
		{"leading zeros stay string", "Code", []string{"00123", "00456"}, catalog.TypeString},
		{"leading zeros without an id-like name", "Size", []string{"00123", "00456", "12"}, catalog.TypeString},
		{"EAN is an identifier", "EAN", []string{"4006381333931", "4006381333948"}, catalog.TypeString},
		{"more than 15 digits", "Serial", []string{"1234567890123456"}, catalog.TypeString},
		{"decimals", "Weight", []string{"1.5", "2", "0.25"}, catalog.TypeNumber},
		{"decimal commas", "Gewicht", []string{"1,5", "2,25", "0,8"}, catalog.TypeNumber},
		{"x.0 is a number", "Grams", []string{"180.0", "95.0"}, catalog.TypeNumber},
		{"price by name", "Variant Price", []string{"24.90", "19"}, catalog.TypePrice},
		{"price by name, integers", "Cost", []string{"24", "19"}, catalog.TypePrice},
		{"compare at", "Compare At", []string{"24.90", "19.00"}, catalog.TypePrice},
		{"price by currency", "Amount due", []string{"€12,50", "12,50 €", "9 EUR"}, catalog.TypePrice},
		{"currency codes", "List", []string{"USD 10", "USD 12.50"}, catalog.TypePrice},
		{"scientific-looking codes are strings", "Model", []string{"12E4", "3E10"}, catalog.TypeString},
		{"iso dates", "Launch", []string{"2024-03-01", "2023-12-24"}, catalog.TypeDate},
		{"dotted dates", "Datum", []string{"01.03.2024", "24.12.2023"}, catalog.TypeDate},
		{"timestamps", "Updated", []string{"2024-03-01T10:00:00Z", "2024-03-01 10:00:00 -0500"}, catalog.TypeDate},
		{"years are integers", "Year", []string{"2023", "2024"}, catalog.TypeInteger},
		{"image by extension", "Picture", []string{"https://x.example/a.JPG", "https://x.example/b.webp?w=200"}, catalog.TypeImage},
		{"shopify files are images", "Media", []string{"https://cdn.shopify.com/s/files/1/0612/3456/files/abc?v=1"}, catalog.TypeImage},
		{"urls", "Link", []string{"https://example.com/a", "http://example.org"}, catalog.TypeURL},
		{"mixed url and image", "Link", []string{"https://example.com/a", "https://example.com/a.png"}, catalog.TypeURL},
		{"pipe lists", "Colors", []string{"red|blue", "green", "red|black"}, catalog.TypeArray},
		{"semicolon lists", "Colors", []string{"red; blue", "green; white", "red"}, catalog.TypeArray},
		{"a rare separator is not a list", "Notes", []string{"a", "b", "c", "d", "e;f"}, catalog.TypeString},
		{"html entities are not lists", "Info", []string{"<b>Tom &amp; Jerry</b>"}, catalog.TypeString},
		{"long text", "Notes", []string{strings.Repeat("long words ", 10)}, catalog.TypeText},
		{"multi-line text", "Notes", []string{"a\nb"}, catalog.TypeText},
		{"description by name", "Short description", []string{"Nice mug"}, catalog.TypeText},
		{"plain strings", "Color", []string{"red", "blue"}, catalog.TypeString},
		{"empty column", "Color", nil, catalog.TypeString},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &column{header: tt.header, key: normKey(tt.header), name: snakeName(tt.header), values: tt.cells}
			c.words = strings.Split(c.name, "_")
			if got := inferType(c, ConvertOptions{}); got != tt.want {
				t.Errorf("inferType(%q %q) = %s, want %s", tt.header, tt.cells, got, tt.want)
			}
		})
	}
}

// TestInferType98 tolerates up to 2% of cells that do not parse (from 50 cells on).
func TestInferType98(t *testing.T) {
	cells := make([]string, 0, 100)
	for i := range 98 {
		cells = append(cells, fmt.Sprint(i+1))
	}
	cases := []struct {
		name string
		bad  []string
		want string
	}{
		{"2 bad of 100", []string{"n/a", "?"}, catalog.TypeInteger},
		{"3 bad of 101", []string{"n/a", "?", "-"}, catalog.TypeString},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			c := &column{header: "Qty", key: "qty", name: "qty", words: []string{"qty"}, values: append(append([]string{}, cells...), tt.bad...)}
			if got := inferType(c, ConvertOptions{}); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestSnakeName(t *testing.T) {
	tests := []struct{ header, want string }{
		{"Variant Price", "variant_price"},
		{"Body (HTML)", "body_html"},
		{"Image Src", "image_src"},
		{"Option1 Name", "option1_name"},
		{"SEO Title", "seo_title"},
		{"variantPrice", "variant_price"},
		{"HTMLBody", "html_body"},
		{"productID", "product_id"},
		{"Größe", "groesse"},
		{"Prix (€)", "prix"},
		{"Catégorie", "categorie"},
		{"Google Shopping / Google Product Category", "google_shopping_google_product_category"},
		{"2nd Color", "f_2nd_color"},
		{"  __Weird--Header__ ", "weird_header"},
		{"价格", ""},
		{strings.Repeat("Long Header ", 10), "long_header_long_header_long_header_long_header_long_header_lon"},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			got := snakeName(tt.header)
			if got != tt.want {
				t.Errorf("snakeName(%q) = %q, want %q", tt.header, got, tt.want)
			}
			if got != "" && !fieldNameRE.MatchString(got) {
				t.Errorf("%q is not a valid field name", got)
			}
		})
	}
	taken := map[string]int{"sku": 1, "name": 1}
	long := strings.Repeat("a", 63)
	for _, want := range []string{long, strings.Repeat("a", 61) + "_2", strings.Repeat("a", 61) + "_3"} {
		if got := uniqueName(long, 0, taken); got != want {
			t.Errorf("uniqueName = %q, want %q", got, want)
		}
	}
	if got := uniqueName("sku", 0, taken); got != "sku_2" {
		t.Errorf("uniqueName(sku) = %q", got)
	}
}

func TestSniffDelimiter(t *testing.T) {
	tests := []struct {
		name, csv, want string
	}{
		{"comma", "a,b,c\n1,2,3\n4,5,6\n", ","},
		{"semicolon with decimal commas", "sku;price;weight\nA;12,50;1,5\nB;9,99;0,25\n", ";"},
		{"semicolon with a comma in the header", "sku;Preis, EUR;qty\nA;12,50;1\nB;9,99;2\n", ";"},
		{"tab with commas in cells", "sku\tname\tprice\nA\tMug, large\t4.50\nB\tCup, small, blue\t3.00\n", "\t"},
		{"quoted delimiters", "sku,name,notes\nA,\"Mug; large\",\"a;b;c\"\nB,Cup,\"x;y\"\n", ","},
		{"quoted commas in a semicolon file", "sku;name\nA;\"Mug, large\"\nB;\"Cup, small, blue\"\n", ";"},
		{"single column", "sku\nA\nB\n", ","},
		{"tie goes to comma", "a,b;c\n1,2;3\n", ","},
		{"header only", "sku;name;price\n", ";"},
		{"consistency beats more fields", "a;b;c,d,e\n1;2;3\n4;5;6,7\n8;9;10\n", ";"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sniffDelimiter([]byte(tt.csv), true); got != tt.want {
				t.Errorf("sniffDelimiter = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAnalyzeErrors(t *testing.T) {
	long := strings.Repeat("x", SampleBytes+10)
	tests := []struct {
		name    string
		data    string
		bad     bool   // wraps ErrBadCSV
		message string // part of the error
	}{
		{"empty", "", true, "empty"},
		{"only a byte-order mark", "\xEF\xBB\xBF", true, "empty"},
		{"white space", " \n\n  \r\n", true, "empty"},
		{"Latin-1", "sku,name\nA-1,Gr\xF6\xDFe M\n", true, "byte 0xF6 on line 2"},
		{"Latin-1 header", "Gr\xF6\xDFe,sku\n", true, "not UTF-8"},
		{"UTF-16", "\xFF\xFEs\x00k\x00u\x00", true, "UTF-16"},
		{"xlsx", "PK\x03\x04\x14\x00\x06\x00", true, "Excel"},
		{"NUL bytes", "sku\x00,name\n", true, "NUL"},
		{"classic Mac line ends", "sku,name\rA,Mug\rB,Cup\r", true, "CR only"},
		{"no header: numbers", "1,2,3\n4,5,6\n", true, "no header row"},
		{"no header: a row of empty cells", ",,,\nA,B,C,D\n", true, "no header row"},
		{"broken quote in the header", "\"sku,name\nA,B\n", true, "header row"},
		{"no line break in the sample", long, true, "no line break"},
		{"too many columns", strings.Repeat("a,", MaxColumns) + "a\n", true, "columns, more than 4096"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := analyzeBytes(t, tt.data)
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, ErrBadCSV) != tt.bad || !strings.Contains(err.Error(), tt.message) {
				t.Errorf("error %q, want one containing %q (ErrBadCSV %v)", err, tt.message, tt.bad)
			}
		})
	}
	if _, err := Analyze(failingReaderAt{}, 100); err == nil || errors.Is(err, ErrBadCSV) {
		t.Errorf("read error: %v", err)
	}
}

type failingReaderAt struct{}

func (failingReaderAt) ReadAt([]byte, int64) (int, error) { return 0, errors.New("disk on fire") }

// countingReaderAt counts the bytes Analyze reads.
type countingReaderAt struct {
	r     io.ReaderAt
	n     atomic.Int64
	calls atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	c.calls.Add(1)
	return n, err
}

// writeRows writes a header and rows to path until it has at least size bytes, cycling through
// rows; it returns the number of data rows.
func writeRows(t testing.TB, path, header string, rows []string, size int64) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var block bytes.Buffer
	for _, r := range rows {
		block.WriteString(r)
	}
	written, _ := w.WriteString(header)
	var n int64
	for int64(written) < size {
		k, err := w.Write(block.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		written += k
		n += int64(len(rows))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAnalyzeLargeFile(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 200 MB file")
	}
	var rows []string
	for i := range 1000 {
		rows = append(rows, fmt.Sprintf("SKU-%06d,Product %d %s,%d.%02d,%d,%s,https://cdn.example.com/p/%d.jpg\n",
			i, i, strings.Repeat("x", i%37), i%500, i%100, i%70, []string{"true", "false"}[i%2], i))
	}
	path := filepath.Join(t.TempDir(), "big.csv")
	header := "SKU,Name,Price,Stock,Active,Image\n"
	want := writeRows(t, path, header, rows, 200<<20)

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	cr := &countingReaderAt{r: f}
	start := time.Now()
	a, err := Analyze(cr, st.Size())
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d MB analysed in %v, %d bytes read in %d calls; %d rows, estimated %d", st.Size()>>20, elapsed, cr.n.Load(), cr.calls.Load(), want, a.RowsEstimated)
	if elapsed >= time.Second {
		t.Errorf("Analyze took %v", elapsed)
	}
	if cr.n.Load() > 2<<20 {
		t.Errorf("Analyze read %d bytes", cr.n.Load())
	}
	if d := float64(a.RowsEstimated-want) / float64(want); d > 0.01 || d < -0.01 {
		t.Errorf("RowsEstimated %d, file has %d rows (%.2f%% off)", a.RowsEstimated, want, 100*d)
	}
	types := map[string]string{}
	for _, fl := range a.SuggestedSchema {
		types[fl.Label] = fl.Type
	}
	wantTypes := map[string]string{"Price": "price", "Stock": "integer", "Active": "boolean", "Image": "image"}
	if !reflect.DeepEqual(types, wantTypes) {
		t.Errorf("types %v, want %v", types, wantTypes)
	}
}

// TestAnalyzeEstimate: files larger than the sample, with rows spanning lines and rows whose size
// changes after the sample.
func TestAnalyzeEstimate(t *testing.T) {
	body := func(i int) string {
		return fmt.Sprintf("\"<p>Line one of %d, with a comma.</p>\n<p>Line two</p>\n%s\"", i, strings.Repeat("z", i%200))
	}
	t.Run("multi-line rows", func(t *testing.T) {
		var rows []string
		for i := range 500 {
			rows = append(rows, fmt.Sprintf("H-%d,Title %d,%s,%d.99\n", i, i, body(i), i))
		}
		path := filepath.Join(t.TempDir(), "multi.csv")
		want := writeRows(t, path, "Handle,Title,Body (HTML),Variant Price\n", rows, 8<<20)
		a := analyzePath(t, path)
		if d := float64(a.RowsEstimated-want) / float64(want); d > 0.02 || d < -0.02 {
			t.Errorf("RowsEstimated %d, file has %d rows", a.RowsEstimated, want)
		}
		if got := a.SuggestedSchema[0]; got.Label != "Body (HTML)" || got.Type != catalog.TypeText {
			t.Errorf("first field %+v", got)
		}
	})
	t.Run("rows grow after the sample", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "grow.csv")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriter(f)
		w.WriteString("sku,name\n")
		var n int64
		for size := 0; size < 6<<20; n++ {
			k, _ := fmt.Fprintf(w, "S%d,%s\n", n, strings.Repeat("n", 20+int(n/20000)*100))
			size += k
		}
		w.Flush()
		f.Close()
		a := analyzePath(t, path)
		// The start alone would say about 3x as many rows; the middle window pulls it back.
		if a.RowsEstimated > 2*n || a.RowsEstimated < n/2 {
			t.Errorf("RowsEstimated %d, file has %d rows", a.RowsEstimated, n)
		}
		t.Logf("estimated %d of %d rows", a.RowsEstimated, n)
	})
}

func analyzePath(t *testing.T, path string) *Analysis {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	cr := &countingReaderAt{r: f}
	a, err := Analyze(cr, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if cr.n.Load() > SampleBytes+midWindowBytes {
		t.Errorf("read %d bytes", cr.n.Load())
	}
	checkInvariants(t, a)
	return a
}

// TestAnalyzeSizeMismatch: a size larger than the file is corrected, not trusted.
func TestAnalyzeSizeMismatch(t *testing.T) {
	data := "sku,name\nA,Mug\nB,Cup\n"
	a, err := Analyze(strings.NewReader(data), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if a.RowsEstimated != 2 {
		t.Errorf("RowsEstimated %d", a.RowsEstimated)
	}
}

func TestAnalysisJSON(t *testing.T) {
	a := analyzeFile(t, "tabs.tsv")
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"delimiter":"\t"`, `"rows_estimated":6`, `"id":null`, `"SKU code":"sku"`, `"sample_rows":[{`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
}

func FuzzAnalyze(f *testing.F) {
	for _, name := range []string{"shopify_products.csv", "european_semicolon.csv", "bom.csv", "tabs.tsv", "broken.csv"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("a;b\n\"x\n"))
	f.Add([]byte("\xEF\xBB\xBF,,\n,\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Analyze(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		checkInvariants(t, a)
		r, err := NewReader(bytes.NewReader(data), a.Delimiter)
		if err != nil {
			t.Fatalf("Analyze accepted what NewReader rejects: %v", err)
		}
		var n int64
		for ; ; n++ {
			row, num, err := r.Next()
			if err == io.EOF {
				break
			}
			var re *RowError
			if err != nil && !errors.As(err, &re) {
				t.Fatal(err)
			}
			if num < 2 || (err == nil && len(row) != len(a.Headers)) {
				t.Fatalf("row %d with %d cells", num, len(row))
			}
		}
		if n != a.RowsEstimated {
			t.Fatalf("reader yields %d rows, RowsEstimated %d", n, a.RowsEstimated)
		}
	})
}

// TestAnalyzePathological: inputs built to be slow stay fast (repeated headers are numbered in
// linear time, a header as long as the sample, a sample of one huge row, many tiny rows).
func TestAnalyzePathological(t *testing.T) {
	tests := []struct {
		name string
		data string
	}{
		{"repeated headers", strings.Repeat("a,", MaxColumns-1) + "a\n1\n"},
		{"repeated names", strings.Repeat("a,a_2,a (2),", MaxColumns/3) + "\n" + strings.Repeat("1,", MaxColumns/3*3) + "\n"},
		{"empty headers", strings.Repeat(",", MaxColumns-2) + "x\n"},
		{"one huge row", "sku,name\nA,\"" + strings.Repeat("x", 3*SampleBytes) + "\"\n"},
		{"many tiny rows", "sku\n" + strings.Repeat("1\n", 3*SampleBytes/2)},
		{"many columns and rows", strings.Repeat("h,", 999) + "h\n" + strings.Repeat(strings.Repeat("1,", 999)+"1\n", 1500)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			a, err := analyzeBytes(t, tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %v", d)
			}
			checkInvariants(t, a)
		})
	}
}
