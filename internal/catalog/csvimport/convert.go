package csvimport

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/catalog"
)

// ErrInvalidValue is wrapped by every error Convert returns for a cell that does not fit its type.
var ErrInvalidValue = errors.New("invalid value")

// ConvertOptions are the locale conventions of one file. Analyze infers them from the sample
// (Analysis.Options); OptionsFor gives the defaults for a delimiter.
type ConvertOptions struct {
	// DayFirst reads an ambiguous 01/03/2024 as 1 March (else 3 January). Dates whose first part
	// is > 12 are always day-first, dates whose second part is > 12 always month-first, and
	// dotted dates (1.3.2024) always day-first.
	DayFirst bool `json:"day_first"`
	// DecimalComma reads an ambiguous "1,234" as 1.234 and "1.234" as 1234 (else 1234 and
	// 1.234). Unambiguous forms ("12,5", "1.234,56", "1,234.56") parse either way.
	DecimalComma bool `json:"decimal_comma"`
}

// OptionsFor returns the conventions a file with that delimiter most likely follows: a ';' file
// comes from a spreadsheet in a decimal-comma locale (Germany, France, ...), which also writes
// dates day-first.
func OptionsFor(delimiter string) ConvertOptions {
	if delimiter == ";" {
		return ConvertOptions{DayFirst: true, DecimalComma: true}
	}
	return ConvertOptions{}
}

// Convert turns a cell into the typed value a product's data holds for fieldType (one of the
// catalog.Type* constants), with the default ConvertOptions (month-first, decimal point). A cell
// that is empty or only white space is absent: (nil, nil).
//
//	string, text  trimmed string
//	integer       int64: "1234", "1 234", "1,234", "1.234", "12.0"
//	number        float64: "12.5", "12,5", "1.234,56", "1,234.56", "1e3"
//	price         float64 of the amount, currency symbol or code stripped: "€12,50", "12.50 EUR", "$1,299.00", "USD 10"
//	boolean       bool: true/false, yes/no, y/n, t/f, 1/0, on/off, ja/nein, oui/non, wahr/falsch, vrai/faux (any case)
//	date          "YYYY-MM-DD" from 2024-03-01, 01/03/2024, 1.3.2024, 1 Mar 2024, ...; an RFC 3339 timestamp is kept as it is,
//	              other timestamps become RFC 3339 (UTC when they name no zone; a zone-less midnight becomes a plain date)
//	url, image    the absolute http(s) URL
//	array         []string split on "|" (or on ";" when the cell has no "|"), trimmed, empty elements dropped
func Convert(fieldType, cell string) (any, error) {
	return ConvertWith(fieldType, cell, ConvertOptions{})
}

// ConvertWith is Convert with the conventions of a file.
func ConvertWith(fieldType, cell string, opts ConvertOptions) (any, error) {
	s := strings.TrimSpace(cell)
	if s == "" {
		if !isKnownType(fieldType) {
			return nil, fmt.Errorf("csvimport: unknown field type %q", fieldType)
		}
		return nil, nil
	}
	switch fieldType {
	case catalog.TypeString, catalog.TypeText:
		return s, nil
	case catalog.TypeInteger:
		if v, ok := parseInteger(s); ok {
			return v, nil
		}
		return nil, invalid(s, "a whole number")
	case catalog.TypeNumber:
		if v, ok := parseNumber(s, opts.DecimalComma); ok {
			return v, nil
		}
		return nil, invalid(s, "a number")
	case catalog.TypePrice:
		if v, ok := parsePrice(s, opts.DecimalComma); ok {
			return v, nil
		}
		return nil, invalid(s, "a price")
	case catalog.TypeBoolean:
		if v, ok := parseBool(s); ok {
			return v, nil
		}
		return nil, invalid(s, "a yes/no value")
	case catalog.TypeDate:
		if v, ok := parseDate(s, opts.DayFirst); ok {
			return v, nil
		}
		return nil, invalid(s, "a date")
	case catalog.TypeURL, catalog.TypeImage:
		if _, ok := parseURL(s); ok {
			return s, nil
		}
		return nil, invalid(s, "an absolute http(s) URL")
	case catalog.TypeArray:
		if v := splitList(s); len(v) > 0 {
			return v, nil
		}
		return nil, nil
	}
	return nil, fmt.Errorf("csvimport: unknown field type %q", fieldType)
}

func isKnownType(t string) bool {
	for _, k := range catalog.Types {
		if k == t {
			return true
		}
	}
	return false
}

// invalid builds the error for a cell that is not what. Long cells are shortened in the message.
func invalid(s, what string) error {
	return fmt.Errorf("%w: %q is not %s", ErrInvalidValue, shorten(s), what)
}

// --- numbers ---

// isGroupSpace reports the space characters used as thousands separators ("1 234", "1 234").
func isGroupSpace(r rune) bool {
	return r == ' ' || r == '\u00a0' || r == '\u202f' || r == '\u2009' || r == '\u2007'
}

// separator kinds inside a number
const (
	sepNone = iota
	sepDot
	sepComma
	sepSpace
	sepApos
)

func sepKind(r rune) int {
	switch {
	case r == '.':
		return sepDot
	case r == ',':
		return sepComma
	case isGroupSpace(r):
		return sepSpace
	case r == '\'' || r == '\u2019':
		return sepApos
	}
	return sepNone
}

// normalizeNumber turns a number as people write it into the form strconv parses ("-1234.56").
// integer resolves a single '.' or ',' followed by exactly three digits as a thousands separator
// whatever decimalComma says ("1.234" is 1234 in an integer column); otherwise decimalComma decides
// that case. The digits keep their leading zeros (callers that care check them).
func normalizeNumber(s string, decimalComma, integer bool) (string, bool) {
	sign := ""
	switch {
	case strings.HasPrefix(s, "-"):
		sign, s = "-", s[1:]
	case strings.HasPrefix(s, "\u2212"): // minus sign
		sign, s = "-", s[len("\u2212"):]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	if s == "" {
		return "", false
	}
	// Scientific notation only in the plain form strconv knows: 1e5, 1.5E-3.
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp := s[:i], s[i+1:]
		if strings.HasPrefix(exp, "+") || strings.HasPrefix(exp, "-") {
			exp = exp[1:]
		}
		ip, fp, hasDot := strings.Cut(mant, ".")
		if !allDigits(exp) || exp == "" || (ip == "" && fp == "") || !allDigitsOrEmpty(ip) || !allDigitsOrEmpty(fp) || (hasDot && fp == "") {
			return "", false
		}
		return sign + s, true
	}

	var dots, commas, digits int
	kinds := 0 // bit set of the space/apostrophe group kinds seen
	for _, r := range s {
		switch k := sepKind(r); {
		case r >= '0' && r <= '9':
			digits++
		case k == sepDot:
			dots++
		case k == sepComma:
			commas++
		case k == sepSpace || k == sepApos:
			kinds |= 1 << k
		default:
			return "", false
		}
	}
	if digits == 0 {
		return "", false
	}
	groupSpaces := kinds != 0

	dec := sepNone
	switch {
	case dots > 0 && commas > 0:
		lastDot, lastComma := strings.LastIndexByte(s, '.'), strings.LastIndexByte(s, ',')
		if lastDot > lastComma {
			dec = sepDot
			if dots > 1 {
				return "", false
			}
		} else {
			dec = sepComma
			if commas > 1 {
				return "", false
			}
		}
	case dots == 1 || commas == 1:
		kind, sep := sepDot, byte('.')
		if commas == 1 {
			kind, sep = sepComma, ','
		}
		i := strings.IndexByte(s, sep)
		before, after := s[:i], s[i+1:]
		grouping := false
		if len(after) == 3 && allDigits(after) && !groupSpaces && len(before) >= 1 && len(before) <= 3 && allDigits(before) && before[0] != '0' {
			// "1,234" / "1.234": a thousands separator or a decimal one?
			switch {
			case integer:
				grouping = true
			case kind == sepComma:
				grouping = !decimalComma
			default:
				grouping = decimalComma
			}
		}
		if !grouping {
			dec = kind
		}
	}

	intPart, frac := s, ""
	if dec != sepNone {
		sep := "."
		if dec == sepComma {
			sep = ","
		}
		i := strings.LastIndex(s, sep)
		intPart, frac = s[:i], s[i+1:]
		if frac == "" || !allDigits(frac) {
			return "", false
		}
	}
	intDigits, ok := ungroup(intPart, dec)
	if !ok {
		return "", false
	}
	if intDigits == "" {
		if frac == "" {
			return "", false
		}
		intDigits = "0"
	}
	out := sign + intDigits
	if frac != "" {
		out += "." + frac
	}
	return out, true
}

// ungroup removes thousands separators from the integer part of a number, checking that they
// group by three ("1.234.567", "1 234", "12'345") and that only one kind is used. dec is the
// decimal separator, which cannot also group.
func ungroup(s string, dec int) (string, bool) {
	if s == "" || allDigits(s) {
		return s, true
	}
	var groups []string
	kind := sepNone
	start := 0
	for i, r := range s {
		if r >= '0' && r <= '9' {
			continue
		}
		k := sepKind(r)
		if k == sepNone || k == dec || (kind != sepNone && k != kind) {
			return "", false
		}
		kind = k
		groups = append(groups, s[start:i])
		start = i + utf8.RuneLen(r)
	}
	groups = append(groups, s[start:])
	if len(groups[0]) < 1 || len(groups[0]) > 3 || groups[0][0] == '0' {
		return "", false
	}
	for _, g := range groups[1:] {
		if len(g) != 3 {
			return "", false
		}
	}
	return strings.Join(groups, ""), true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func allDigitsOrEmpty(s string) bool { return s == "" || allDigits(s) }

func parseNumber(s string, decimalComma bool) (float64, bool) {
	n, ok := normalizeNumber(s, decimalComma, false)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

func parseInteger(s string) (int64, bool) {
	n, ok := normalizeNumber(s, false, true)
	if !ok || strings.ContainsAny(n, "eE") {
		return 0, false
	}
	if ip, frac, found := strings.Cut(n, "."); found {
		if strings.Trim(frac, "0") != "" {
			return 0, false
		}
		n = ip
	}
	v, err := strconv.ParseInt(n, 10, 64)
	return v, err == nil
}

// hasLeadingZero reports a number written with leading zeros ("00123", "-007"): an identifier,
// not a quantity.
func hasLeadingZero(s string) bool {
	s = strings.TrimLeft(s, "+-")
	return len(s) > 1 && s[0] == '0' && s[1] >= '0' && s[1] <= '9'
}

// --- prices ---

// isoCurrencies are the ISO 4217 codes, written in capitals as price exports do.
var isoCurrencies = func() map[string]bool {
	m := map[string]bool{}
	for _, c := range strings.Fields(`AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB
		BRL BSD BTN BWP BYN BZD CAD CDF CHF CLP CNY COP CRC CUC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR
		FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HRK HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES
		KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK
		MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR
		SDG SEK SGD SHP SLE SLL SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD
		UYU UZS VES VND VUV WST XAF XCD XOF XPF YER ZAR ZMW ZWL`) {
		m[c] = true
	}
	return m
}()

// localCurrencies are currency abbreviations written without a symbol.
var localCurrencies = map[string]bool{
	"kr": true, "Kr": true, "zł": true, "Kč": true, "Fr": true, "Ft": true, "lei": true, "Lei": true,
	"Rs": true, "RM": true, "Rp": true, "R": true, "eur": true, "usd": true, "gbp": true, "chf": true,
}

// isCurrencyToken reports a currency symbol or code: "€", "$", "US$", "R$", "EUR", "kr.", "Fr.".
func isCurrencyToken(t string) bool {
	if t == "" {
		return false
	}
	hasSymbol, letters := false, 0
	for _, r := range t {
		switch {
		case unicode.Is(unicode.Sc, r):
			hasSymbol = true
		case unicode.IsLetter(r):
			letters++
		case r == '.':
		default:
			return false
		}
	}
	if dot := strings.IndexByte(t, '.'); dot >= 0 && (dot != len(t)-1 || hasSymbol || letters == 0) {
		return false // only "kr." / "Fr." / "Rs." style abbreviations end in a dot
	}
	if hasSymbol {
		return letters <= 3
	}
	t = strings.TrimSuffix(t, ".")
	return isoCurrencies[t] || localCurrencies[t]
}

func isCurrencyRune(r rune) bool { return unicode.IsLetter(r) || unicode.Is(unicode.Sc, r) }

// stripCurrency removes a currency symbol or code before or after the amount and returns the
// amount (with a sign written before the symbol moved onto it) and whether a currency was found.
func stripCurrency(s string) (string, bool) {
	sign := ""
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		if r, _ := utf8.DecodeRuneInString(strings.TrimLeftFunc(rest, unicode.IsSpace)); isCurrencyRune(r) {
			sign, s = "-", strings.TrimLeftFunc(rest, unicode.IsSpace)
		}
	}
	found := false
	// prefix: "€", "US$", "EUR", "Fr."
	i := 0
	for i < len(s) {
		r, w := utf8.DecodeRuneInString(s[i:])
		if !isCurrencyRune(r) {
			break
		}
		i += w
	}
	if i < len(s) && s[i] == '.' && i > 0 && !strings.ContainsFunc(s[:i], func(r rune) bool { return unicode.Is(unicode.Sc, r) }) {
		i++ // "Fr. 12", "Rs.10"
	}
	if i > 0 {
		if !isCurrencyToken(s[:i]) {
			return "", false
		}
		s, found = strings.TrimLeftFunc(s[i:], unicode.IsSpace), true
	}
	// suffix: "€", "EUR", "kr."
	j := len(s)
	if strings.HasSuffix(s, ".") {
		if r, _ := utf8.DecodeLastRuneInString(s[:len(s)-1]); unicode.IsLetter(r) {
			j--
		}
	}
	for j > 0 {
		r, w := utf8.DecodeLastRuneInString(s[:j])
		if !isCurrencyRune(r) {
			break
		}
		j -= w
	}
	if j < len(s) {
		if !isCurrencyToken(s[j:]) {
			return "", false
		}
		s, found = strings.TrimRightFunc(s[:j], unicode.IsSpace), true
	}
	if sign != "" && (strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+")) {
		return "", false
	}
	return sign + s, found
}

func parsePrice(s string, decimalComma bool) (float64, bool) {
	amount, _ := stripCurrency(s)
	// "12,-" / "12.–": a whole amount in German price tags
	for _, dash := range []string{",-", ",–", ".-", ".–"} {
		if a, ok := strings.CutSuffix(amount, dash); ok {
			amount = a
			break
		}
	}
	if amount == "" {
		return 0, false
	}
	return parseNumber(amount, decimalComma)
}

// --- booleans ---

var boolWords = map[string]bool{
	"true": true, "yes": true, "y": true, "t": true, "1": true, "on": true,
	"ja": true, "oui": true, "wahr": true, "vrai": true, "si": true, "sí": true,
	"false": false, "no": false, "n": false, "f": false, "0": false, "off": false,
	"nein": false, "non": false, "falsch": false, "faux": false,
}

func parseBool(s string) (bool, bool) {
	if len(s) > 6 {
		return false, false
	}
	v, ok := boolWords[strings.ToLower(s)]
	return v, ok
}

// --- dates ---

// zonedLayouts are timestamps with a date and a zone.
var zonedLayouts = []string{
	"2006-01-02 15:04:05 -0700", // Shopify
	"2006-01-02 15:04:05 -07:00",
	"2006-01-02 15:04:05Z07:00",
	"2006-01-02T15:04:05Z0700",
	"2006-01-02 15:04:05Z0700",
	"2006-01-02T15:04Z07:00",
	"2006-01-02 15:04 -0700",
}

// localLayouts are timestamps without a zone, read as UTC.
var localLayouts = []string{
	"2006-01-02T15:04:05",
	"2006-01-02 15:04:05",
	"2006-01-02T15:04",
	"2006-01-02 15:04",
}

// timeLayouts are the times that may follow a numeric date ("3/1/2024 10:00").
var timeLayouts = []string{"15:04", "15:04:05", "3:04 PM", "3:04:05 PM", "3:04PM", "3:04:05PM"}

// monthLayouts are English dates with a month name.
var monthLayouts = []string{
	"2 January 2006", "2 Jan 2006", "January 2, 2006", "Jan 2, 2006", "January 2 2006", "Jan 2 2006",
	"2-Jan-2006", "2-Jan-06", "2. January 2006", "Mon, 2 Jan 2006", "Monday, January 2, 2006",
}

func parseDate(s string, dayFirst bool) (string, bool) {
	if len(s) < 6 || len(s) > 40 {
		return "", false
	}
	if s[0] >= '0' && s[0] <= '9' {
		if len(s) > 10 && (s[10] == 'T' || s[10] == ' ') && s[4] == '-' {
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil && validYear(t.Year()) {
				return s, true
			}
			for _, l := range zonedLayouts {
				if t, err := time.Parse(l, s); err == nil && validYear(t.Year()) {
					return t.Format(time.RFC3339Nano), true
				}
			}
			for _, l := range localLayouts {
				if t, err := time.Parse(l, s); err == nil && validYear(t.Year()) {
					return localTime(t), true
				}
			}
		}
		datePart, timePart, hasTime := strings.Cut(s, " ")
		if y, m, d, ok := parseNumericDate(datePart, dayFirst); ok {
			if !hasTime {
				return fmt.Sprintf("%04d-%02d-%02d", y, m, d), true
			}
			timePart = strings.TrimSpace(timePart)
			for _, l := range timeLayouts {
				if t, err := time.Parse(l, timePart); err == nil {
					return localTime(time.Date(y, time.Month(m), d, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)), true
				}
			}
			return "", false
		}
	}
	if !strings.ContainsFunc(s, unicode.IsLetter) {
		return "", false
	}
	for _, l := range monthLayouts {
		if t, err := time.Parse(l, s); err == nil && validYear(t.Year()) {
			return t.Format(time.DateOnly), true
		}
	}
	return "", false
}

// localTime formats a zone-less timestamp: a plain date at midnight (what spreadsheets export for
// a date cell), else RFC 3339 in UTC.
func localTime(t time.Time) string {
	if t.Hour() == 0 && t.Minute() == 0 && t.Second() == 0 && t.Nanosecond() == 0 {
		return t.Format(time.DateOnly)
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func validYear(y int) bool { return y >= 1000 && y <= 9999 }

// parseNumericDate reads y-m-d, d.m.y, d/m/y or m/d/y (with '-', '/' or '.' and one- or
// two-digit day and month; two-digit years pivot at 70).
func parseNumericDate(s string, dayFirst bool) (y, m, d int, ok bool) {
	i := strings.IndexAny(s, "-/.")
	if i <= 0 {
		return 0, 0, 0, false
	}
	sep := s[i]
	parts := strings.Split(s, string(sep))
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	for _, p := range parts {
		if !allDigits(p) || len(p) > 4 {
			return 0, 0, 0, false
		}
	}
	a, b, c := parts[0], parts[1], parts[2]
	ai, _ := strconv.Atoi(a)
	bi, _ := strconv.Atoi(b)
	ci, _ := strconv.Atoi(c)
	switch {
	case len(a) == 4 && len(b) <= 2 && len(c) <= 2:
		y, m, d = ai, bi, ci
	case len(a) <= 2 && len(b) <= 2 && (len(c) == 4 || len(c) == 2):
		y = ci
		if len(c) == 2 {
			if y < 70 {
				y += 2000
			} else {
				y += 1900
			}
		}
		switch {
		case sep == '.' || ai > 12:
			d, m = ai, bi
		case bi > 12:
			m, d = ai, bi
		case dayFirst:
			d, m = ai, bi
		default:
			m, d = ai, bi
		}
	default:
		return 0, 0, 0, false
	}
	if !validYear(y) || m < 1 || m > 12 || d < 1 || d > daysIn(m, y) {
		return 0, 0, 0, false
	}
	return y, m, d, true
}

func daysIn(m, y int) int {
	return time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// --- URLs and lists ---

func parseURL(s string) (*url.URL, bool) {
	if len(s) > 8192 || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return nil, false
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" || u.Hostname() == "" {
		return nil, false
	}
	if strings.HasPrefix(u.Hostname(), ".") || strings.HasSuffix(u.Host, ":") {
		return nil, false
	}
	return u, true
}

var imageExts = map[string]bool{".jpg": true, ".jpeg": true, ".png": true, ".gif": true, ".webp": true, ".avif": true, ".svg": true}

// isImageURL reports a URL that points at an image: by its extension, or by a known image CDN
// layout (Shopify's /files/ on cdn.shopify.com, Cloudinary's /image/upload/).
func isImageURL(u *url.URL) bool {
	p := strings.ToLower(u.Path)
	if imageExts[path.Ext(p)] {
		return true
	}
	host := strings.ToLower(u.Hostname())
	return (host == "cdn.shopify.com" && strings.Contains(p, "/files/")) || strings.Contains(p, "/image/upload/")
}

// splitList splits a list cell on "|", or on ";" when it has no "|"; elements are trimmed and
// empty ones dropped.
func splitList(s string) []string {
	sep := ";"
	if strings.Contains(s, "|") {
		sep = "|"
	}
	var out []string
	for _, p := range strings.Split(s, sep) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
