package segment

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Dialect is a warehouse SQL dialect.
type Dialect string

const (
	Postgres Dialect = "postgres"
	BigQuery Dialect = "bigquery"
)

const day = 24 * time.Hour

// CompileOptions are the inputs of a compilation besides the definition.
type CompileOptions struct {
	TenantID int64
	// Now anchors every window: window_days 30 means occurred_at >= Now - 30 days.
	Now time.Time
	// Table is the BigQuery events table, "project.dataset.events" (ignored for Postgres, whose
	// warehouse is warehouse.events and whose profiles and memberships live beside it).
	Table string
	// LinksTable is the BigQuery identity graph, "project.dataset.identity_links"; empty: the
	// identity_links table of Table's dataset.
	LinksTable string
}

// Param is one bound parameter. Values are int64, float64, string, bool, time.Time or []string.
type Param struct {
	Name  string // Postgres: "1", "2", ... ($1, $2); BigQuery: the @name
	Value any
}

// Query is a compiled definition: SQL selecting the matching user ids (one column, user_id) with
// every user-supplied name and value bound as a parameter.
type Query struct {
	Dialect Dialect
	SQL     string
	Params  []Param
	// SegmentParams maps a BigQuery array parameter to the segment whose members fill it at run
	// time (in_segment: memberships live in Postgres, not in BigQuery).
	SegmentParams map[string]int64
}

// Args are the Postgres positional arguments, in order.
func (q *Query) Args() []any {
	out := make([]any, len(q.Params))
	for i, p := range q.Params {
		out[i] = p.Value
	}
	return out
}

// CountAndSample wraps the query to return every matching user's count with the first limit user
// ids in order: rows of (user_id, total).
func (q *Query) CountAndSample(limit int) string {
	return fmt.Sprintf("SELECT s.user_id, COUNT(*) OVER () AS total FROM (%s) s ORDER BY s.user_id LIMIT %d", q.SQL, limit)
}

// Count wraps the query to count the matching users.
func (q *Query) Count() string {
	return fmt.Sprintf("SELECT COUNT(*) FROM (%s) s", q.SQL)
}

var bqTable = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+){1,2}$`)

// Compile turns a validated definition into SQL of the dialect.
//
// Every per-user aggregate is over canonical users: a subject linked in identity_links (an
// anonymous id that identified as a user) counts as its user, events and rollup rows stored under
// the linked id included, and a linked id is never a user of its own.
//
// Shape: one pass over the tenant's events of the event types the definition names (and, when
// every condition is windowed, only the time range they need: BigQuery prunes partitions)
// computes every per-user aggregate at once; the definition then becomes a WHERE clause over
// those aggregates. When a user with no events at all could match (a negated condition, "count
// eq 0", a trait condition), the users come from the profile store (Postgres) or from all of the
// tenant's events (BigQuery) with the aggregates joined on.
func Compile(def *Definition, d Dialect, o CompileOptions) (*Query, error) {
	if def == nil || len(def.Conditions) == 0 {
		return nil, fmt.Errorf("compile: empty definition")
	}
	if d != Postgres && d != BigQuery {
		return nil, fmt.Errorf("compile: unknown dialect %q", d)
	}
	if d == BigQuery && !bqTable.MatchString(o.Table) {
		return nil, fmt.Errorf("compile: bigquery table %q is not project.dataset.table", o.Table)
	}
	if d == BigQuery {
		if o.LinksTable == "" {
			o.LinksTable = o.Table[:strings.LastIndexByte(o.Table, '.')+1] + "identity_links"
		}
		if !bqTable.MatchString(o.LinksTable) {
			return nil, fmt.Errorf("compile: bigquery links table %q is not project.dataset.table", o.LinksTable)
		}
	}
	if o.Now.IsZero() {
		return nil, fmt.Errorf("compile: no reference time")
	}
	c := &compiler{d: d, o: o, now: o.Now.UTC(), aggIndex: map[string]int{}, typeSet: map[string]bool{}, boundedAll: true}
	c.tenant = c.bind(o.TenantID)
	root := Node{Logic: def.Logic, Conditions: def.Conditions, Negate: def.Negate}
	c.needUniverse = evalEmpty(&root)
	c.scan(&root)
	if c.hasTrait {
		c.needUniverse = true
	}
	hasAggs := len(c.types) > 0 || (d == BigQuery && c.hasTrait)
	row := "a"
	if c.needUniverse || !hasAggs {
		row = "u"
	}
	c.sourceIndex, c.required, c.nodeSource = map[string]int{}, map[string]bool{}, map[*Node]string{}
	where := c.expr(&root, row)
	if d == Postgres && !c.needUniverse && !root.Negate && root.Logic == "AND" {
		// A direct condition of a top-level AND that no user without rows matches needs its
		// source's row: those sources are inner-joined.
		for i := range root.Conditions {
			n := &root.Conditions[i]
			if !n.IsGroup() && !n.Negate && !evalEmpty(n) {
				if alias := c.nodeSource[n]; alias != "" {
					c.required[alias] = true
				}
			}
		}
	}
	q := &Query{Dialect: d}
	if d == Postgres {
		q.SQL = c.postgresSQL(where)
	} else {
		q.SQL = c.bigquerySQL(where)
	}
	q.Params, q.SegmentParams = c.params, c.segParams
	return q, nil
}

type agg struct {
	alias string
	pg    string // Postgres select expression
	bq    string // BigQuery select expression
}

type compiler struct {
	d            Dialect
	o            CompileOptions
	now          time.Time
	params       []Param
	tenant       string
	aggs         []agg
	aggIndex     map[string]int
	types        []string
	typeSet      map[string]bool
	hasTrait     bool
	needUniverse bool
	boundedAll   bool // every event aggregate has a lower time bound
	lower        time.Time
	segParams    map[string]int64
	boundCache   map[string]string
	// Postgres: per-user rollup sources (warehouse.user_event_stats, user_property_stats) for
	// conditions without a window, and which of them every match must appear in.
	sources     []source
	sourceIndex map[string]int
	required    map[string]bool
	rawTypeList []string         // the event types the raw-event aggregates read
	nodeSource  map[*Node]string // the single source a compiled condition reads (none for traits and in_segment)
}

// source is a per-user row set joined on user_id: a rollup (s0, s1, ...) or the raw-event
// aggregates (a).
type source struct {
	alias string
	sql   string
}

// bind adds a parameter and returns its placeholder. Identical values share one parameter.
func (c *compiler) bind(v any) string {
	// %#v, not %v: []string{"a b"} and []string{"a", "b"} both print as [a b] with %v.
	key := fmt.Sprintf("%T:%#v", v, v)
	if t, ok := v.(time.Time); ok {
		key = "time:" + t.UTC().Format(time.RFC3339Nano)
	}
	if c.boundCache == nil {
		c.boundCache = map[string]string{}
	}
	if ph, ok := c.boundCache[key]; ok {
		return ph
	}
	var ph, name string
	if c.d == Postgres {
		name = strconv.Itoa(len(c.params) + 1)
		ph = "$" + name
	} else {
		name = "p" + strconv.Itoa(len(c.params))
		ph = "@" + name
	}
	c.params = append(c.params, Param{Name: name, Value: v})
	c.boundCache[key] = ph
	return ph
}

func (c *compiler) typed(ph, pgType string) string {
	if c.d == Postgres && pgType != "" {
		return ph + "::" + pgType
	}
	return ph
}

// scan walks the tree once, registering event types and noting traits.
func (c *compiler) scan(n *Node) {
	if n.IsGroup() {
		for i := range n.Conditions {
			c.scan(&n.Conditions[i])
		}
		return
	}
	switch n.Type {
	case TypeTrait:
		c.hasTrait = true
	case TypeMonetary, TypeRecency, TypeFrequency, TypeEventProperty:
		if !c.typeSet[n.EventType] {
			c.typeSet[n.EventType] = true
			c.types = append(c.types, n.EventType)
		}
	}
}

// window returns the time filter of a condition ("" when none) and notes its lower bound.
func (c *compiler) window(n *Node) string {
	switch {
	case n.WindowDays != nil && n.Type != TypeRecency:
		from := c.now.Add(-time.Duration(*n.WindowDays) * day)
		c.noteLower(from)
		return "e.occurred_at >= " + c.typed(c.bind(from), "timestamptz")
	case len(n.BetweenDays) == 2:
		from := c.now.Add(-time.Duration(n.BetweenDays[1]) * day)
		to := c.now.Add(-time.Duration(n.BetweenDays[0]) * day)
		c.noteLower(from)
		return "e.occurred_at >= " + c.typed(c.bind(from), "timestamptz") + " AND e.occurred_at < " + c.typed(c.bind(to), "timestamptz")
	}
	c.boundedAll = false
	return ""
}

func (c *compiler) noteLower(t time.Time) {
	if c.lower.IsZero() || t.Before(c.lower) {
		c.lower = t
	}
}

// aggregate registers a per-user aggregate of events of type et under filter and returns its
// alias. fn is the aggregate function, arg its argument ("*" for COUNT(*)).
func (c *compiler) aggregate(fn, arg, et, filter string) string {
	if !slices.Contains(c.rawTypeList, et) {
		c.rawTypeList = append(c.rawTypeList, et)
	}
	cond := "e.event_type = " + c.typed(c.bind(et), "text")
	if filter != "" {
		cond += " AND " + filter
	}
	key := fn + "|" + arg + "|" + cond
	if i, ok := c.aggIndex[key]; ok {
		return c.aggs[i].alias
	}
	alias := "a" + strconv.Itoa(len(c.aggs))
	var pg, bq string
	if arg == "*" {
		pg = fmt.Sprintf("%s(*) FILTER (WHERE %s)", fn, cond)
		bq = fmt.Sprintf("COUNTIF(%s)", cond)
	} else {
		pg = fmt.Sprintf("%s(%s) FILTER (WHERE %s)", fn, arg, cond)
		bqfn := fn
		if fn == "BOOL_OR" {
			bqfn = "LOGICAL_OR"
		}
		bq = fmt.Sprintf("%s(IF(%s, %s, NULL))", bqfn, cond, arg)
	}
	c.aggIndex[key] = len(c.aggs)
	c.aggs = append(c.aggs, agg{alias: alias, pg: pg, bq: bq})
	return alias
}

// payload accessors: the JSON value and its text.
func (c *compiler) jsonAt(col, key string) string {
	ph := c.typed(c.bind(key), "text")
	if c.d == Postgres {
		return col + " -> " + ph
	}
	return col + "[" + ph + "]"
}

func (c *compiler) textOf(j string) string {
	if c.d == Postgres {
		return "(" + j + " #>> '{}')"
	}
	return "LAX_STRING(" + j + ")"
}

func (c *compiler) numOf(j string) string {
	if c.d == Postgres {
		return "warehouse.jnum(" + j + ")"
	}
	return "SAFE_CAST(LAX_STRING(" + j + ") AS BIGNUMERIC)"
}

func (c *compiler) present(j string) string {
	if c.d == Postgres {
		return "jsonb_typeof(" + j + ") <> 'null'"
	}
	return "JSON_TYPE(" + j + ") <> 'null'"
}

var sqlOp = map[string]string{"gt": ">", "gte": ">=", "lt": "<", "lte": "<=", "eq": "=", "neq": "<>"}

// predicate is a value test on JSON j (a payload property or a trait).
func (c *compiler) predicate(j, op string, v *Value) string {
	switch op {
	case "exists":
		return c.present(j)
	case "not_exists":
		return "NOT COALESCE(" + c.present(j) + ", FALSE)"
	case "contains":
		return fmt.Sprintf("STRPOS(LOWER(%s), LOWER(%s)) > 0", c.textOf(j), c.typed(c.bind(v.Str), "text"))
	case "starts_with":
		return fmt.Sprintf("STARTS_WITH(LOWER(%s), LOWER(%s))", c.textOf(j), c.typed(c.bind(v.Str), "text"))
	case "in":
		vals := make([]string, len(v.List))
		for i, x := range v.List {
			vals[i] = x.Text()
		}
		ph := c.typed(c.bind(vals), "text[]")
		if c.d == Postgres {
			return fmt.Sprintf("%s = ANY(%s)", c.textOf(j), ph)
		}
		return fmt.Sprintf("%s IN UNNEST(%s)", c.textOf(j), ph)
	case "gt", "gte", "lt", "lte":
		return fmt.Sprintf("%s %s %s", c.numOf(j), sqlOp[op], c.typed(c.bind(v.Num), "numeric"))
	case "eq", "neq":
		var lhs, rhs string
		if v.Kind == KindNumber {
			lhs, rhs = c.numOf(j), c.typed(c.bind(v.Num), "numeric")
		} else {
			lhs, rhs = c.textOf(j), c.typed(c.bind(v.Text()), "text")
		}
		if op == "eq" {
			return lhs + " = " + rhs
		}
		return lhs + " IS DISTINCT FROM " + rhs
	}
	panic("segment: unknown operator " + op)
}

// expr compiles a node to a two-valued boolean over the row alias (a: aggregates only; u: a
// universe row with the aggregates left-joined as columns a0, a1, ...).
func (c *compiler) expr(n *Node, row string) string {
	var s string
	if n.IsGroup() {
		parts := make([]string, len(n.Conditions))
		for i := range n.Conditions {
			parts[i] = c.expr(&n.Conditions[i], row)
		}
		s = "(" + strings.Join(parts, " "+n.Logic+" ") + ")"
	} else {
		s = "COALESCE(" + c.leaf(n, row) + ", FALSE)"
	}
	if n.Negate {
		return "NOT " + s
	}
	return s
}

func (c *compiler) leaf(n *Node, row string) string {
	if c.d == Postgres {
		// Every raw-event aggregate lives in source a; rollups in their own sources.
		row = "a"
		if expr, src, ok := c.rollupLeaf(n); ok {
			c.nodeSource[n] = src
			return expr
		}
		switch n.Type {
		case TypeMonetary, TypeFrequency, TypeEventProperty:
			c.nodeSource[n] = "a"
		}
	}
	col := func(alias string) string { return row + "." + alias }
	switch n.Type {
	case TypeMonetary:
		filter := c.window(n)
		num := c.numOf(c.jsonAt("e.payload", n.Property))
		fn, arg := strings.ToUpper(n.Metric), num
		if n.Metric == "count" {
			fn = "COUNT"
		}
		a := col(c.aggregate(fn, arg, n.EventType, filter))
		if n.Metric == "sum" || n.Metric == "count" {
			a = "COALESCE(" + a + ", 0)"
		}
		return fmt.Sprintf("%s %s %s", a, sqlOp[n.Operator], c.typed(c.bind(n.Value.Num), "numeric"))
	case TypeFrequency:
		filter := c.window(n)
		a := "COALESCE(" + col(c.aggregate("COUNT", "*", n.EventType, filter)) + ", 0)"
		return fmt.Sprintf("%s %s %s", a, sqlOp[n.Operator], c.typed(c.bind(int64(n.Value.Num)), "bigint"))
	case TypeRecency:
		days := *n.WindowDays
		cut := c.now.Add(-time.Duration(days) * day)
		cut1 := c.now.Add(-time.Duration(days+1) * day)
		var filter string
		if n.Operator == "lt" || n.Operator == "lte" {
			// Only events after the cut can satisfy it: a bounded scan.
			filter = "e.occurred_at >= " + c.typed(c.bind(cut1), "timestamptz")
			c.noteLower(cut1)
		} else {
			c.boundedAll = false
		}
		a := col(c.aggregate("MAX", "e.occurred_at", n.EventType, filter))
		ph := c.typed(c.bind(cut), "timestamptz")
		switch n.Operator {
		case "gt":
			return a + " < " + ph
		case "gte":
			return a + " <= " + ph
		case "lt":
			return a + " > " + ph
		case "lte":
			return a + " >= " + ph
		case "eq":
			return fmt.Sprintf("(%s <= %s AND %s > %s)", a, ph, a, c.typed(c.bind(cut1), "timestamptz"))
		default: // neq
			return fmt.Sprintf("(%s > %s OR %s <= %s)", a, ph, a, c.typed(c.bind(cut1), "timestamptz"))
		}
	case TypeEventProperty:
		filter := c.window(n)
		pred := "COALESCE(" + c.predicate(c.jsonAt("e.payload", n.Property), n.Operator, n.Value) + ", FALSE)"
		return col(c.aggregate("BOOL_OR", pred, n.EventType, filter))
	case TypeTrait:
		if c.d == Postgres {
			return c.predicate(c.jsonAt("u.traits", n.Trait), n.Operator, n.Value)
		}
		// BigQuery: a trait is its latest value among the user's context_identified events.
		j := c.jsonAt("e.payload", n.Trait)
		cond := "e.event_type = 'context_identified' AND " + j + " IS NOT NULL AND " + c.present(j)
		key := "TRAIT|" + j
		alias, ok := "", false
		if i, seen := c.aggIndex[key]; seen {
			alias, ok = c.aggs[i].alias, true
		}
		if !ok {
			alias = "a" + strconv.Itoa(len(c.aggs))
			c.aggIndex[key] = len(c.aggs)
			c.aggs = append(c.aggs, agg{alias: alias, bq: fmt.Sprintf("ARRAY_AGG(IF(%s, %s, NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)]", cond, j)})
		}
		return c.predicate(col(alias), n.Operator, n.Value)
	case TypeInSegment:
		if c.d == Postgres {
			// The user column stays outside the subquery: an unqualified user_id inside it would
			// be m.user_id.
			return fmt.Sprintf("%s IN (SELECT m.user_id FROM segment_members m WHERE m.tenant_id = %s AND m.segment_id = %s)",
				userColumn, c.tenant, c.typed(c.bind(n.SegmentID), "bigint"))
		}
		name := "seg" + strconv.FormatInt(n.SegmentID, 10)
		if c.segParams == nil {
			c.segParams = map[string]int64{}
		}
		c.segParams[name] = n.SegmentID
		return fmt.Sprintf("%s.user_id IN UNNEST(@%s)", row, name)
	}
	panic("segment: unknown condition type " + n.Type)
}

func (c *compiler) aggSelect(bq bool) string {
	parts := make([]string, len(c.aggs))
	for i, a := range c.aggs {
		e := a.pg
		if bq {
			e = a.bq
		}
		parts[i] = e + " AS " + a.alias
	}
	return strings.Join(parts, ",\n    ")
}

// userColumn stands for the row's user id in a Postgres WHERE clause until the FROM clause is
// known (u.user_id over the universe, the join's user_id otherwise).
const userColumn = "\x00user\x00"

// rollupLeaf compiles the Postgres conditions the per-user rollups answer: monetary and frequency
// without a window, and every recency condition (it needs only the latest occurred_at).
func (c *compiler) rollupLeaf(n *Node) (string, string, bool) {
	windowed := n.WindowDays != nil || len(n.BetweenDays) == 2
	switch {
	case n.Type == TypeRecency:
		s := c.eventStats(n.EventType)
		a := s + ".last_at"
		days := *n.WindowDays
		ph := c.typed(c.bind(c.now.Add(-time.Duration(days)*day)), "timestamptz")
		ph1 := func() string { return c.typed(c.bind(c.now.Add(-time.Duration(days+1)*day)), "timestamptz") }
		switch n.Operator {
		case "gt":
			return a + " < " + ph, s, true
		case "gte":
			return a + " <= " + ph, s, true
		case "lt":
			return a + " > " + ph, s, true
		case "lte":
			return a + " >= " + ph, s, true
		case "eq":
			return fmt.Sprintf("(%s <= %s AND %s > %s)", a, ph, a, ph1()), s, true
		default: // neq
			return fmt.Sprintf("(%s > %s OR %s <= %s)", a, ph, a, ph1()), s, true
		}
	case n.Type == TypeFrequency && !windowed:
		s := c.eventStats(n.EventType)
		return fmt.Sprintf("COALESCE(%s.events, 0) %s %s", s, sqlOp[n.Operator], c.typed(c.bind(int64(n.Value.Num)), "bigint")), s, true
	case n.Type == TypeMonetary && !windowed:
		s := c.propertyStats(n.EventType, n.Property)
		var a string
		switch n.Metric {
		case "sum":
			a = "COALESCE(" + s + ".total, 0)"
		case "count":
			a = "COALESCE(" + s + ".n, 0)"
		case "avg":
			a = s + ".total / NULLIF(" + s + ".n, 0)"
		default:
			a = s + "." + n.Metric
		}
		return fmt.Sprintf("%s %s %s", a, sqlOp[n.Operator], c.typed(c.bind(n.Value.Num), "numeric")), s, true
	}
	return "", "", false
}

func (c *compiler) addSource(key, sql string) string {
	if i, ok := c.sourceIndex[key]; ok {
		return c.sources[i].alias
	}
	alias := "s" + strconv.Itoa(len(c.sources))
	if key == "raw" {
		alias = "a"
	}
	c.sourceIndex[key] = len(c.sources)
	c.sources = append(c.sources, source{alias: alias, sql: sql})
	return alias
}

func (c *compiler) eventStats(eventType string) string {
	et := c.typed(c.bind(eventType), "text")
	// Rows left under a linked id (a load racing the link's merge) add into the user's.
	return c.addSource("events|"+et, fmt.Sprintf("SELECT %s AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at\n  FROM warehouse.user_event_stats r%s\n  WHERE r.tenant_id = %s AND r.event_type = %s\n  GROUP BY 1",
		canonicalOf("r"), c.linkJoin("r"), c.tenant, et))
}

func (c *compiler) propertyStats(eventType, property string) string {
	et, p := c.typed(c.bind(eventType), "text"), c.typed(c.bind(property), "text")
	return c.addSource("props|"+et+"|"+p, fmt.Sprintf("SELECT %s AS user_id, SUM(r.n)::bigint AS n, SUM(r.total) AS total, MIN(r.min) AS min, MAX(r.max) AS max\n  FROM warehouse.user_property_stats r%s\n  WHERE r.tenant_id = %s AND r.event_type = %s AND r.property = %s\n  GROUP BY 1",
		canonicalOf("r"), c.linkJoin("r"), c.tenant, et, p))
}

// canonicalOf is the canonical user of row alias r's subject, given linkJoin's join.
func canonicalOf(r string) string {
	return "COALESCE(l.user_id, " + r + ".user_id)"
}

// linkJoin joins row alias r's subject to its link in the tenant's identity graph (Postgres).
func (c *compiler) linkJoin(r string) string {
	return fmt.Sprintf("\n    LEFT JOIN identity_links l ON l.tenant_id = %s AND l.anonymous_id = %s.user_id", c.tenant, r)
}

// universe is the tenant's users from the profile store (Postgres): every profile of an id that
// is not linked, and, for a user whose own profile is missing (a load racing the link's merge),
// the latest profile of its linked ids.
func (c *compiler) universe() string {
	return fmt.Sprintf(`(
  SELECT p.user_id, p.traits FROM profiles p
  WHERE p.tenant_id = %[1]s
    AND NOT EXISTS (SELECT 1 FROM identity_links x WHERE x.tenant_id = %[1]s AND x.anonymous_id = p.user_id)
  UNION ALL
  (SELECT DISTINCT ON (l.user_id) l.user_id, p.traits
  FROM identity_links l JOIN profiles p ON p.tenant_id = l.tenant_id AND p.user_id = l.anonymous_id
  WHERE l.tenant_id = %[1]s
    AND NOT EXISTS (SELECT 1 FROM profiles o WHERE o.tenant_id = %[1]s AND o.user_id = l.user_id)
  ORDER BY l.user_id, p.last_seen_at DESC)
) u`, c.tenant)
}

func (c *compiler) postgresSQL(where string) string {
	var b strings.Builder
	if len(c.aggs) > 0 {
		var raw strings.Builder
		fmt.Fprintf(&raw, "SELECT %s AS user_id,\n    %s\n  FROM warehouse.events e%s\n  WHERE e.tenant_id = %s\n    AND e.event_type = ANY(%s)",
			canonicalOf("e"), c.aggSelect(false), c.linkJoin("e"), c.tenant, c.typed(c.bind(c.rawTypeList), "text[]"))
		if c.boundedAll && !c.lower.IsZero() {
			fmt.Fprintf(&raw, "\n    AND e.occurred_at >= %s", c.typed(c.bind(c.lower), "timestamptz"))
		}
		raw.WriteString("\n  GROUP BY 1")
		c.addSource("raw", raw.String())
	}
	if len(c.sources) > 0 {
		b.WriteString("WITH ")
		for i, src := range c.sources {
			if i > 0 {
				b.WriteString(",\n")
			}
			fmt.Fprintf(&b, "%s AS (\n  %s\n)", src.alias, src.sql)
		}
		b.WriteString("\n")
	}
	user := "user_id"
	switch {
	case c.needUniverse || len(c.sources) == 0:
		user = "u.user_id"
		fmt.Fprintf(&b, "SELECT u.user_id\nFROM %s", c.universe())
		for _, src := range c.sources {
			fmt.Fprintf(&b, "\n  LEFT JOIN %s ON %s.user_id = u.user_id", src.alias, src.alias)
		}
		fmt.Fprintf(&b, "\nWHERE %s", where)
	default:
		// Required sources first, inner-joined; the others left-joined to them, or, with none
		// required, all full-joined (a match may come from any of them).
		var req, opt []string
		for _, src := range c.sources {
			if c.required[src.alias] {
				req = append(req, src.alias)
			} else {
				opt = append(opt, src.alias)
			}
		}
		join := " LEFT JOIN "
		if len(req) == 0 {
			join = " FULL JOIN "
			req, opt = opt[:1], opt[1:]
		}
		fmt.Fprintf(&b, "SELECT user_id\nFROM %s", req[0])
		for _, a := range req[1:] {
			fmt.Fprintf(&b, "\n  JOIN %s USING (user_id)", a)
		}
		for _, a := range opt {
			fmt.Fprintf(&b, "\n %s%s USING (user_id)", join, a)
		}
		fmt.Fprintf(&b, "\nWHERE %s", where)
	}
	return strings.ReplaceAll(b.String(), userColumn, user)
}

func (c *compiler) bigquerySQL(where string) string {
	var b strings.Builder
	table := "`" + c.o.Table + "`"
	// The tenant's identity graph: an id links to the user of its first link (rows may repeat
	// like events do). Each event's user_id becomes its subject's canonical user.
	fmt.Fprintf(&b, "WITH l AS (\n  SELECT anonymous_id, ARRAY_AGG(user_id ORDER BY linked_at LIMIT 1)[OFFSET(0)] AS user_id\n  FROM `%s`\n  WHERE tenant_id = %s\n  GROUP BY anonymous_id\n),\n", c.o.LinksTable, c.tenant)
	// Rows may repeat after a redelivery outside BigQuery's insertId window: dedupe on event_id.
	fmt.Fprintf(&b, "e AS (\n  SELECT r.* REPLACE (COALESCE(l.user_id, r.user_id) AS user_id)\n  FROM %s r\n    LEFT JOIN l ON l.anonymous_id = r.user_id\n  WHERE r.tenant_id = %s", table, c.tenant)
	bounded := !c.needUniverse && len(c.aggs) > 0
	if bounded {
		fmt.Fprintf(&b, "\n    AND r.event_type IN UNNEST(%s)", c.bind(c.types))
		if c.boundedAll && !c.lower.IsZero() {
			fmt.Fprintf(&b, "\n    AND r.occurred_at >= %s", c.bind(c.lower))
		}
	}
	b.WriteString("\n  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1\n)")
	if len(c.aggs) == 0 {
		fmt.Fprintf(&b, "\nSELECT u.user_id\nFROM (SELECT DISTINCT e.user_id FROM e) u\nWHERE %s", where)
		return b.String()
	}
	row := "a"
	if c.needUniverse {
		row = "u"
	}
	fmt.Fprintf(&b, ",\n%s AS (\n  SELECT e.user_id,\n    %s\n  FROM e\n  GROUP BY e.user_id\n)\nSELECT %s.user_id\nFROM %s\nWHERE %s", row, c.aggSelect(true), row, row, where)
	return b.String()
}

// evalEmpty reports whether a node can hold for a user the scanned events never show: a user with
// no events, no traits and any segment memberships (a member of a segment may have no events, so
// an in_segment leaf counts as either outcome).
func evalEmpty(n *Node) bool {
	canTrue, _ := emptyOutcomes(n)
	return canTrue
}

// emptyOutcomes reports whether the node can be true and whether it can be false for such a user.
func emptyOutcomes(n *Node) (canTrue, canFalse bool) {
	if n.IsGroup() {
		and := n.Logic == "AND"
		canTrue, canFalse = and, !and
		for i := range n.Conditions {
			t, f := emptyOutcomes(&n.Conditions[i])
			if and {
				canTrue, canFalse = canTrue && t, canFalse || f
			} else {
				canTrue, canFalse = canTrue || t, canFalse && f
			}
		}
	} else {
		var v bool
		switch n.Type {
		case TypeInSegment:
			canTrue, canFalse = true, true
		case TypeMonetary:
			v = (n.Metric == "sum" || n.Metric == "count") && compareNum(0, n.Operator, n.Value.Num)
		case TypeFrequency:
			v = compareNum(0, n.Operator, n.Value.Num)
		case TypeTrait:
			v = n.Operator == "not_exists" || n.Operator == "neq"
		}
		if n.Type != TypeInSegment {
			canTrue, canFalse = v, !v
		}
	}
	if n.Negate {
		return canFalse, canTrue
	}
	return canTrue, canFalse
}

func compareNum(a float64, op string, b float64) bool {
	switch op {
	case "gt":
		return a > b
	case "gte":
		return a >= b
	case "lt":
		return a < b
	case "lte":
		return a <= b
	case "eq":
		return a == b
	case "neq":
		return a != b
	}
	return false
}

// Display returns the SQL with its parameters inlined as literals of the dialect, for people to
// read (the preview's sql). It is never executed.
func (q *Query) Display() string {
	byName := map[string]any{}
	for _, p := range q.Params {
		byName[p.Name] = p.Value
	}
	re := placeholderPG
	if q.Dialect == BigQuery {
		re = placeholderBQ
	}
	return re.ReplaceAllStringFunc(q.SQL, func(ph string) string {
		name := ph[1:]
		if v, ok := byName[name]; ok {
			return literal(q.Dialect, v)
		}
		if id, ok := q.SegmentParams[name]; ok {
			return fmt.Sprintf("@%s /* members of segment %d, bound at run time */", name, id)
		}
		return ph
	})
}

var (
	placeholderPG = regexp.MustCompile(`\$[0-9]+`)
	placeholderBQ = regexp.MustCompile(`@[A-Za-z][A-Za-z0-9_]*`)
)

func literal(d Dialect, v any) string {
	switch x := v.(type) {
	case string:
		return quote(d, x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return formatNumber(x)
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		ts := x.UTC().Format("2006-01-02 15:04:05.999999Z07:00")
		if d == Postgres {
			return "'" + ts + "'"
		}
		return "TIMESTAMP '" + ts + "'"
	case []string:
		parts := make([]string, len(x))
		for i, s := range x {
			parts[i] = quote(d, s)
		}
		if d == Postgres {
			return "ARRAY[" + strings.Join(parts, ", ") + "]"
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return "NULL"
}

// quote makes a string literal: Postgres doubles quotes (standard_conforming_strings); BigQuery
// escapes with backslashes.
func quote(d Dialect, s string) string {
	if d == Postgres {
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		switch r {
		case '\'', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('\'')
	return b.String()
}
