package csvimport

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/catalog"
)

// Header recognition works on keys: the header lower-cased and transliterated, with everything
// but letters and digits dropped ("Variant SKU" -> "variantsku", "Art.-Nr." -> "artnr").
var (
	// skuKeys are explicit SKU columns, most specific first.
	skuKeys = []string{
		"sku", "variantsku", "productsku", "skucode", "skuno", "skunr", "skunumber", "skuid",
		"articlenumber", "articleno", "articlenr", "artikelnummer", "artikelnr", "artnr",
		"itemnumber", "itemno", "itemcode", "productcode", "productnumber", "productno",
		"produktnummer", "codearticle", "referencearticle", "reference", "referenz", "ref",
	}
	// idKeys are identifier columns used as the SKU when there is no explicit one.
	idKeys = []string{"id", "productid", "itemid", "articleid", "artikelid", "produktid"}
	// handleKeys are Shopify's handle: the SKU of last resort (the same for every variant).
	handleKeys = []string{"handle"}
	// nameKeys are product name columns, most specific first.
	nameKeys = []string{
		"productname", "producttitle", "name", "title", "bezeichnung", "artikelbezeichnung",
		"produktname", "produktbezeichnung", "produkttitel", "titel", "nom", "nomduproduit",
		"nomproduit", "titre", "itemname", "articlename", "itemtitle",
	}
)

// Hints from the words of a header (the parts of its snake_case name) and from its key.
var (
	priceWords = words("price prices cost costs msrp rrp uvp preis prix precio prezzo prijs pris")
	priceSubs  = []string{"price", "preis", "compareat", "kosten"}
	qtyWords   = words("qty quantity quantities stock inventory count menge bestand anzahl amount units pieces stueck")
	qtySubs    = []string{"qty", "quantity", "stock", "inventory", "bestand", "menge", "anzahl"}
	idWords    = words("id ids code codes barcode ean gtin upc isbn mpn asin sku handle ref reference nr no number nummer zip plz postcode postal phone tel telefon")
	idSubs     = []string{"nummer", "barcode"}
	textWords  = words("description descriptions desc body html summary details beschreibung")
	textSubs   = []string{"beschreibung", "description"}
	searchWord = words(`title titel titre name description descriptions desc body html summary subtitle
		brand brands vendor manufacturer category categories collection collections tags tag keywords keyword
		material materials features marke hersteller kategorie kategorien bezeichnung marque categorie`)
	searchSubs = []string{"beschreibung", "description", "kategorie", "category", "bezeichnung", "hersteller"}
	searchKeys = words("type producttype produkttyp produktart")
)

// akeneoLocale matches a localised Akeneo column and captures the attribute.
var akeneoLocale = regexp.MustCompile(`^(.+)-[a-z]{2,3}_[A-Z]{2}(?:-[A-Za-z0-9_]+)?$`)

func words(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// column is one column of the sample.
type column struct {
	header string
	key    string // see skuKeys
	// localized is the key of the attribute of a localised Akeneo column
	// (attribute-locale[-channel]: "name-en_US" -> "name"), else "".
	localized string
	name      string   // snake_case, before deduplication ("" if the header has no usable letters)
	words     []string // parts of name
	values    []string // non-empty cells, trimmed
	empties   int
}

func (c *column) hint(ws map[string]bool, subs []string) bool {
	for _, w := range c.words {
		if ws[w] {
			return true
		}
	}
	for _, s := range subs {
		if strings.Contains(c.key, s) {
			return true
		}
	}
	return false
}

func (c *column) isID() bool    { return c.hint(idWords, idSubs) }
func (c *column) isPrice() bool { return c.hint(priceWords, priceSubs) }

func (c *column) isSKUCandidate() bool {
	return containsKey(skuKeys, c.key) || containsKey(idKeys, c.key)
}

func containsKey(keys []string, k string) bool {
	for _, s := range keys {
		if s == k {
			return true
		}
	}
	return false
}

// suggest builds the suggested schema and mapping from the good rows of the sample.
func suggest(headers []string, rows [][]string, opts ConvertOptions) ([]catalog.Field, map[string]*string) {
	cols := make([]*column, len(headers))
	for i, h := range headers {
		c := &column{header: h, key: normKey(h), name: snakeName(h)}
		if m := akeneoLocale.FindStringSubmatch(h); m != nil {
			c.localized = normKey(m[1])
		}
		c.words = strings.Split(c.name, "_")
		for _, row := range rows {
			if v := strings.TrimSpace(row[i]); v != "" {
				c.values = append(c.values, v)
			} else {
				c.empties++
			}
		}
		cols[i] = c
	}
	haveRows := len(rows) > 0
	usable := func(c *column) bool { return !haveRows || len(c.values) > 0 }
	pick := func(keys []string, not *column) *column {
		for _, k := range keys {
			for _, c := range cols {
				if c.key == k && c != not && usable(c) {
					return c
				}
			}
		}
		for _, k := range keys {
			for _, c := range cols {
				if c.localized == k && c != not && usable(c) {
					return c
				}
			}
		}
		return nil
	}
	sku := pick(skuKeys, nil)
	if sku == nil {
		sku = pick(idKeys, nil)
	}
	if sku == nil {
		sku = pick(handleKeys, nil)
	}
	name := pick(nameKeys, sku)

	schema := []catalog.Field{}
	mapping := make(map[string]*string, len(cols))
	taken := map[string]int{"sku": 1, "name": 1}
	for i, c := range cols {
		switch c {
		case sku:
			mapping[c.header] = new("sku")
			continue
		case name:
			mapping[c.header] = new("name")
			continue
		}
		f := inferField(c, opts)
		f.Name = uniqueName(c.name, i, taken)
		if (haveRows && len(c.values) == 0) || (sku != nil && c.isSKUCandidate()) {
			f.Required = false // skipped: a required field nobody fills would reject every product
			mapping[c.header] = nil
		} else {
			mapping[c.header] = new(f.Name)
		}
		schema = append(schema, f)
	}
	return schema, mapping
}

func inferField(c *column, opts ConvertOptions) catalog.Field {
	f := catalog.Field{Label: c.header, Type: inferType(c, opts)}
	f.Required = len(c.values) > 0 && c.empties == 0
	switch f.Type {
	case catalog.TypeString, catalog.TypeArray:
		f.Facet = isFacet(c, f.Type)
		f.Searchable = isSearchable(c)
	case catalog.TypeText:
		f.Searchable = isSearchable(c)
	case catalog.TypeNumber, catalog.TypeInteger:
		f.Unit = unitOf(c)
	}
	return f
}

// inferType picks the most specific type that at least 98% of the column's non-empty cells
// parse as (all of them below 50 cells): boolean, integer, number, price, date, image, url,
// array, text, string.
func inferType(c *column, opts ConvertOptions) string {
	n := len(c.values)
	if n == 0 {
		return catalog.TypeString
	}
	allowed := n - (98*n+99)/100 // cells that may fail
	pass := func(ok func(string) bool) bool {
		fails := 0
		for _, v := range c.values {
			if !ok(v) {
				if fails++; fails > allowed {
					return false
				}
			}
		}
		return true
	}

	if pass(func(v string) bool { _, ok := parseBool(v); return ok }) && plausibleBoolean(c) {
		return catalog.TypeBoolean
	}
	if !c.isID() {
		// Leading zeros, exponents and more than 15 digits (beyond float64 precision) mean an
		// identifier, not a quantity.
		plain := func(v string) bool { return !hasLeadingZero(v) && !strings.ContainsAny(v, "eE") }
		isInt := pass(func(v string) bool { // written as a whole number: "12", "1 234", not "12.0"
			n, ok := normalizeNumber(v, false, true)
			return ok && plain(v) && !strings.Contains(n, ".") && digitCount(n) <= 15
		})
		isNum := isInt || pass(func(v string) bool {
			_, ok := parseNumber(v, opts.DecimalComma)
			return ok && plain(v) && digitCount(v) <= 15
		})
		if isNum {
			switch {
			case c.isPrice():
				return catalog.TypePrice
			case isInt:
				return catalog.TypeInteger
			}
			return catalog.TypeNumber
		}
		currency := false
		if pass(func(v string) bool {
			if _, ok := parsePrice(v, opts.DecimalComma); !ok {
				return false
			}
			if _, found := stripCurrency(v); found {
				currency = true
			}
			return true
		}) && (currency || c.isPrice()) {
			return catalog.TypePrice
		}
	}
	if pass(func(v string) bool { _, ok := parseDate(v, opts.DayFirst); return ok }) {
		return catalog.TypeDate
	}
	if pass(func(v string) bool { _, ok := parseURL(v); return ok }) {
		if pass(func(v string) bool { u, ok := parseURL(v); return ok && isImageURL(u) }) {
			return catalog.TypeImage
		}
		return catalog.TypeURL
	}
	long, total := false, 0
	for _, v := range c.values {
		total += utf8.RuneCountInString(v)
		long = long || strings.ContainsRune(v, '\n')
	}
	long = long || total > 80*n
	if c.hint(textWords, textSubs) {
		return catalog.TypeText
	}
	if !long && isList(c) {
		return catalog.TypeArray
	}
	if long {
		return catalog.TypeText
	}
	return catalog.TypeString
}

// plausibleBoolean rejects boolean readings that are more likely something else: a column of
// only 0/1 that is a quantity or has only one of the two values (an integer), a column of
// single letters without both a yes and a no letter (sizes, grades).
func plausibleBoolean(c *column) bool {
	digits, letters := true, true
	yes, no := false, false
	for _, v := range c.values {
		b, ok := parseBool(v)
		if !ok {
			continue
		}
		if b {
			yes = true
		} else {
			no = true
		}
		digits = digits && (v == "0" || v == "1")
		letters = letters && len(v) == 1 && !(v == "0" || v == "1")
	}
	switch {
	case digits:
		return yes && no && !c.hint(qtyWords, qtySubs) && !c.isPrice()
	case letters:
		return yes && no
	}
	return true
}

func digitCount(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			n++
		}
	}
	return n
}

// isList reports a column of short "|" or ";" separated lists: at least 30% of the cells hold a
// separator, elements are 40 characters on average at most and nothing looks like HTML.
func isList(c *column) bool {
	withSep, elems, chars := 0, 0, 0
	for _, v := range c.values {
		if strings.ContainsAny(v, "<>") {
			return false
		}
		if strings.ContainsAny(v, "|;") {
			withSep++
		}
		for _, e := range splitList(v) {
			elems++
			chars += utf8.RuneCountInString(e)
		}
	}
	return withSep > 0 && withSep*10 >= len(c.values)*3 && elems > 0 && chars <= 40*elems
}

// isFacet: few distinct values (at most 50 in the sample) that repeat (at most 3 distinct
// values per 4 cells, or list elements), short (64 characters on average at most), and not an
// identifier.
func isFacet(c *column, typ string) bool {
	if len(c.values) == 0 || c.isID() {
		return false
	}
	distinct := map[string]bool{}
	total, chars := 0, 0
	for _, v := range c.values {
		vs := []string{v}
		if typ == catalog.TypeArray {
			vs = splitList(v)
		}
		for _, e := range vs {
			distinct[e] = true
			total++
			chars += utf8.RuneCountInString(e)
			if len(distinct) > 50 {
				return false
			}
		}
	}
	return 4*len(distinct) <= 3*total && chars <= 64*total
}

// isSearchable: name-like and description-like text (title, description, brand, category,
// tags...), not Shopify's "Option1 Name".
func isSearchable(c *column) bool {
	if strings.HasPrefix(c.name, "option") {
		return false
	}
	return c.hint(searchWord, searchSubs) || searchKeys[c.key]
}

// unitOf reads a unit from the header: "Gewicht (kg)" -> "kg", "Width [cm]" -> "cm", Shopify's
// "Variant Grams" -> "g".
func unitOf(c *column) string {
	h := strings.TrimSpace(c.header)
	for _, p := range [][2]string{{"(", ")"}, {"[", "]"}} {
		if strings.HasSuffix(h, p[1]) {
			if i := strings.LastIndex(h, p[0]); i > 0 {
				u := strings.TrimSpace(h[i+1 : len(h)-1])
				if u != "" && utf8.RuneCountInString(u) <= 8 && !strings.ContainsFunc(u, unicode.IsSpace) {
					return u
				}
			}
		}
	}
	if last := c.words[len(c.words)-1]; last == "grams" || last == "gramm" {
		return "g"
	}
	return ""
}

// translit spells common accented letters in ASCII (German umlauts the German way).
var translit = map[rune]string{
	'ä': "ae", 'ö': "oe", 'ü': "ue", 'ß': "ss", 'æ': "ae", 'œ': "oe", 'ø': "o", 'å': "a",
	'à': "a", 'á': "a", 'â': "a", 'ã': "a", 'ā': "a", 'ą': "a", 'ç': "c", 'ć': "c", 'č': "c",
	'ď': "d", 'đ': "d", 'è': "e", 'é': "e", 'ê': "e", 'ë': "e", 'ē': "e", 'ę': "e", 'ě': "e",
	'ğ': "g", 'ì': "i", 'í': "i", 'î': "i", 'ï': "i", 'ı': "i", 'ł': "l", 'ñ': "n", 'ń': "n",
	'ň': "n", 'ò': "o", 'ó': "o", 'ô': "o", 'õ': "o", 'ő': "o", 'ř': "r", 'ś': "s", 'š': "s",
	'ş': "s", 'ť': "t", 'ù': "u", 'ú': "u", 'û': "u", 'ů': "u", 'ű': "u", 'ý': "y", 'ÿ': "y",
	'ź': "z", 'ż': "z", 'ž': "z",
}

// normKey is the header as recognition compares it: lower case ASCII letters and digits only.
func normKey(h string) string {
	var b strings.Builder
	for _, r := range h {
		r = unicode.ToLower(r)
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteString(translit[r])
		}
	}
	return b.String()
}

func isLowerASCII(r rune) bool { return r >= 'a' && r <= 'z' }
func isUpperASCII(r rune) bool { return r >= 'A' && r <= 'Z' }

const maxNameLen = 63 // ^[a-z][a-z0-9_]{0,62}$

// snakeName makes a field name of a header: "Variant Price" -> "variant_price", "Body (HTML)" ->
// "body_html", "variantPrice" -> "variant_price", "Größe" -> "groesse", "2nd Color" ->
// "f_2nd_color". Letters without an ASCII spelling are dropped; "" when nothing is left.
func snakeName(h string) string {
	var b strings.Builder
	rs := []rune(h)
	sep := false
	for i, r := range rs {
		var piece string
		switch {
		case isUpperASCII(r):
			prevLower := i > 0 && (isLowerASCII(rs[i-1]) || rs[i-1] >= '0' && rs[i-1] <= '9')
			acronymEnd := i > 0 && isUpperASCII(rs[i-1]) && i+1 < len(rs) && isLowerASCII(rs[i+1])
			sep = sep || prevLower || acronymEnd
			piece = string(unicode.ToLower(r))
		case isLowerASCII(r) || r >= '0' && r <= '9':
			piece = string(r)
		default:
			if t, ok := translit[unicode.ToLower(r)]; ok {
				piece = t
			} else {
				sep = true
				continue
			}
		}
		if sep && b.Len() > 0 {
			b.WriteByte('_')
		}
		sep = false
		b.WriteString(piece)
	}
	s := b.String()
	if s == "" {
		return ""
	}
	if s[0] >= '0' && s[0] <= '9' {
		s = "f_" + s
	}
	return truncName(s, maxNameLen)
}

func truncName(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.TrimRight(s, "_")
}

// uniqueName returns base, or base_2, base_3... if taken ("sku" and "name" always are); a header
// without a usable name becomes field_N (N its column, from 1). taken holds the names in use,
// and for a repeated base the next suffix to try (so that many repeats stay linear).
func uniqueName(base string, col int, taken map[string]int) string {
	if base == "" {
		base = "field_" + strconv.Itoa(col+1)
	}
	name := base
	if taken[name] > 0 {
		n := max(2, taken[base])
		for ; ; n++ {
			suffix := "_" + strconv.Itoa(n)
			if name = truncName(base, maxNameLen-len(suffix)) + suffix; taken[name] == 0 {
				break
			}
		}
		taken[base] = n + 1 // where to go on for the next repeat of base
	}
	taken[name] = max(taken[name], 1)
	return name
}
