package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/jsontext"
)

// policy is the set of credential kinds an endpoint group accepts (api/openapi.yaml: the
// security of each operation).
type policy struct {
	name    string
	kinds   []auth.Kind
	xAPIKey bool // X-API-Key: sk_... accepted too (catalogue endpoints)
}

var (
	// POST /api/auth/session/: a public key, exchanged for a session token.
	policyHandshake = policy{name: "public key (ApiKey pk_)", kinds: []auth.Kind{auth.KindPublicKey}}
	// Introspection: any credential that can call the API.
	policyAnyCaller = policy{name: "ApiKey sk_, Bearer token or session token", kinds: []auth.Kind{auth.KindSecretKey, auth.KindBearer, auth.KindSession}}
	// Event ingestion: server-side secret keys, or the client library's session tokens.
	policyIngest = policy{name: "ApiKey sk_ or session token", kinds: []auth.Kind{auth.KindSecretKey, auth.KindSession}}
	// Stats, errors, segments: Bearer tokens only.
	policyBearer = policy{name: "Bearer token", kinds: []auth.Kind{auth.KindBearer}}
	// Per-user membership checks: secret keys only.
	policySecretKey = policy{name: "ApiKey sk_", kinds: []auth.Kind{auth.KindSecretKey}}
	// AI pages: Bearer or secret key.
	policyPages = policy{name: "Bearer token or ApiKey sk_", kinds: []auth.Kind{auth.KindBearer, auth.KindSecretKey}}
	// Catalogue: Bearer or a secret key in X-API-Key (or Authorization: ApiKey).
	policyCatalog = policy{name: "Bearer token or X-API-Key sk_", kinds: []auth.Kind{auth.KindBearer, auth.KindSecretKey}, xAPIKey: true}
)

// require authenticates the request and checks the credential kind against the policy:
// 401 for a missing, malformed, unknown, revoked or expired credential; 403 for a valid credential
// of a kind this endpoint does not accept (a pk_ key never reaches Bearer-only endpoints).
func (s *Server) require(p policy) gin.HandlerFunc {
	return func(c *gin.Context) {
		cred, err := s.d.Auth.Authenticate(c.Request.Context(), c.GetHeader("Authorization"), c.GetHeader("X-API-Key"), p.xAPIKey)
		if err != nil {
			abort(c, err)
			return
		}
		c.Set(ctxPresented, cred)
		for _, k := range p.kinds {
			if cred.Kind == k {
				c.Set(ctxCred, cred)
				c.Next()
				return
			}
		}
		msg := "this endpoint accepts " + p.name + ", not a " + cred.Kind.String()
		if cred.Kind == auth.KindPublicKey {
			msg += "; exchange public keys for a session token at POST /api/auth/session/"
		}
		abort(c, errs.Coded(errs.ErrForbidden, "forbidden", "%s", msg))
	}
}

func credential(c *gin.Context) (auth.Credential, bool) {
	v, ok := c.Get(ctxCred)
	if !ok {
		return auth.Credential{}, false
	}
	cred, ok := v.(auth.Credential)
	return cred, ok
}

// mustCredential returns the credential set by require; handlers behind require always have one.
func mustCredential(c *gin.Context) auth.Credential {
	cred, _ := credential(c)
	return cred
}

// startSession: POST /api/auth/session/ exchanges a pk_ key for a short-lived session token.
func (s *Server) startSession(c *gin.Context) {
	var req auth.SessionRequest
	if err := bindOptionalJSON(c, &req); err != nil {
		abort(c, err)
		return
	}
	sess, err := s.d.Auth.StartSession(c.Request.Context(), mustCredential(c), req)
	if err != nil {
		abort(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, sess)
}

type whoamiResponse struct {
	TenantID   int64  `json:"tenant_id"`
	TenantSlug string `json:"tenant_slug"`
	Credential string `json:"credential"` // secret_key | bearer | session
	KeyID      string `json:"key_id,omitempty"`
	UserID     string `json:"user_id,omitempty"`
}

// whoami: GET /api/auth/whoami/ tells a caller which tenant and credential it is using.
func (s *Server) whoami(c *gin.Context) {
	cred := mustCredential(c)
	kind := map[auth.Kind]string{auth.KindSecretKey: "secret_key", auth.KindBearer: "bearer", auth.KindSession: "session"}[cred.Kind]
	c.JSON(http.StatusOK, whoamiResponse{TenantID: cred.TenantID, TenantSlug: cred.TenantSlug, Credential: kind, KeyID: cred.KeyID, UserID: cred.UserID})
}

// bindOptionalJSON decodes a JSON object body when there is one; an empty body leaves v as is.
func bindOptionalJSON(c *gin.Context, v any) error { return decodeJSONBody(c, v, false) }

// bindStrictJSON decodes a required JSON object body, refusing unknown fields (400 naming the field).
func bindStrictJSON(c *gin.Context, v any) error { return decodeJSONBody(c, v, true) }

// errNotObject answers a body that is not a JSON object: missing where one is required, or null.
func errNotObject() error {
	return &errs.ValidationError{Code: "invalid_json", Msg: "request body must be a JSON object"}
}

// decodeJSONBody decodes exactly one JSON object from the body into v (a struct or map). strict:
// the body is required and unknown fields are refused. A body of JSON null is refused: decoding it
// would leave v as is and read as {} (a PUT of null would reset what it replaces).
func decodeJSONBody(c *gin.Context, v any, strict bool) error {
	if c.Request.Body == nil || c.Request.ContentLength == 0 {
		if strict {
			return errNotObject()
		}
		return nil
	}
	raw, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return jsonError(err)
	}
	body := bytes.TrimLeft(raw, " \t\n\r")
	if len(body) == 0 {
		if strict { // empty or whitespace only
			return errNotObject()
		}
		return nil
	}
	if err := checkJSONText(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		if rest, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			field := strings.Trim(rest, `"`)
			return &errs.ValidationError{Code: "invalid_json", Msg: "request body has an unknown field", Fields: map[string]string{field: "is not a field of this request"}}
		}
		return jsonError(err)
	}
	// The one JSON value that starts with 'n' is null.
	if body[0] == 'n' {
		return errNotObject()
	}
	// One JSON value and nothing after it.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &errs.ValidationError{Code: "invalid_json", Msg: "request body has data after the JSON value"}
	}
	return nil
}

// checkJSONText refuses a JSON body whose strings are not valid UTF-8 (raw invalid bytes or
// unpaired surrogate escapes), naming the field: encoding/json would store them as U+FFFD. It is
// the one rule for every JSON body the API reads, the rule ingestion follows.
func checkJSONText(body []byte) error {
	off := jsontext.Check(body)
	if off < 0 {
		return nil
	}
	field := jsontext.PathAt(body, off)
	if field == "" {
		field = "body"
	}
	return &errs.ValidationError{Code: "invalid_json", Msg: "request body has text that is not valid UTF-8",
		Fields: map[string]string{field: jsontext.Problem}}
}

// jsonError turns a decoding error into a 400 naming the field when it can.
func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		return &errs.ValidationError{Code: "invalid_json", Msg: "request body has a field of the wrong type",
			Fields: map[string]string{field: "must be " + jsonTypeName(typeErr.Type.Kind().String())}}
	case errors.As(err, &syntaxErr):
		return &errs.ValidationError{Code: "invalid_json", Msg: "request body is not valid JSON: " + syntaxErr.Error()}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &errs.ValidationError{Code: "invalid_json", Msg: "request body is empty or truncated"}
	}
	return &errs.ValidationError{Code: "invalid_json", Msg: "request body is not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	}
	return "of type " + kind
}
