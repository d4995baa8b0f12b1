package page

import (
	"regexp"
	"strconv"
	"strings"
)

// slugRE is the form of a page slug: lower-case ASCII letters and digits in hyphen-separated runs.
var slugRE = regexp.MustCompile(`^[a-z0-9]+(?:-[a-z0-9]+)*$`)

// tenantSlugRE is the form of a tenant slug (migration 0001).
var tenantSlugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,62}$`)

// checkSlug returns "" when s can be a page slug, else why not.
func checkSlug(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case len(s) > MaxSlugLength:
		return "must be at most " + strconv.Itoa(MaxSlugLength) + " characters"
	case !slugRE.MatchString(s):
		return "must be lower-case letters and digits separated by single hyphens, like summer-linen-dresses"
	}
	return ""
}

// foldRunes spells common Latin letters with diacritics in ASCII.
var foldRunes = func() map[rune]string {
	m := map[rune]string{}
	for ascii, runes := range map[string]string{
		"a": "àáâãäåāăą", "ae": "æ", "c": "çćĉċč", "d": "ďđð", "e": "èéêëēĕėęě", "g": "ĝğġģ",
		"h": "ĥħ", "i": "ìíîïĩīĭįı", "j": "ĵ", "k": "ķ", "l": "ĺļľŀł", "n": "ñńņňŉ",
		"o": "òóôõöøōŏő", "oe": "œ", "r": "ŕŗř", "s": "śŝşšș", "ss": "ß", "t": "ţťŧț", "th": "þ",
		"u": "ùúûüũūŭůűų", "w": "ŵ", "y": "ýÿŷ", "z": "źżž",
	} {
		for _, r := range runes {
			m[r] = ascii
		}
	}
	return m
}()

// deriveSlug makes a slug from text: lower-case ASCII letters and digits (common accented letters
// spelled without their accents), every other run of characters one hyphen, at most
// MaxSlugLength bytes (cut at a hyphen when one is near the end); "page" when nothing is left.
func deriveSlug(text string) string {
	var b strings.Builder
	pendingHyphen := false
	write := func(s string) {
		if pendingHyphen && b.Len() > 0 {
			b.WriteByte('-')
		}
		pendingHyphen = false
		b.WriteString(s)
	}
	for _, r := range strings.ToLower(text) {
		switch {
		case 'a' <= r && r <= 'z' || '0' <= r && r <= '9':
			write(string(r))
		case foldRunes[r] != "":
			write(foldRunes[r])
		default:
			pendingHyphen = true
		}
		if b.Len() > MaxSlugLength {
			break
		}
	}
	return shorten(b.String(), MaxSlugLength)
}

// shorten cuts a slug to at most n bytes, at a hyphen when one is in its last third, and never
// leaves a trailing hyphen; "page" when nothing is left.
func shorten(s string, n int) string {
	if len(s) > n {
		cut := s[:n]
		if s[n] != '-' {
			if i := strings.LastIndexByte(cut, '-'); i > n*2/3 {
				cut = cut[:i]
			}
		}
		s = cut
	}
	s = strings.Trim(s, "-")
	if s == "" {
		return "page"
	}
	return s
}

// uniqueSlug returns base, or base with the first of -2, -3 ... that is not in taken (the slug
// kept within MaxSlugLength by shortening base).
func uniqueSlug(base string, taken map[string]bool) string {
	if !taken[base] {
		return base
	}
	for n := 2; ; n++ {
		suffix := "-" + strconv.Itoa(n)
		s := shorten(base, MaxSlugLength-len(suffix)) + suffix
		if !taken[s] {
			return s
		}
	}
}

// slugStem is a prefix every candidate of uniqueSlug(base) starts with, for loading the taken
// slugs with one LIKE (slugs hold no LIKE wildcards): shorten keeps more than the first 40 bytes.
func slugStem(base string) string {
	if len(base) > 40 {
		return base[:40]
	}
	return base
}
