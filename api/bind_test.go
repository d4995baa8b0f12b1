package api

import (
	"errors"
	"net/http"
	"net/http/httptest"
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
