package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/errs"
)

func TestBindJSON(t *testing.T) {
	type body struct {
		Name string `json:"name"`
	}
	cases := []struct {
		name      string
		body      string
		strict    bool
		wantErr   bool
		wantField string
	}{
		{"optional: empty body is fine", "", false, false, ""},
		{"strict: empty body is refused", "", true, true, ""},
		{"strict: whitespace only is refused", "  \n", true, true, ""},
		{"optional: unknown fields are ignored", `{"name":"a","x":1}`, false, false, ""},
		{"strict: unknown field named", `{"name":"a","x":1}`, true, true, "x"},
		{"strict: trailing brace refused", `{"name":"a"}}`, true, true, ""},
		{"optional: trailing value refused", `{"name":"a"} {}`, false, true, ""},
		{"wrong type names the field", `{"name":5}`, true, true, "name"},
		{"valid", `{"name":"a"}`, true, false, ""},
		{"valid with surrounding whitespace", " \n\t{\"name\":\"a\"}\r\n ", true, false, ""},
		{"strict: null is refused", `null`, true, true, ""},
		{"optional: null is refused", `null`, false, true, ""},
		{"strict: null in whitespace is refused", " \r\n\tnull \n", true, true, ""},
		{"optional: null in whitespace is refused", "\n null\t", false, true, ""},
		{"strict: nul is not JSON", `nul`, true, true, ""},
		{"strict: null followed by an object is refused", `null {}`, true, true, ""},
		{"strict: an array is refused", `[]`, true, true, ""},
		{"strict: a string is refused", `"x"`, true, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := gin.CreateTestContext(httptest.NewRecorder())
			c.Request = httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.body))
			var b body
			bind := bindOptionalJSON
			if tc.strict {
				bind = bindStrictJSON
			}
			err := bind(c, &b)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want error %v", err, tc.wantErr)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("error %v is not a validation error", err)
			}
			var ve *errs.ValidationError
			if tc.wantField != "" && (!errors.As(err, &ve) || ve.Fields[tc.wantField] == "") {
				t.Fatalf("error %v does not name field %q", err, tc.wantField)
			}
		})
	}
}

// TestNullBodyRefused: a body of JSON null is a 400 in the one error shape on every endpoint that
// binds a JSON object, and changes nothing (a PUT of null used to reset the schema to defaults).
func TestNullBodyRefused(t *testing.T) {
	f, ts := catalogServer(t)
	const schema = `{"fields":[{"name":"color","type":"string","facet":true}],"default_currency":"EUR","default_locale":"de-DE"}`
	ok(t, jsonCall(t, ts, http.MethodPut, "/api/pim/schema/", xAPIKey(f.A), schema), http.StatusOK, nil)
	var p struct {
		ID int64 `json:"id"`
	}
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/pim/products/", xAPIKey(f.A), `{"sku":"RED-1","name":"Red","data":{"color":"red"}}`), http.StatusCreated, &p)
	snapshot := func() (string, string) {
		t.Helper()
		s := send(t, ts, http.MethodGet, "/api/pim/schema/", xAPIKey(f.A), nil)
		ok(t, s, http.StatusOK, nil)
		pr := send(t, ts, http.MethodGet, fmt.Sprintf("/api/pim/products/%d/", p.ID), xAPIKey(f.A), nil)
		ok(t, pr, http.StatusOK, nil)
		return canonJSON(t, s.Body), canonJSON(t, pr.Body)
	}
	schemaBefore, productBefore := snapshot()

	tests := []struct {
		name   string
		method string
		path   string
		h      http.Header
	}{
		{name: "PUT schema", method: http.MethodPut, path: "/api/pim/schema/", h: xAPIKey(f.A)},
		{name: "PUT schema with a Bearer token", method: http.MethodPut, path: "/api/pim/schema/", h: bearer(f.A)},
		{name: "POST product", method: http.MethodPost, path: "/api/pim/products/", h: xAPIKey(f.A)},
		{name: "PATCH product", method: http.MethodPatch, path: fmt.Sprintf("/api/pim/products/%d/", p.ID), h: xAPIKey(f.A)},
		{name: "POST products bulk", method: http.MethodPost, path: "/api/pim/products/bulk/", h: xAPIKey(f.A)},
		{name: "POST session handshake (optional body)", method: http.MethodPost, path: "/api/auth/session/", h: hdr("Authorization", "ApiKey "+f.A.PK)},
	}
	for _, tt := range tests {
		for _, body := range []string{"null", " \n\tnull\r\n "} {
			t.Run(tt.name+" "+strconv.Quote(body), func(t *testing.T) {
				r := jsonCall(t, ts, tt.method, tt.path, tt.h, body)
				e := wantError(t, r, http.StatusBadRequest, "invalid_json")
				if e.Message != "request body must be a JSON object" {
					t.Errorf("message %q", e.Message)
				}
			})
		}
	}
	if s, pr := snapshot(); s != schemaBefore || pr != productBefore {
		t.Fatalf("null bodies changed state:\nschema  %s\nwas     %s\nproduct %s\nwas     %s", s, schemaBefore, pr, productBefore)
	}
}
