package api

import (
	"bytes"
	"github.com/cohort-dev/cohort/internal/ingest/segmentcompat"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/cohort-dev/cohort/internal/aispend"
	"github.com/cohort-dev/cohort/internal/pagehost"
)

// openAPIDoc is the part of openapi.yaml the tests read.
type openAPIDoc struct {
	OpenAPI    string                          `yaml:"openapi"`
	Security   []map[string][]string           `yaml:"security"`
	Paths      map[string]map[string]yaml.Node `yaml:"paths"`
	Components struct {
		SecuritySchemes map[string]yaml.Node `yaml:"securitySchemes"`
	} `yaml:"components"`
}

type openAPIParam struct {
	Name string `yaml:"name"`
	In   string `yaml:"in"`
}

type openAPIOp struct {
	// Security is nil when the operation does not set it (the document's default applies) and
	// an empty list for a public operation.
	Security   *[]map[string][]string `yaml:"security"`
	Parameters []openAPIParam         `yaml:"parameters"`
	Responses  map[string]yaml.Node   `yaml:"responses"`
}

var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func loadOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := yaml.Unmarshal(OpenAPISpec(), &doc); err != nil {
		t.Fatalf("openapi.yaml does not parse as YAML: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") || len(doc.Paths) == 0 {
		t.Fatalf("openapi.yaml: openapi %q with %d paths; want an OpenAPI 3 document", doc.OpenAPI, len(doc.Paths))
	}
	return doc
}

// op decodes one operation; ok is false when the path has no such method.
func (d openAPIDoc) op(t *testing.T, path, method string) (openAPIOp, bool) {
	t.Helper()
	item, ok := d.Paths[path]
	if !ok {
		return openAPIOp{}, false
	}
	n, ok := item[strings.ToLower(method)]
	if !ok {
		return openAPIOp{}, false
	}
	var op openAPIOp
	if err := n.Decode(&op); err != nil {
		t.Fatalf("openapi.yaml %s %s: %v", method, path, err)
	}
	return op, true
}

// schemes is the set of security schemes an operation accepts; empty means public.
func (d openAPIDoc) schemes(op openAPIOp) []string {
	reqs := d.Security
	if op.Security != nil {
		reqs = *op.Security
	}
	var out []string
	for _, req := range reqs {
		for name := range req {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// allRouteGroups sets every nil pointer field of Deps whose type is declared in this package (the
// optional route groups, such as Ingest) to a zero value, so that the server registers every route
// it can. Only registration and the authentication in front of handlers run against these.
func allRouteGroups(d *Deps) {
	if d.Spend == nil {
		d.Spend = &aispend.Service{} // registers GET /api/usage/
	}
	v := reflect.ValueOf(d).Elem()
	pkg := v.Type().PkgPath()
	for i := range v.NumField() {
		fv := v.Field(i)
		ft := fv.Type()
		if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct && ft.Elem().PkgPath() == pkg && fv.IsNil() && fv.CanSet() {
			fv.Set(reflect.New(ft.Elem()))
		}
	}
	if d.Pages != nil && d.Pages.Hosted == nil { // the /p/ routes are mounted only with it
		d.Pages.Hosted = &pagehost.Service{}
	}
	if d.Ingest != nil && d.Ingest.Segment == nil { // the /v1 routes are mounted only with it
		d.Ingest.Segment = &segmentcompat.Service{}
	}
}

var ginParamRE = regexp.MustCompile(`[:*]([A-Za-z0-9_]+)`)

// openAPIPath turns a Gin template (/a/:id/*key) into the OpenAPI form (/a/{id}/{key}).
func openAPIPath(ginPath string) string { return ginParamRE.ReplaceAllString(ginPath, "{$1}") }

// concretePath fills a Gin template with sample values.
func concretePath(ginPath string) string {
	return ginParamRE.ReplaceAllStringFunc(ginPath, func(m string) string {
		if m[0] == '*' {
			return "probe/x"
		}
		return "1"
	})
}

// TestOpenAPIContract: the router and openapi.yaml list the same operations, the file parses, its
// path parameters and security schemes are declared, and /openapi.yaml serves it.
func TestOpenAPIContract(t *testing.T) {
	f := newFixture(t)
	s := f.newServer(t, allRouteGroups)
	doc := loadOpenAPI(t)

	registered := map[string]bool{}
	for _, r := range s.Routes() {
		key := r.Method + " " + openAPIPath(r.Path)
		registered[key] = true
		t.Run("route "+r.Method+" "+r.Path, func(t *testing.T) {
			if _, ok := doc.op(t, openAPIPath(r.Path), r.Method); !ok {
				t.Fatalf("registered route %s %s is missing from openapi.yaml as %s", r.Method, r.Path, key)
			}
		})
	}
	if len(registered) == 0 {
		t.Fatal("no routes registered")
	}

	paramRE := regexp.MustCompile(`\{([^}]+)\}`)
	for path, item := range doc.Paths {
		for method := range item {
			if !slices.Contains(openAPIMethods, method) {
				continue // parameters, summary, servers ...
			}
			key := strings.ToUpper(method) + " " + path
			t.Run("spec "+key, func(t *testing.T) {
				if !registered[key] {
					t.Fatalf("openapi.yaml lists %s but the router does not register it", key)
				}
				op, _ := doc.op(t, path, method)
				var pathLevel struct {
					Parameters []openAPIParam `yaml:"parameters"`
				}
				if n, ok := item["parameters"]; ok {
					if err := n.Decode(&pathLevel.Parameters); err != nil {
						t.Fatalf("path parameters: %v", err)
					}
				}
				params := append(slices.Clone(op.Parameters), pathLevel.Parameters...)
				for _, m := range paramRE.FindAllStringSubmatch(path, -1) {
					if !slices.ContainsFunc(params, func(p openAPIParam) bool { return p.In == "path" && p.Name == m[1] }) {
						t.Errorf("path parameter %q is not declared (in: path)", m[1])
					}
				}
				for _, sc := range doc.schemes(op) {
					if _, ok := doc.Components.SecuritySchemes[sc]; !ok {
						t.Errorf("security scheme %q is not in components.securitySchemes", sc)
					}
				}
			})
		}
	}

	t.Run("served at /openapi.yaml", func(t *testing.T) {
		ts := serve(t, s)
		r := send(t, ts, http.MethodGet, "/openapi.yaml", nil, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("status %d", r.Status)
		}
		if ct := r.Header.Get("Content-Type"); !strings.Contains(ct, "yaml") {
			t.Errorf("Content-Type %q, want a YAML type", ct)
		}
		onDisk, err := os.ReadFile("openapi.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.Body, onDisk) {
			t.Error("served document differs from api/openapi.yaml")
		}
		var v map[string]any
		if err := yaml.Unmarshal(r.Body, &v); err != nil {
			t.Errorf("served document does not parse: %v", err)
		}
	})
}

// routeCred is a credential presented to real routes and the OpenAPI scheme that admits it.
type routeCred struct {
	name   string
	scheme string
	header http.Header
}

// authHeaderSchemes are the schemes read from the Authorization header by require().
var authHeaderSchemes = []string{"ApiKey", "PublicKey", "Bearer", "Session"}

// apiSchemes are all the schemes require() checks.
var apiSchemes = append(slices.Clone(authHeaderSchemes), "XAPIKey")

// TestAuthRealRoutes derives public and protected routes from openapi.yaml's per-operation
// security and checks every registered route: protected ones answer 401 without credentials and
// 403 for a valid credential whose scheme the operation does not list (a pk_ key anywhere but the
// handshake); public ones need none. New routes are covered by being in the contract.
func TestAuthRealRoutes(t *testing.T) {
	f := newFixture(t)
	s := f.newServer(t, allRouteGroups)
	ts := serve(t, s)
	doc := loadOpenAPI(t)
	creds := []routeCred{
		{name: "sk of A", scheme: "ApiKey", header: hdr("Authorization", "ApiKey "+f.A.SK)},
		{name: "pk of A", scheme: "PublicKey", header: hdr("Authorization", "ApiKey "+f.A.PK)},
		{name: "Bearer of A", scheme: "Bearer", header: hdr("Authorization", "Bearer "+f.A.Bearer)},
		{name: "session of A", scheme: "Session", header: hdr("Authorization", "Bearer "+f.A.Session)},
		{name: "X-API-Key sk of A", scheme: "XAPIKey", header: hdr("X-API-Key", f.A.SK)},
	}

	sawHandshake, sawPublic, sawProtected := false, false, false
	for _, rt := range s.Routes() {
		op, ok := doc.op(t, openAPIPath(rt.Path), rt.Method)
		if !ok {
			t.Errorf("%s %s is not in openapi.yaml (see TestOpenAPIContract)", rt.Method, rt.Path)
			continue
		}
		schemes := doc.schemes(op)
		target := concretePath(rt.Path)
		t.Run(rt.Method+" "+rt.Path, func(t *testing.T) {
			if len(schemes) == 0 {
				sawPublic = true
				for _, c := range []struct {
					name string
					h    http.Header
				}{{"none", nil}, {"garbage Authorization", hdr("Authorization", "Basic abc")}} {
					t.Run(c.name, func(t *testing.T) {
						r := send(t, ts, rt.Method, target, c.h, nil)
						if strings.Contains(r.Header.Get("WWW-Authenticate"), `realm="cohort"`) {
							t.Fatalf("public route asked for API credentials: %d %s", r.Status, r.Body)
						}
						if _, documented := op.Responses["401"]; r.Status == http.StatusUnauthorized && !documented {
							t.Fatalf("public route answered 401, which its operation does not document: %s", r.Body)
						}
					})
				}
				return
			}
			if !slices.ContainsFunc(schemes, func(s string) bool { return slices.Contains(apiSchemes, s) }) {
				// Authenticated by a scheme of its own (a webhook's HMAC header): its handler, not
				// require(), answers, and needs its real dependencies; its own tests cover it.
				t.Skipf("security %v uses no API credential scheme", schemes)
			}
			sawProtected = true
			t.Run("none", func(t *testing.T) {
				r := send(t, ts, rt.Method, target, nil, nil)
				if r.Status != http.StatusUnauthorized {
					t.Fatalf("status %d, want 401; body %s", r.Status, r.Body)
				}
				if e := errorBody(t, r); e.Code != "unauthenticated" {
					t.Errorf("code %q, want unauthenticated", e.Code)
				}
				if r.Header.Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
			})
			if !slices.ContainsFunc(schemes, func(s string) bool { return slices.Contains(authHeaderSchemes, s) }) {
				return // only X-API-Key: Authorization-header credentials are not read
			}
			for _, c := range creds {
				accepted := slices.Contains(schemes, c.scheme)
				if accepted && c.scheme != "PublicKey" {
					// Reaching the handler needs its dependencies and a valid body; acceptance of
					// these kinds is covered per policy by TestAuthMatrix.
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					r := send(t, ts, rt.Method, target, c.header, nil)
					switch {
					case accepted: // the handshake takes a pk_ key
						sawHandshake = true
						if r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden || r.Status >= 500 {
							t.Fatalf("pk_ key on an operation that lists PublicKey: %d %s", r.Status, r.Body)
						}
					case c.scheme == "XAPIKey":
						if r.Status != http.StatusUnauthorized {
							t.Fatalf("X-API-Key where the operation does not list XAPIKey: status %d, want 401; body %s", r.Status, r.Body)
						}
						errorBody(t, r)
					default:
						if r.Status != http.StatusForbidden {
							t.Fatalf("%s where the operation lists only %v: status %d, want 403; body %s", c.scheme, schemes, r.Status, r.Body)
						}
						if e := errorBody(t, r); e.Code != "forbidden" {
							t.Errorf("code %q, want forbidden", e.Code)
						}
					}
				})
			}
		})
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/openapi.yaml", "/api/blobs/{key}"} {
		if op, ok := doc.op(t, path, http.MethodGet); !ok || len(doc.schemes(op)) != 0 {
			t.Errorf("GET %s must be public (security: []) in openapi.yaml", path)
		}
	}
	if !sawHandshake || !sawPublic || !sawProtected {
		t.Errorf("derivation looks wrong: handshake %v, public %v, protected %v", sawHandshake, sawPublic, sawProtected)
	}
}
