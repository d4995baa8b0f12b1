// Package design holds each tenant's design system (colors, fonts, radius, spacing and custom CSS;
// one per tenant, created with defaults on first read), its validation, the CSS it becomes in
// exports (CSSVariables, StyleSheet), and the extraction of a suggested palette (and, with a
// vision-capable chat model, fonts) from an image (extract.go, palette.go).
package design

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/errs"
)

// Limits of a design system's fields.
const (
	MaxFontLength      = 100      // characters of a font family name
	MaxRadiusLength    = 16       // bytes of border_radius
	MaxSpacingUnit     = 64       // px
	MaxCustomCSSBytes  = 64 << 10 // bytes of custom_css
	defaultPrimary     = "#2563eb"
	defaultSecondary   = "#f59e0b"
	defaultBackground  = "#ffffff"
	defaultText        = "#111827"
	defaultFont        = "Inter"
	defaultRadius      = "8px"
	defaultSpacingUnit = 8
)

// Tokens are the values pages are styled with: what a design system holds and an export carries.
type Tokens struct {
	PrimaryColor    string `json:"primary_color"`
	SecondaryColor  string `json:"secondary_color"`
	BackgroundColor string `json:"background_color"`
	TextColor       string `json:"text_color"`
	HeadingFont     string `json:"heading_font"`
	BodyFont        string `json:"body_font"`
	BorderRadius    string `json:"border_radius"`
	SpacingUnit     int    `json:"spacing_unit"`
	CustomCSS       string `json:"custom_css"`
}

// System is a tenant's design system as GET /api/ai-pages/design-system/ shows it (the tokens'
// fields appear at the top level of its JSON).
type System struct {
	ID     int64 `json:"id"`
	Tenant int64 `json:"tenant"`
	Tokens
	UpdatedAt time.Time `json:"updated_at"`
}

// Patch is the body of PUT /api/ai-pages/design-system/: only the fields present change.
type Patch struct {
	PrimaryColor    *string `json:"primary_color"`
	SecondaryColor  *string `json:"secondary_color"`
	BackgroundColor *string `json:"background_color"`
	TextColor       *string `json:"text_color"`
	HeadingFont     *string `json:"heading_font"`
	BodyFont        *string `json:"body_font"`
	BorderRadius    *string `json:"border_radius"`
	SpacingUnit     *int    `json:"spacing_unit"`
	CustomCSS       *string `json:"custom_css"`
}

var (
	hexColorRE = regexp.MustCompile(`^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$`)
	// A CSS length: 0, or a non-negative number with a unit (px, rem, em, %).
	lengthRE = regexp.MustCompile(`^(0|(\d{1,4}(\.\d{1,4})?|\.\d{1,4})(px|rem|em|%))$`)
)

// NormalizeColor checks a hex color (#RGB or #RRGGBB) and returns it lower-case; ok is false when
// it is not one.
func NormalizeColor(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if !hexColorRE.MatchString(s) {
		return "", false
	}
	return strings.ToLower(s), true
}

// NormalizeFont checks a font family name and returns it trimmed, with runs of spaces collapsed:
// 1 to 100 characters of letters, digits, spaces, hyphens, underscores and periods, starting with
// a letter or digit ("Inter", "IBM Plex Sans", "Source Sans 3"). Quotes, commas and every CSS
// syntax character (; { } < > : ( ) \ / ! ...) are refused: the value is one family name, quoted
// by the CSS that uses it. msg says what is wrong when it is refused.
func NormalizeFont(s string) (string, string) {
	s = strings.Join(strings.Fields(s), " ")
	switch {
	case s == "":
		return "", "must be a font family name such as \"Inter\""
	case !utf8.ValidString(s):
		return "", "must be valid UTF-8"
	case utf8.RuneCountInString(s) > MaxFontLength:
		return "", fmt.Sprintf("must be at most %d characters", MaxFontLength)
	}
	first, _ := utf8.DecodeRuneInString(s)
	if !unicode.IsLetter(first) && !unicode.IsDigit(first) {
		return "", "must start with a letter or digit"
	}
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == ' ' || r == '-' || r == '_' || r == '.' {
			continue
		}
		return "", fmt.Sprintf("must be one font family name of letters, digits, spaces, hyphens, underscores and periods; %q is not allowed", r)
	}
	return s, ""
}

// CheckCustomCSS says what is wrong with custom CSS ("" when it is acceptable): at most 64 KB of
// valid UTF-8 without NUL, and nothing that could end or change the <style> element it is placed
// in: "</style", "<!--", "-->" and "<script" are refused, case-insensitively (refused rather
// than rewritten, so what is stored is what was sent).
func CheckCustomCSS(s string) string {
	switch {
	case len(s) > MaxCustomCSSBytes:
		return fmt.Sprintf("must be at most %d bytes", MaxCustomCSSBytes)
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		return "must be valid UTF-8 text without NUL characters"
	}
	lower := strings.ToLower(s)
	for _, bad := range []string{"</style", "<!--", "-->", "<script"} {
		if strings.Contains(lower, bad) {
			return fmt.Sprintf("must not contain %q: custom CSS cannot end or change its <style> element", bad)
		}
	}
	return ""
}

// Validate checks a patch and returns it normalised (colors lower-case, fonts trimmed); errors
// are one *errs.ValidationError with a message per field.
func (p Patch) Validate() (Patch, error) {
	f := errs.Fields{}
	color := func(name string, v *string) *string {
		if v == nil {
			return nil
		}
		c, ok := NormalizeColor(*v)
		if !ok {
			f.Add(name, "must be a hex color, #RGB or #RRGGBB (for example #1e40af)")
			return nil
		}
		return &c
	}
	font := func(name string, v *string) *string {
		if v == nil {
			return nil
		}
		n, msg := NormalizeFont(*v)
		if msg != "" {
			f.Add(name, "%s", msg)
			return nil
		}
		return &n
	}
	out := Patch{
		PrimaryColor:    color("primary_color", p.PrimaryColor),
		SecondaryColor:  color("secondary_color", p.SecondaryColor),
		BackgroundColor: color("background_color", p.BackgroundColor),
		TextColor:       color("text_color", p.TextColor),
		HeadingFont:     font("heading_font", p.HeadingFont),
		BodyFont:        font("body_font", p.BodyFont),
		SpacingUnit:     p.SpacingUnit,
		CustomCSS:       p.CustomCSS,
	}
	if p.BorderRadius != nil {
		r := strings.TrimSpace(*p.BorderRadius)
		if len(r) > MaxRadiusLength || !lengthRE.MatchString(r) {
			f.Add("border_radius", "must be a CSS length: 0 or a number with px, rem, em or %% (for example 8px, 0.5rem)")
		} else {
			out.BorderRadius = &r
		}
	}
	if p.SpacingUnit != nil && (*p.SpacingUnit < 0 || *p.SpacingUnit > MaxSpacingUnit) {
		f.Add("spacing_unit", "must be an integer from 0 to %d (px)", MaxSpacingUnit)
	}
	if p.CustomCSS != nil {
		if msg := CheckCustomCSS(*p.CustomCSS); msg != "" {
			f.Add("custom_css", "%s", msg)
		}
	}
	if err := f.Err(); err != nil {
		return Patch{}, err
	}
	return out, nil
}

// cssString quotes s as a CSS string. Validated values hold no quotes or backslashes; this keeps
// the output safe regardless.
func cssString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\' || r == '<' || r == '>' || r == '&' || unicode.IsControl(r):
			fmt.Fprintf(&b, "\\%x ", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// safeToken returns v when it matches re, else def: a token that reached the CSS must still be
// one of the validated shapes (a row written before a rule existed cannot inject CSS).
func safeToken(v string, re *regexp.Regexp, def string) string {
	if re.MatchString(v) {
		return v
	}
	return def
}

// CSSVariables returns the design tokens as one CSS rule, without custom_css:
//
//	:root{--cohort-primary:#2563eb;--cohort-secondary:...;--cohort-background:...;--cohort-text:...;
//	--cohort-heading-font:"Inter",system-ui,sans-serif;--cohort-body-font:...;
//	--cohort-border-radius:8px;--cohort-spacing-unit:8px}
//
// Every value is re-checked (a value that is not of its validated shape falls back to the
// default) and font names are quoted CSS strings, so the rule is safe inside a <style> element.
func (s *System) CSSVariables() string {
	font := func(v string) string {
		n, msg := NormalizeFont(v)
		if msg != "" {
			n = defaultFont
		}
		return cssString(n) + ",system-ui,sans-serif"
	}
	spacing := s.SpacingUnit
	if spacing < 0 || spacing > MaxSpacingUnit {
		spacing = defaultSpacingUnit
	}
	var b strings.Builder
	b.WriteString(":root{")
	b.WriteString("--cohort-primary:" + safeToken(s.PrimaryColor, hexColorRE, defaultPrimary) + ";")
	b.WriteString("--cohort-secondary:" + safeToken(s.SecondaryColor, hexColorRE, defaultSecondary) + ";")
	b.WriteString("--cohort-background:" + safeToken(s.BackgroundColor, hexColorRE, defaultBackground) + ";")
	b.WriteString("--cohort-text:" + safeToken(s.TextColor, hexColorRE, defaultText) + ";")
	b.WriteString("--cohort-heading-font:" + font(s.HeadingFont) + ";")
	b.WriteString("--cohort-body-font:" + font(s.BodyFont) + ";")
	b.WriteString("--cohort-border-radius:" + safeToken(s.BorderRadius, lengthRE, defaultRadius) + ";")
	b.WriteString("--cohort-spacing-unit:" + strconv.Itoa(spacing) + "px")
	b.WriteString("}")
	return b.String()
}

// StyleSheet is the text of a page's <style> element: CSSVariables, then custom_css. Custom CSS
// that would not pass CheckCustomCSS (which every write enforces) is left out.
func (s *System) StyleSheet() string {
	out := s.CSSVariables()
	if s.CustomCSS != "" && CheckCustomCSS(s.CustomCSS) == "" {
		out += "\n" + s.CustomCSS
	}
	return out
}

// Store keeps every tenant's design system in Postgres (table design_systems).
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// NewStore builds the store; now is the clock (time.Now when nil).
func NewStore(pool *pgxpool.Pool, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{pool: pool, now: now}
}

const columns = `id, tenant_id, primary_color, secondary_color, background_color, text_color, heading_font, body_font, border_radius, spacing_unit, custom_css, updated_at`

func scan(row pgx.Row) (*System, error) {
	var s System
	if err := row.Scan(&s.ID, &s.Tenant, &s.PrimaryColor, &s.SecondaryColor, &s.BackgroundColor, &s.TextColor,
		&s.HeadingFont, &s.BodyFont, &s.BorderRadius, &s.SpacingUnit, &s.CustomCSS, &s.UpdatedAt); err != nil {
		return nil, err
	}
	s.UpdatedAt = s.UpdatedAt.UTC()
	return &s, nil
}

// Default returns the design system a tenant starts with.
func Default(tenantID int64) System {
	return System{Tenant: tenantID, Tokens: Tokens{
		PrimaryColor: defaultPrimary, SecondaryColor: defaultSecondary,
		BackgroundColor: defaultBackground, TextColor: defaultText, HeadingFont: defaultFont, BodyFont: defaultFont,
		BorderRadius: defaultRadius, SpacingUnit: defaultSpacingUnit,
	}}
}

// insertDefault is the statement that creates a tenant's default design system when missing.
const insertDefault = `INSERT INTO design_systems (tenant_id, primary_color, secondary_color, background_color, text_color,
		heading_font, body_font, border_radius, spacing_unit, custom_css, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, '', $10, $10)
	ON CONFLICT (tenant_id) DO NOTHING`

func (st *Store) insertDefaultArgs(tenantID int64) []any {
	d := Default(tenantID)
	return []any{tenantID, d.PrimaryColor, d.SecondaryColor, d.BackgroundColor, d.TextColor, d.HeadingFont, d.BodyFont,
		d.BorderRadius, d.SpacingUnit, st.now().UTC()}
}

// Get returns the tenant's design system, creating the default one the first time.
func (st *Store) Get(ctx context.Context, tenantID int64) (*System, error) {
	s, err := scan(st.pool.QueryRow(ctx, `SELECT `+columns+` FROM design_systems WHERE tenant_id = $1`, tenantID))
	if err == nil {
		return s, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("load design system: %w", err)
	}
	if _, err := st.pool.Exec(ctx, insertDefault, st.insertDefaultArgs(tenantID)...); err != nil {
		if isForeignKeyViolation(err) {
			return nil, fmt.Errorf("tenant %d: %w", tenantID, errs.ErrNotFound)
		}
		return nil, fmt.Errorf("create default design system: %w", err)
	}
	s, err = scan(st.pool.QueryRow(ctx, `SELECT `+columns+` FROM design_systems WHERE tenant_id = $1`, tenantID))
	if err != nil {
		return nil, fmt.Errorf("load design system: %w", err)
	}
	return s, nil
}

// Update validates p and applies the fields it sets (creating the default design system first
// when the tenant has none); the rest keep their values. updated_at changes on every call that
// passes validation.
func (st *Store) Update(ctx context.Context, tenantID int64, p Patch) (*System, error) {
	p, err := p.Validate()
	if err != nil {
		return nil, err
	}
	var out *System
	err = pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, insertDefault, st.insertDefaultArgs(tenantID)...); err != nil {
			if isForeignKeyViolation(err) {
				return fmt.Errorf("tenant %d: %w", tenantID, errs.ErrNotFound)
			}
			return fmt.Errorf("create default design system: %w", err)
		}
		out, err = scan(tx.QueryRow(ctx, `UPDATE design_systems SET
				primary_color = coalesce($2, primary_color),
				secondary_color = coalesce($3, secondary_color),
				background_color = coalesce($4, background_color),
				text_color = coalesce($5, text_color),
				heading_font = coalesce($6, heading_font),
				body_font = coalesce($7, body_font),
				border_radius = coalesce($8, border_radius),
				spacing_unit = coalesce($9, spacing_unit),
				custom_css = coalesce($10, custom_css),
				updated_at = $11
			WHERE tenant_id = $1 RETURNING `+columns,
			tenantID, p.PrimaryColor, p.SecondaryColor, p.BackgroundColor, p.TextColor, p.HeadingFont, p.BodyFont,
			p.BorderRadius, p.SpacingUnit, p.CustomCSS, st.now().UTC()))
		if err != nil {
			return fmt.Errorf("update design system: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func isForeignKeyViolation(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "23503"
}
