package pagebuild

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/block"
)

// The local planner plays the model's part with the local provider: it is a chat model (Planner)
// that reads plain-English commands from the user's message, one clause per step, and answers
// with the tool calls for it, so the agent's one tool loop (runModel) runs offline, in `cohort
// dev` and in tests, and its calls take the same validated path as a model's. It is
// deterministic. README.md lists the commands it understands.

// clauseSplit separates the commands of one message: lines, semicolons, sentences, "then", and
// "and" followed by a command verb.
var clauseSplit = regexp.MustCompile(`(?i)\s*(?:;|\n|\.\s+|,?\s+and then\s+|,?\s+then\s+|\s+and\s+(?:also\s+)?(?:(?:please\s+)?(?:add|insert|create|remove|delete|drop|move|put|place|make|change|set|update|rename|center|centre|align)\b))\s*`)

// splitClauses splits a message into its commands, keeping the verb that started each.
func splitClauses(msg string) []string {
	var out []string
	last := 0
	for _, loc := range clauseSplit.FindAllStringIndex(msg, -1) {
		sep := msg[loc[0]:loc[1]]
		part := msg[last:loc[0]]
		last = loc[1]
		// An "and <verb>" separator keeps its verb with the next clause.
		if m := andVerb.FindStringSubmatchIndex(sep); m != nil {
			last = loc[0] + m[2]
		}
		out = appendClause(out, part)
	}
	return appendClause(out, msg[last:])
}

var andVerb = regexp.MustCompile(`(?i)\s+and\s+(?:also\s+)?((?:please\s+)?[a-z]+\b)`)

// leadingThen is a word that only joins a command to the one before ("Then remove the hero").
var leadingThen = regexp.MustCompile(`(?i)^(?:(?:and|,)\s+)?(?:then|also|next|finally|after that|afterwards)\b,?\s*`)

func appendClause(out []string, s string) []string {
	s = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(s), ".!"))
	s = strings.TrimSpace(leadingThen.ReplaceAllString(s, ""))
	if s == "" {
		return out
	}
	return append(out, s)
}

// typeWords maps the words for a block type to the type, most specific first.
var typeWords = []struct {
	re  *regexp.Regexp
	typ string
}{
	{regexp.MustCompile(`(?i)\b(?:product grid|products? section|grid|products)\b`), block.ProductGrid},
	{regexp.MustCompile(`(?i)\b(?:feature list|features? section|features|feature|benefits|list)\b`), block.FeatureList},
	{regexp.MustCompile(`(?i)\b(?:testimonials?|reviews?|quote)\b`), block.Testimonial},
	{regexp.MustCompile(`(?i)\b(?:call[- ]to[- ]action(?: banner)?|cta(?: banner)?|banner)\b`), block.CTABanner},
	{regexp.MustCompile(`(?i)\b(?:hero(?: section| banner)?)\b`), block.Hero},
	{regexp.MustCompile(`(?i)\b(?:text section|text block|text|paragraph|section)\b`), block.TextSection},
}

// typeAt returns the block type named in s (the earliest mention wins) and where it ends.
func typeAt(s string) (typ string, end int) {
	best := -1
	for _, tw := range typeWords {
		if loc := tw.re.FindStringIndex(s); loc != nil && (best < 0 || loc[0] < best) {
			best, typ, end = loc[0], tw.typ, loc[1]
		}
	}
	return typ, end
}

// localCall is one planned call, or a search the planner needs before it can fill a grid.
type localCall struct {
	tc         ai.ToolCall
	gridSearch string // search products for this and put them in a grid (add or update)
	gridPos    *int
}

func toolCall(name string, args any) localCall {
	return localCall{tc: ai.ToolCall{Name: name, Arguments: argsJSON(args)}}
}

var (
	reAdd      = regexp.MustCompile(`(?i)^(?:please\s+)?(?:add|insert|create|append|include)\s+(?:a|an|another|one|some)?\s*(.*)$`)
	reRemove   = regexp.MustCompile(`(?i)^(?:please\s+)?(?:remove|delete|drop|get rid of)\s+(?:the\s+)?(.*)$`)
	reMove     = regexp.MustCompile(`(?i)^(?:please\s+)?(?:move|put|place)\s+(?:the\s+)?(.+?)\s+(above|before|below|after|under|beneath|to the top|to the bottom|to the start|to the end|at the top|at the bottom|first|last)\b\s*(?:the\s+)?(.*)$`)
	reColumns  = regexp.MustCompile(`(?i)\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten)[- ]columns?\b|\bcolumns?\s+(?:to\s+)?(\d+)\b`)
	reAlign    = regexp.MustCompile(`(?i)^(?:please\s+)?(?:(center|centre)|(?:left|right)[- ]align|align\s+(.+?)\s+(?:to the\s+)?(left|right|center|centre))\b\s*(?:the\s+)?(.*)$`)
	reAlignEnd = regexp.MustCompile(`(?i)^(?:please\s+)?(?:(left|right)[- ]align)\s+(?:the\s+)?(.*)$`)
	reSet      = regexp.MustCompile(`(?i)^(?:please\s+)?(?:change|set|make|update|rename|edit|replace)\s+(?:the\s+)?(.+?)\s+(?:to say|to read|say|says|read|to|into|as|with|:)\s+(.+)$`)
	reLast     = regexp.MustCompile(`(?i)\b(?:last|bottom)\b`)
	reItems    = regexp.MustCompile(`(?i)\s*(?:,\s*(?:and\s+)?|\s+and\s+)\s*`)
	reQuoted   = regexp.MustCompile(`"([^"]+)"|“([^”]+)”|'([^']+)'`)
	// reLink finds the link of a call to action: whatever follows "linking to" (and the like), or
	// a URL-shaped word (a path, or scheme:...) after "to"; an unusable one is refused by the block
	// registry, never replaced.
	reLink     = regexp.MustCompile(`(?i)\s*(?:,\s*)?(?:(?:linking|links|linked|pointing|that links|going|leading)\s+(?:to|at)\s+(\S+)|(?:to|at)\s+((?:/|[a-z][a-z0-9+.-]*:)\S*))`)
	reFrom     = regexp.MustCompile(`(?i:\b(?:from|by))\s+(\p{L}[\p{L}.'-]*(?:\s+\p{Lu}[\p{L}.'-]*)?)`)
	reAbout    = regexp.MustCompile(`(?i)\b(?:about|on|regarding|for)\s+(.+)$`)
	reSaying   = regexp.MustCompile(`(?i)\b(?:saying|that says|reading)\s+(.+)$`)
	reWith     = regexp.MustCompile(`(?i)\b(?:with|of|listing|showing|containing)\s+(.+)$`)
	reHeadline = regexp.MustCompile(`(?i)\b(?:with\s+)?(?:the\s+|a\s+)?(?:headline|heading|title)\s+(.+)$`)
	rePosition = regexp.MustCompile(`(?i)\s*(?:,\s*)?\b(?:(at the top|at the start|at the beginning|to the top|first)|(at the bottom|at the end|to the bottom|last)|(above|before|below|after|under|beneath)\s+(?:the\s+)?([a-z -]+?))\s*$`)
)

var numberWords = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}

// planClause turns one command into calls on the page as it is now; ok is false when the
// command is not understood (note says why).
func planClause(clause string, blocks []block.Block) (calls []localCall, note string) {
	c := strings.TrimSpace(clause)
	find := func(typ string, last bool) (int, string) {
		idx := -1
		for i, b := range blocks {
			if b.Type == typ {
				idx = i
				if !last {
					break
				}
			}
		}
		if idx < 0 {
			return -1, ""
		}
		return idx, blocks[idx].ID
	}
	wantsLast := func(s string) bool { return reLast.MatchString(s) }
	missing := func(typ string) string { return fmt.Sprintf("The page has no %s block.", label(typ)) }

	// Columns of the grid.
	if m := reColumns.FindStringSubmatch(c); m != nil && !reAdd.MatchString(c) {
		n, _ := strconv.Atoi(m[1] + m[2])
		if w, ok := numberWords[strings.ToLower(m[1])]; ok {
			n = w
		}
		_, id := find(block.ProductGrid, false)
		if id == "" {
			return nil, missing(block.ProductGrid)
		}
		return []localCall{toolCall(ToolUpdateBlock, map[string]any{"id": id, "props": map[string]any{"columns": n}})}, ""
	}

	// Alignment of a text section.
	if m := reAlign.FindStringSubmatch(c); m != nil {
		align, target := "", ""
		switch {
		case m[1] != "":
			align, target = "center", m[4]
		case m[3] != "":
			align, target = strings.ToLower(m[3]), m[2]
		}
		if align == "centre" {
			align = "center"
		}
		if align != "" {
			return alignText(target, align, blocks, find)
		}
	}
	if m := reAlignEnd.FindStringSubmatch(c); m != nil {
		return alignText(m[2], strings.ToLower(m[1]), blocks, find)
	}

	// Move.
	if m := reMove.FindStringSubmatch(c); m != nil {
		typ, _ := typeAt(m[1])
		if typ == "" {
			return nil, fmt.Sprintf("I do not know which block %q is.", m[1])
		}
		from, id := find(typ, wantsLast(m[1]))
		if id == "" {
			return nil, missing(typ)
		}
		where := strings.ToLower(m[2])
		var to int
		switch where {
		case "to the top", "to the start", "at the top", "first":
			to = 0
		case "to the bottom", "to the end", "at the bottom", "last":
			to = len(blocks) - 1
		default:
			otyp, _ := typeAt(m[3])
			if otyp == "" {
				return nil, fmt.Sprintf("I do not know which block %q is.", m[3])
			}
			k, oid := find(otyp, wantsLast(m[3]))
			if oid == "" {
				return nil, missing(otyp)
			}
			if oid == id {
				return nil, "A block cannot move relative to itself."
			}
			above := where == "above" || where == "before"
			switch {
			case above && from < k:
				to = k - 1
			case above:
				to = k
			case from < k:
				to = k
			default:
				to = k + 1
			}
		}
		return []localCall{toolCall(ToolMoveBlock, map[string]any{"id": id, "position": to})}, ""
	}

	// Remove.
	if m := reRemove.FindStringSubmatch(c); m != nil {
		typ, _ := typeAt(m[1])
		if typ == "" {
			return nil, fmt.Sprintf("I do not know which block %q is.", m[1])
		}
		_, id := find(typ, wantsLast(m[1]))
		if id == "" {
			return nil, missing(typ)
		}
		return []localCall{toolCall(ToolRemoveBlock, map[string]any{"id": id})}, ""
	}

	// Add.
	if m := reAdd.FindStringSubmatch(c); m != nil {
		return planAdd(m[1], blocks, find)
	}

	// Change a field.
	if m := reSet.FindStringSubmatch(c); m != nil {
		return planSet(m[1], unquote(m[2]), blocks, find)
	}
	return nil, fmt.Sprintf("I did not understand %q. I can add, remove, move and change blocks: for example \"add a testimonial from Jane about fast shipping\", \"make the grid four columns\", \"move the product grid above the text\" or \"change the headline to Summer sale\".", c)
}

func alignText(target, align string, blocks []block.Block, find func(string, bool) (int, string)) ([]localCall, string) {
	typ := block.TextSection
	if t, _ := typeAt(target); t != "" && t != block.TextSection {
		return nil, fmt.Sprintf("Only text sections can be aligned, not a %s.", label(t))
	}
	_, id := find(typ, false)
	if id == "" {
		return nil, fmt.Sprintf("The page has no %s block.", label(typ))
	}
	return []localCall{toolCall(ToolUpdateBlock, map[string]any{"id": id, "props": map[string]any{"align": align}})}, ""
}

// planAdd plans "add a <type> ..." with its details and position.
func planAdd(rest string, blocks []block.Block, find func(string, bool) (int, string)) ([]localCall, string) {
	typ, end := typeAt(rest)
	if typ == "" {
		return nil, fmt.Sprintf("I do not know what block %q is; the blocks are %s.", rest, strings.Join(block.Types(), ", "))
	}
	detail := strings.TrimSpace(rest[end:])
	// The position ends the command.
	var pos *int
	if m := rePosition.FindStringSubmatchIndex(detail); m != nil {
		sub := func(i int) string {
			if m[2*i] < 0 {
				return ""
			}
			return detail[m[2*i]:m[2*i+1]]
		}
		switch {
		case sub(1) != "":
			pos = new(0)
		case sub(2) != "":
			pos = new(len(blocks))
		default:
			if otyp, _ := typeAt(sub(4)); otyp != "" {
				if k, oid := find(otyp, false); oid != "" {
					w := strings.ToLower(sub(3))
					if w == "above" || w == "before" {
						pos = new(k)
					} else {
						pos = new(k + 1)
					}
				}
			}
		}
		if pos != nil {
			detail = strings.TrimSpace(detail[:m[0]])
		}
	}
	if pos == nil && typ == block.Hero {
		pos = new(0)
	}
	quoted := firstQuoted(detail)
	props := map[string]any{}
	switch typ {
	case block.Testimonial:
		author := "A happy customer"
		if m := reFrom.FindStringSubmatch(detail); m != nil {
			author = capitalize(strings.TrimSpace(m[1]))
		}
		quote := quoted
		if quote == "" {
			if m := reSaying.FindStringSubmatch(detail); m != nil {
				quote = capitalize(unquote(m[1]))
			} else if m := reAbout.FindStringSubmatch(detail); m != nil {
				quote = "I love the " + stripArticle(m[1]) + "!"
			} else {
				quote = "I love it!"
			}
		}
		props["quote"], props["author"] = quote, author
	case block.CTABanner:
		url := "/"
		if m := reLink.FindStringSubmatch(detail); m != nil {
			url = strings.TrimRight(m[1]+m[2], ".,;!")
		}
		lbl := quoted
		if lbl == "" {
			if m := reSaying.FindStringSubmatch(reLink.ReplaceAllString(detail, "")); m != nil {
				lbl = capitalize(unquote(m[1]))
			} else {
				lbl = "Shop now"
			}
		}
		props["headline"], props["cta_label"], props["cta_url"] = lbl, lbl, url
	case block.TextSection:
		switch {
		case quoted != "":
			props["body"] = quoted
		case reSaying.MatchString(detail):
			props["body"] = capitalize(unquote(reSaying.FindStringSubmatch(detail)[1]))
		case reAbout.MatchString(detail):
			topic := strings.TrimSpace(reAbout.FindStringSubmatch(detail)[1])
			props["heading"] = capitalize(topic)
			props["body"] = "Learn about " + topic + "."
		default:
			props["body"] = "Add your text here."
		}
	case block.FeatureList:
		m := reWith.FindStringSubmatch(detail)
		if m == nil {
			return nil, "Tell me the features, for example \"add a feature list with free shipping, easy returns\"."
		}
		var items []any
		for _, it := range reItems.Split(m[1], -1) {
			if it = strings.TrimSpace(unquote(it)); it != "" {
				items = append(items, map[string]any{"title": capitalize(it)})
			}
		}
		props["items"] = items
	case block.Hero:
		headline := quoted
		if headline == "" {
			if m := reHeadline.FindStringSubmatch(detail); m != nil {
				headline = capitalize(unquote(m[1]))
			} else {
				headline = "Welcome"
			}
		}
		props["headline"] = headline
	case block.ProductGrid:
		q := ""
		if m := reAbout.FindStringSubmatch(detail); m != nil {
			q = m[1]
		} else if m := reWith.FindStringSubmatch(detail); m != nil {
			q = m[1]
		}
		q = strings.TrimSpace(unquote(q))
		if q == "" {
			return nil, "Tell me which products, for example \"add a product grid of running shoes\"."
		}
		return []localCall{{gridSearch: q, gridPos: pos}}, ""
	}
	args := map[string]any{"type": typ, "props": props}
	if pos != nil {
		args["position"] = *pos
	}
	return []localCall{toolCall(ToolAddBlock, args)}, ""
}

// fields maps the words for a field to the block type and prop (type "" is the page itself).
var fields = []struct {
	re   *regexp.Regexp
	typ  string
	prop string
}{
	{regexp.MustCompile(`(?i)^(?:page\s+)?title$|^title of the page$`), "", "title"},
	{regexp.MustCompile(`(?i)^(?:page\s+)?intro(?:duction)?(?: copy| text)?$`), "", "intro_copy"},
	{regexp.MustCompile(`(?i)^(?:hero\s+)?sub[- ]?(?:headline|heading|title)|^tagline$`), block.Hero, "subheadline"},
	{regexp.MustCompile(`(?i)(?:banner|call[- ]to[- ]action|cta)\s+(?:headline|heading|title)$`), block.CTABanner, "headline"},
	{regexp.MustCompile(`(?i)(?:banner|call[- ]to[- ]action|cta)(?:'s)?\s+(?:button\s+)?(?:link|url)$`), block.CTABanner, "cta_url"},
	{regexp.MustCompile(`(?i)(?:banner|call[- ]to[- ]action|cta)(?:'s)?\s+(?:button|label|button text|button label)$`), block.CTABanner, "cta_label"},
	{regexp.MustCompile(`(?i)^(?:hero\s+)?(?:main\s+)?headline$|^hero(?:'s)? (?:heading|title)$`), block.Hero, "headline"},
	{regexp.MustCompile(`(?i)^(?:hero(?:'s)?\s+)?(?:button|cta)\s+(?:link|url)$|^(?:hero(?:'s)?\s+)?link$`), block.Hero, "cta_url"},
	{regexp.MustCompile(`(?i)^(?:hero(?:'s)?\s+)?(?:button|cta)(?:\s+(?:text|label))?$`), block.Hero, "cta_label"},
	{regexp.MustCompile(`(?i)^(?:hero\s+)?image(?:\s+url)?$`), block.Hero, "image_url"},
	{regexp.MustCompile(`(?i)feature(?:s| list)?\s+(?:heading|title)$`), block.FeatureList, "heading"},
	{regexp.MustCompile(`(?i)^(?:text\s+)?(?:section\s+)?(?:heading|title)$|^(?:heading|title) of the (?:text|section)`), block.TextSection, "heading"},
	{regexp.MustCompile(`(?i)^(?:text section|text|section|paragraph)(?:\s+(?:body|text))?$|^body$`), block.TextSection, "body"},
	{regexp.MustCompile(`(?i)^(?:testimonial|quote|review)(?:'s)?\s+(?:author|name)$|^author$`), block.Testimonial, "author"},
	{regexp.MustCompile(`(?i)^(?:testimonial|quote|review)(?:'s)?\s+role$|^role$`), block.Testimonial, "role"},
	{regexp.MustCompile(`(?i)^(?:testimonial|review)(?:'s)?(?:\s+quote)?$|^quote$`), block.Testimonial, "quote"},
}

func planSet(field, value string, blocks []block.Block, find func(string, bool) (int, string)) ([]localCall, string) {
	f := strings.TrimSpace(field)
	value = strings.TrimSpace(value)
	if value == "" {
		return nil, "Tell me the new text."
	}
	for _, fw := range fields {
		if !fw.re.MatchString(f) {
			continue
		}
		if fw.typ == "" {
			return []localCall{toolCall(ToolSetPage, map[string]any{fw.prop: value})}, ""
		}
		// "change the title to X" on a page without that block falls through to the page.
		_, id := find(fw.typ, false)
		if id == "" {
			return nil, fmt.Sprintf("The page has no %s block.", label(fw.typ))
		}
		if fw.prop == "cta_url" || fw.prop == "image_url" {
			value = strings.TrimRight(value, ".,;!")
		}
		return []localCall{toolCall(ToolUpdateBlock, map[string]any{"id": id, "props": map[string]any{fw.prop: value}})}, ""
	}
	return nil, fmt.Sprintf("I do not know which field %q is.", f)
}

func firstQuoted(s string) string {
	if m := reQuoted.FindStringSubmatch(s); m != nil {
		return m[1] + m[2] + m[3]
	}
	return ""
}

func unquote(s string) string {
	s = strings.TrimSpace(s)
	for _, p := range [][2]string{{`"`, `"`}, {"“", "”"}, {"'", "'"}} {
		if len(s) >= len(p[0])+len(p[1]) && strings.HasPrefix(s, p[0]) && strings.HasSuffix(s, p[1]) {
			return strings.TrimSpace(s[len(p[0]) : len(s)-len(p[1])])
		}
	}
	return s
}

func stripArticle(s string) string {
	s = strings.TrimSpace(s)
	for _, a := range []string{"the ", "our ", "your ", "their ", "its ", "a ", "an "} {
		if len(s) > len(a) && strings.EqualFold(s[:len(a)], a) {
			return strings.TrimSpace(s[len(a):])
		}
	}
	return s
}

func capitalize(s string) string {
	s = strings.TrimSpace(s)
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}
