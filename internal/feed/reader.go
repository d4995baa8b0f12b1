package feed

import (
	"bufio"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Namespaces of the XML feeds read.
const (
	nsGoogle = "http://base.google.com/ns/1.0"
	nsAtom   = "http://www.w3.org/2005/Atom"
	nsRSS1   = "http://purl.org/rss/1.0/"
)

// MaxItemBytes caps one item of a feed document; a larger item fails alone.
const MaxItemBytes = 4 << 20

// ErrBadDocument is wrapped by the errors of a document that cannot be read on (malformed JSON or
// XML, no items where they should be): the items read before it stay imported.
var ErrBadDocument = errors.New("the feed document is invalid")

// item is one item of a feed document: its fields (nested maps for nested JSON objects and XML
// elements, []any for JSON arrays and repeated XML elements), or why it cannot be read.
type item struct {
	pos    int
	fields map[string]any
	err    string
}

// itemReader streams a document's items; Next returns io.EOF after the last one.
type itemReader interface {
	Next() (*item, error)
}

func newItemReader(format string, r io.Reader) itemReader {
	if format == FormatXML {
		return newXMLReader(r)
	}
	return newJSONReader(r)
}

// --- JSON ---

// jsonReader reads the items of a JSON feed: the document is an array of objects, or an object
// whose first top-level key holding an array of objects is the list of items.
type jsonReader struct {
	dec     *json.Decoder
	started bool
	inArray bool
	done    bool
	pending *item // the first element, decoded while looking for the array
	pos     int
}

func newJSONReader(r io.Reader) *jsonReader {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	return &jsonReader{dec: dec}
}

func badJSON(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%w: malformed JSON at byte %d: %s", ErrBadDocument, se.Offset, se.Error())
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: the JSON document ends early", ErrBadDocument)
	}
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		return fmt.Errorf("%w: %s", ErrBadDocument, err.Error())
	}
	return err // a read error (network, size cap)
}

func (j *jsonReader) Next() (*item, error) {
	if j.done {
		return nil, io.EOF
	}
	if !j.started {
		j.started = true
		if err := j.findArray(); err != nil {
			j.done = true
			return nil, err
		}
	}
	if j.pending != nil {
		it := j.pending
		j.pending = nil
		return it, nil
	}
	if !j.inArray {
		j.done = true
		return nil, io.EOF
	}
	if !j.dec.More() {
		if _, err := j.dec.Token(); err != nil { // the closing ]
			return nil, badJSON(err)
		}
		j.done, j.inArray = true, false
		return nil, io.EOF
	}
	return j.element()
}

// element decodes the next array element as an item.
func (j *jsonReader) element() (*item, error) {
	start := j.dec.InputOffset()
	var v any
	if err := j.dec.Decode(&v); err != nil {
		j.done = true
		return nil, badJSON(err)
	}
	j.pos++
	it := &item{pos: j.pos}
	if j.dec.InputOffset()-start > MaxItemBytes {
		it.err = fmt.Sprintf("the item is larger than %d bytes", MaxItemBytes)
		return it, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		it.err = "the item is not a JSON object"
		return it, nil
	}
	it.fields = m
	return it, nil
}

// findArray positions the decoder inside the items array.
func (j *jsonReader) findArray() error {
	tok, err := j.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: the document is empty", ErrBadDocument)
		}
		return badJSON(err)
	}
	switch tok {
	case json.Delim('['):
		j.inArray = true
		return nil
	case json.Delim('{'):
	default:
		return fmt.Errorf("%w: a JSON feed must be an array of items or an object holding one", ErrBadDocument)
	}
	sawEmpty := false
	for j.dec.More() {
		if _, err := j.dec.Token(); err != nil { // the key
			return badJSON(err)
		}
		tok, err := j.dec.Token()
		if err != nil {
			return badJSON(err)
		}
		switch tok {
		case json.Delim('['):
			if !j.dec.More() {
				if _, err := j.dec.Token(); err != nil {
					return badJSON(err)
				}
				sawEmpty = true
				continue
			}
			first, err := j.element()
			if err != nil {
				return err
			}
			if first.fields != nil || first.err != "the item is not a JSON object" {
				j.inArray, j.pending = true, first
				return nil
			}
			j.pos = 0 // not the items: skip the rest of this array
			if err := j.skipRest(); err != nil {
				return err
			}
		case json.Delim('{'):
			if err := j.skipRest(); err != nil {
				return err
			}
		}
	}
	if sawEmpty {
		return nil // an empty list of items
	}
	return fmt.Errorf("%w: the JSON object holds no array of item objects at its top level", ErrBadDocument)
}

// skipRest skips the rest of the array or object just opened.
func (j *jsonReader) skipRest() error {
	depth := 1
	for depth > 0 {
		tok, err := j.dec.Token()
		if err != nil {
			return badJSON(err)
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
	return nil
}

// --- XML ---

// xmlReader reads the <item> elements of an RSS 2.0 (or 1.0) feed and the <entry> elements of an
// Atom feed. An item's fields are keyed by element name with its namespace prefix: "g:id" for
// Google's namespace whatever prefix the document declares it with, "title" for the feed's own
// (RSS or Atom), the declared prefix for others ("content:encoded").
type xmlReader struct {
	dec      *xml.Decoder
	prefixes map[string]string // namespace URL -> prefix
	pos      int
	done     bool
	sawRoot  bool
}

func newXMLReader(r io.Reader) *xmlReader {
	dec := xml.NewDecoder(bufio.NewReaderSize(r, 64<<10))
	dec.Entity = xml.HTMLEntity // &nbsp; and friends, common in RSS descriptions
	dec.CharsetReader = charsetReader
	return &xmlReader{dec: dec, prefixes: map[string]string{nsGoogle: "g", nsAtom: "", nsRSS1: ""}}
}

func badXML(err error) error {
	var se *xml.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%w: malformed XML at line %d: %s", ErrBadDocument, se.Line, se.Msg)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the XML document ends early", ErrBadDocument)
	}
	if strings.HasPrefix(err.Error(), "xml: ") {
		return fmt.Errorf("%w: %s", ErrBadDocument, strings.TrimPrefix(err.Error(), "xml: "))
	}
	return err
}

// learn records the namespace prefixes an element declares.
func (x *xmlReader) learn(se xml.StartElement) {
	for _, a := range se.Attr {
		if a.Name.Space == "xmlns" {
			if _, known := x.prefixes[a.Value]; !known {
				x.prefixes[a.Value] = a.Name.Local
			}
		}
	}
}

func (x *xmlReader) key(n xml.Name) string {
	p, ok := x.prefixes[n.Space]
	if !ok {
		p = n.Space // undeclared prefix: kept as written
	}
	if p == "" {
		return n.Local
	}
	return p + ":" + n.Local
}

func (x *xmlReader) isItem(n xml.Name) bool {
	if n.Local != "item" && n.Local != "entry" {
		return false
	}
	return x.prefixes[n.Space] == "" || n.Space == ""
}

func (x *xmlReader) Next() (*item, error) {
	if x.done {
		return nil, io.EOF
	}
	for {
		tok, err := x.dec.Token()
		if errors.Is(err, io.EOF) {
			x.done = true
			if !x.sawRoot {
				return nil, fmt.Errorf("%w: the document is empty", ErrBadDocument)
			}
			return nil, io.EOF
		}
		if err != nil {
			x.done = true
			return nil, badXML(err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		x.learn(se)
		if !x.sawRoot {
			x.sawRoot = true
			if root := se.Name.Local; root != "rss" && root != "feed" && root != "RDF" {
				x.done = true
				return nil, fmt.Errorf("%w: the XML document is not an RSS or Atom feed (its root element is <%s>)", ErrBadDocument, shorten(root))
			}
		}
		if !x.isItem(se.Name) {
			continue
		}
		x.pos++
		it := &item{pos: x.pos}
		start := x.dec.InputOffset()
		v, err := x.element(se, start)
		switch {
		case errors.Is(err, errItemTooLarge):
			it.err = fmt.Sprintf("the item is larger than %d bytes", MaxItemBytes)
			return it, nil
		case err != nil:
			x.done = true
			return nil, badXML(err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			it.err = "the item has no fields"
			return it, nil
		}
		it.fields = m
		return it, nil
	}
}

var errItemTooLarge = errors.New("item too large")

// element reads the element se opened up to its end: the text of a leaf (or its href attribute:
// Atom's <link href="..."/>), a map of the children's values otherwise; repeated children become
// a list.
func (x *xmlReader) element(se xml.StartElement, start int64) (any, error) {
	var text strings.Builder
	var children map[string]any
	for {
		if x.dec.InputOffset()-start > MaxItemBytes {
			if err := x.dec.Skip(); err != nil {
				return nil, err
			}
			return nil, errItemTooLarge
		}
		tok, err := x.dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			x.learn(t)
			v, err := x.element(t, start)
			if err != nil {
				return nil, err
			}
			if children == nil {
				children = map[string]any{}
			}
			k := x.key(t.Name)
			switch prev := children[k].(type) {
			case nil:
				children[k] = v
			case []any:
				if _, repeated := prev[0].(repeatedMarker); repeated {
					children[k] = append(prev, v)
				} else {
					children[k] = []any{repeatedMarker{}, prev, v}
				}
			default:
				children[k] = []any{repeatedMarker{}, prev, v}
			}
		case xml.CharData:
			if children == nil {
				text.Write(t)
			}
		case xml.EndElement:
			if children != nil {
				for k, v := range children {
					if l, ok := v.([]any); ok && len(l) > 0 {
						if _, repeated := l[0].(repeatedMarker); repeated {
							children[k] = l[1:]
						}
					}
				}
				return children, nil
			}
			s := strings.TrimSpace(text.String())
			if s == "" {
				for _, a := range se.Attr {
					if a.Name.Local == "href" && a.Name.Space == "" {
						return strings.TrimSpace(a.Value), nil
					}
				}
			}
			return s, nil
		}
	}
}

// repeatedMarker heads the list an XML element's repeated child collects into while the element
// is read.
type repeatedMarker struct{}

// charsetReader reads ISO-8859-1 and Windows-1252 documents (the encodings older shop systems
// declare besides UTF-8) as UTF-8.
func charsetReader(label string, in io.Reader) (io.Reader, error) {
	switch strings.ToLower(strings.TrimSpace(label)) {
	case "utf-8", "utf8", "us-ascii", "ascii":
		return in, nil
	case "iso-8859-1", "iso8859-1", "latin1", "latin-1", "l1", "windows-1252", "cp1252":
		return &latin1Reader{r: bufio.NewReader(in)}, nil
	}
	return nil, fmt.Errorf("the document's encoding %q is not supported (use UTF-8)", label)
}

// cp1252 are the characters Windows-1252 puts at 0x80 to 0x9F (ISO-8859-1 has control codes
// there, which no feed means).
var cp1252 = [32]rune{'€', 0x81, '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', 0x8d, 'Ž', 0x8f,
	0x90, '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', 0x9d, 'ž', 'Ÿ'}

type latin1Reader struct {
	r   *bufio.Reader
	buf []byte
}

func (l *latin1Reader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(l.buf) > 0 {
			c := copy(p[n:], l.buf)
			n += c
			l.buf = l.buf[c:]
			continue
		}
		if n > 0 && l.r.Buffered() == 0 {
			return n, nil
		}
		b, err := l.r.ReadByte()
		if err != nil {
			return n, err
		}
		r := rune(b)
		if b >= 0x80 && b < 0xa0 {
			r = cp1252[b-0x80]
		}
		l.buf = utf8.AppendRune(l.buf[:0], r)
	}
	return n, nil
}
