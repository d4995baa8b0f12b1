package segment_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/segment"
)

// skeleton rewrites a definition's user data: every distinct string (event types, properties,
// traits, string values, in-list items) becomes a distinct token x0, x1, ... and every distinct
// number a distinct small number of the same sign. Structure (logic, negate, types, operators,
// metrics, windows, segment ids, value kinds) is kept.
//
// Compiled SQL must be byte-identical for a definition and its skeleton: the text depends on the
// definition's structure only, never on what the user typed. (Replacing every string by one "x"
// and every number by 1, as a literal reading of the property would, cannot work: the compiler
// rightly shares a parameter or an aggregate between equal values, so collapsing distinct values
// changes the text, and whether users without events can match depends on a value's sign:
// "count eq 0" reads the profile store, "count eq 1" does not. The skeleton keeps exactly the
// equalities and signs.)
type skeleton struct {
	strs  map[string]string
	nums  map[float64]float64
	fixed map[float64]bool // numbers bound beside user numbers and kept: the tenant, segment ids
	next  float64
	user  []string // the user strings seen
}

func newSkeleton(def *segment.Definition, tenant int64) *skeleton {
	s := &skeleton{strs: map[string]string{}, nums: map[float64]float64{}, fixed: map[float64]bool{float64(tenant): true}}
	for _, id := range def.SegmentRefs() {
		s.fixed[float64(id)] = true
	}
	return s
}

func (s *skeleton) str(v string) string {
	s.user = append(s.user, v)
	// Booleans are bound as their text, "true" and "false": a user string equal to one of them
	// shares their parameter.
	if v == "true" || v == "false" {
		return v
	}
	if t, ok := s.strs[v]; ok {
		return t
	}
	t := fmt.Sprintf("x%d", len(s.strs))
	s.strs[v] = t
	return t
}

func (s *skeleton) num(v float64) float64 {
	if v == 0 || s.fixed[v] {
		return v
	}
	if w, ok := s.nums[v]; ok {
		return w
	}
	s.next++
	for s.fixed[s.next] {
		s.next++
	}
	w := s.next
	if v < 0 {
		w = -w
	}
	s.nums[v] = w
	return w
}

func (s *skeleton) value(v *segment.Value) *segment.Value {
	if v == nil {
		return nil
	}
	out := *v
	switch v.Kind {
	case segment.KindString:
		out.Str = s.str(v.Str)
	case segment.KindNumber:
		out.Num = s.num(v.Num)
	case segment.KindList:
		// In-lists are compared as text: each item becomes the token of its text.
		out.List = make([]segment.Value, len(v.List))
		for i, x := range v.List {
			out.List[i] = segment.Value{Kind: segment.KindString, Str: s.str(x.Text())}
		}
	}
	return &out
}

func (s *skeleton) nodes(ns []segment.Node) []segment.Node {
	out := make([]segment.Node, len(ns))
	for i, n := range ns {
		m := n
		if n.IsGroup() {
			m.Conditions = s.nodes(n.Conditions)
		} else {
			if n.EventType != "" {
				m.EventType = s.str(n.EventType)
			}
			if n.Property != "" {
				m.Property = s.str(n.Property)
			}
			if n.Trait != "" {
				m.Trait = s.str(n.Trait)
			}
			m.Value = s.value(n.Value)
		}
		out[i] = m
	}
	return out
}

// goldenVocabulary is the text the compiler writes on its own: the SQL of the golden files
// (whose definitions' names and values are all parameters), lowercased with digit runs as 0.
func goldenVocabulary(tb testing.TB) string {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.sql"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no golden files: %v", err)
	}
	var b strings.Builder
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		sql, _, _ := strings.Cut(string(raw), "\n-- params:\n")
		b.WriteString(sql)
		b.WriteString("\n")
	}
	return normalizeSQLText(b.String())
}

var digitRuns = regexp.MustCompile(`[0-9]+`)

func normalizeSQLText(s string) string { return digitRuns.ReplaceAllString(strings.ToLower(s), "0") }

func FuzzCompile(f *testing.F) {
	defs := goldenDefinitions(f)
	for _, name := range sortedKeys(defs) {
		f.Add(defs[name])
	}
	f.Add([]byte(seedDefinition))
	f.Add([]byte(cond(`{"type":"trait","trait":"plan","operator":"in","value":["a","b"]},{"type":"trait","trait":"plan","operator":"in","value":["a b"]}`)))
	f.Add([]byte(cond(`{"type":"frequency","event_type":"42","operator":"eq","value":42},{"type":"in_segment","segment_id":42}`)))
	f.Add([]byte(cond(`{"type":"trait","trait":"true","operator":"eq","value":true},{"type":"trait","trait":"t","operator":"in","value":["true",1,"1"]}`)))
	f.Add([]byte(`{"logic":"or","negate":true,"conditions":[{"conditions":[{"type":"recency","event_type":"e","operator":"neq","window_days":0,"negate":true}]}]}`))
	vocabulary := goldenVocabulary(f)
	f.Fuzz(func(t *testing.T, raw []byte) { checkCompileProperties(t, raw, vocabulary) })
}

// checkCompileProperties is FuzzCompile's check of one input: a parse error is a validation
// error; a valid definition round-trips and compiles in both dialects to SQL that depends on its
// structure only.
func checkCompileProperties(t *testing.T, raw []byte, vocabulary string) {
	def, err := segment.ParseDefinition(raw)
	if err != nil {
		var ve *errs.ValidationError
		if !errors.Is(err, errs.ErrInvalid) || !errors.As(err, &ve) || len(ve.Fields) == 0 {
			t.Fatalf("parse error %v (%T) is not a validation error with fields", err, err)
		}
		return
	}
	checkRoundTrip(t, def)

	sk := newSkeleton(def, compileOpts.TenantID)
	skel := &segment.Definition{Logic: def.Logic, Negate: def.Negate, Conditions: sk.nodes(def.Conditions)}
	for _, d := range dialects {
		q, err := segment.Compile(def, d, compileOpts)
		if err != nil {
			t.Fatalf("%s: Compile of a valid definition: %v\n%s", d, err, def.JSON())
		}
		_ = q.Display()
		sq, err := segment.Compile(skel, d, compileOpts)
		if err != nil {
			t.Fatalf("%s: Compile of the skeleton: %v\n%s", d, err, skel.JSON())
		}
		if q.SQL != sq.SQL {
			t.Fatalf("%s: the SQL depends on user text:\n%s\n-- skeleton:\n%s\n%s", d, q.SQL, sq.SQL, firstDiff(sq.SQL, q.SQL))
		}
		if len(q.Params) != len(sq.Params) || !reflect.DeepEqual(q.SegmentParams, sq.SegmentParams) {
			t.Fatalf("%s: %d parameters, the skeleton %d", d, len(q.Params), len(sq.Params))
		}
		for _, s := range sk.user {
			if len(s) < 4 || !strings.Contains(q.SQL, s) {
				continue
			}
			if !strings.Contains(vocabulary, normalizeSQLText(s)) {
				t.Fatalf("%s: user text %q is in the SQL:\n%s", d, s, q.SQL)
			}
		}
	}
}

// The largest definitions are checked quickly: the fuzzer feeds many of them.
func TestCompilePropertiesLargeDefinitions(t *testing.T) {
	vocabulary := goldenVocabulary(t)
	var leaves []string
	for i := range segment.MaxConditions {
		leaves = append(leaves, fmt.Sprintf(`{"type":"event_property","event_type":"type%d","property":"p%d","operator":"in","value":[%s],"window_days":%d}`,
			i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf(`"v%d",`, i), 100), ","), i+1))
	}
	inputs := map[string][]byte{
		"1000-item in-list":      bigInDefinition(60).JSON(),
		"50 conditions":          []byte(`{"logic":"OR","conditions":[` + strings.Join(leaves[:segment.MaxConditions/2], ",") + `,{"conditions":[` + strings.Join(leaves[segment.MaxConditions/2:], ",") + `]}]}`),
		"depth 5 with 50 leaves": []byte(nested(5, repeat(segment.MaxConditions, monetaryLeaf))),
		"deeply nested JSON":     []byte(strings.Repeat("[", 30000) + strings.Repeat("]", 30000)),
		"deeply nested groups":   []byte(strings.Repeat(`{"conditions":[`, 5000) + strings.Repeat("]}", 5000)),
		"many keys":              []byte(`{"conditions":[` + frequencyLeaf + `]` + strings.Repeat(`,"k":1`, 10000) + `}`),
		"many distinct bad keys": []byte(`{"conditions":[` + frequencyLeaf + `]` + strings.Repeat(`,"kkkkkkkkkk":1`, 4000) + `}`),
	}
	for name, raw := range inputs {
		start := time.Now()
		checkCompileProperties(t, raw, vocabulary)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s (%d bytes): %v", name, len(raw), d)
		}
	}
}

// The skeleton check has teeth: a definition whose text differs only in user strings compiles
// to the same SQL, and one with other structure does not.
func TestSkeletonCheck(t *testing.T) {
	a, err := segment.ParseDefinition([]byte(cond(`{"type":"event_property","event_type":"page_view","property":"path","operator":"eq","value":"/x'--"},{"type":"frequency","event_type":"order","operator":"eq","value":0}`)))
	if err != nil {
		t.Fatal(err)
	}
	sk := newSkeleton(a, 42)
	skel := &segment.Definition{Logic: a.Logic, Conditions: sk.nodes(a.Conditions)}
	for _, d := range dialects {
		qa, err := segment.Compile(a, d, compileOpts)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		qs, err := segment.Compile(skel, d, compileOpts)
		if err != nil {
			t.Fatalf("%s: skeleton: %v", d, err)
		}
		if qa.SQL != qs.SQL {
			t.Fatalf("%s: skeleton SQL differs:\n%s\n%s", d, qa.SQL, qs.SQL)
		}
		if strings.Contains(qa.SQL, "page_view") || strings.Contains(qa.SQL, "/x'--") {
			t.Fatalf("%s: user text in SQL:\n%s", d, qa.SQL)
		}
	}
	// "value":0 keeps its sign: the skeleton still reads the profile store.
	if got := skel.Conditions[1].Value.Num; got != 0 {
		t.Fatalf("zero became %v", got)
	}
	if got := skel.Conditions[0].Value.Str; got != "x2" {
		t.Fatalf("string value became %q", got)
	}
}
