package connector

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/cohort-dev/cohort/internal/errs"
)

// Connector kinds (the "kind" of the API).
const (
	KindKlaviyo  = "klaviyo"
	KindBraze    = "braze"
	KindTalonOne = "talon_one"
)

// Kinds lists the connector kinds.
var Kinds = []string{KindKlaviyo, KindBraze, KindTalonOne}

// Masked is how every secret config field is returned; a PATCH sending it keeps the stored value.
const Masked = "***"

type fieldType int

const (
	typeString fieldType = iota
	typeURL
	typeID     // a short identifier: letters, digits, _ . -
	typeInt    // a positive integer (number or numeric string)
	typeSecret // a credential: stored sealed, returned as ***
)

type fieldSpec struct {
	name     string
	required bool
	typ      fieldType
	help     string
}

// specs are the config fields of each kind, in the order the API documents them.
var specs = map[string][]fieldSpec{
	KindKlaviyo: {
		{name: "list_id", required: true, typ: typeID, help: "the Klaviyo list id (Lists > list > Settings)"},
		{name: "api_key", required: true, typ: typeSecret, help: "a Klaviyo private API key (lists and profiles write scopes)"},
	},
	KindBraze: {
		{name: "rest_endpoint", required: true, typ: typeURL, help: "your Braze REST endpoint, e.g. https://rest.iad-01.braze.com"},
		{name: "api_key", required: true, typ: typeSecret, help: "a Braze REST API key with users.track"},
		{name: "segment_id", typ: typeString, help: "the Braze segment built on the attribute (recorded, not called)"},
		{name: "attribute", typ: typeID, help: "the boolean custom attribute carrying membership"},
	},
	KindTalonOne: {
		{name: "base_url", required: true, typ: typeURL, help: "your Talon.One deployment, e.g. https://yourbaseurl.talon.one"},
		{name: "api_key", required: true, typ: typeSecret, help: "an Integration API key (ApiKey-v1)"},
		{name: "audience_id", required: true, typ: typeInt, help: "the Talon.One audience id"},
	},
}

// IsSecretField says whether a config field holds a credential: api_key, client_secret and any
// field named like one (key, secret, token, password), whatever the kind.
func IsSecretField(name string) bool {
	n := strings.ToLower(name)
	if strings.HasSuffix(n, "_id") || strings.HasSuffix(n, "_url") || n == "attribute" {
		return false
	}
	for _, w := range []string{"key", "secret", "token", "password", "credential"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// DefaultBrazeAttribute is the Braze attribute of a segment when the config names none.
func DefaultBrazeAttribute(segmentID int64) string {
	return fmt.Sprintf("cohort_segment_%d", segmentID)
}

const (
	maxConfigString = 2048
	maxSecretLength = 4096
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.\-]{0,254}$`)

// configInput is the parsed config of a create or a PATCH: plain values (as they will be stored),
// secrets in clear (to be sealed), fields to drop (PATCH null) and fields to keep (PATCH ***).
type configInput struct {
	plain   map[string]any
	secrets map[string]string
	unset   []string
	keep    []string
}

// parseConfig checks a config object of kind field by field (errors keyed "config.<field>").
// patch allows null (remove an optional field) and *** on secrets (keep the stored value).
func parseConfig(kind string, raw json.RawMessage, patch, allowHTTP bool, f errs.Fields) configInput {
	in := configInput{plain: map[string]any{}, secrets: map[string]string{}}
	spec, ok := specs[kind]
	if !ok {
		return in
	}
	var obj map[string]json.RawMessage
	if len(raw) == 0 || string(raw) == "null" {
		if !patch {
			f.Add("config", "is required: an object with %s", fieldList(spec))
		}
		return in
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		f.Add("config", "must be an object with %s", fieldList(spec))
		return in
	}
	for name := range obj {
		if !slices.ContainsFunc(spec, func(s fieldSpec) bool { return s.name == name }) {
			f.Add("config."+name, "is not a %s config field (fields: %s)", kind, fieldList(spec))
		}
	}
	for _, s := range spec {
		key := "config." + s.name
		v, present := obj[s.name]
		if !present {
			if s.required && !patch {
				f.Add(key, "is required: %s", s.help)
			}
			continue
		}
		if string(v) == "null" {
			switch {
			case !patch:
				if s.required {
					f.Add(key, "is required: %s", s.help)
				}
			case s.required:
				f.Add(key, "is required and cannot be removed")
			default:
				in.unset = append(in.unset, s.name)
			}
			continue
		}
		if s.typ == typeInt {
			n, ok := positiveInt(v)
			if !ok {
				f.Add(key, "must be a positive integer: %s", s.help)
				continue
			}
			in.plain[s.name] = n
			continue
		}
		var str string
		if err := json.Unmarshal(v, &str); err != nil {
			f.Add(key, "must be a string: %s", s.help)
			continue
		}
		str = strings.TrimSpace(str)
		if s.typ == typeSecret {
			switch {
			case str == Masked && patch:
				in.keep = append(in.keep, s.name)
			case str == Masked:
				f.Add(key, "must be the credential itself, not %s", Masked)
			case str == "":
				f.Add(key, "is required: %s", s.help)
			case len(str) > maxSecretLength || strings.IndexFunc(str, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
				f.Add(key, "must be a key without spaces, at most %d characters", maxSecretLength)
			default:
				in.secrets[s.name] = str
			}
			continue
		}
		if msg := checkValue(s.typ, str, allowHTTP); msg != "" {
			f.Add(key, "%s: %s", msg, s.help)
			continue
		}
		if s.typ == typeURL {
			str = strings.TrimRight(str, "/")
		}
		in.plain[s.name] = str
	}
	return in
}

func checkValue(t fieldType, s string, allowHTTP bool) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > maxConfigString || !validText(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return fmt.Sprintf("must be text of at most %d characters", maxConfigString)
	}
	switch t {
	case typeID:
		if !idPattern.MatchString(s) {
			return "must be letters, digits, '_', '.' or '-' (at most 255)"
		}
	case typeURL:
		u, err := url.Parse(s)
		switch {
		case err != nil || u.Hostname() == "" || u.Opaque != "":
			return "must be an absolute https URL"
		case u.Scheme != "https" && !(allowHTTP && u.Scheme == "http"):
			return "must be an https URL"
		case u.User != nil:
			return "must not carry credentials (put the key in api_key)"
		case u.RawQuery != "" || u.ForceQuery || strings.Contains(s, "#"):
			return "must not have a query or fragment"
		}
	}
	return ""
}

func positiveInt(v json.RawMessage) (int64, bool) {
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return 0, false
		}
		n = json.Number(strings.TrimSpace(s))
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(n.String(), 64)
		if ferr != nil || f != math.Trunc(f) || f <= 0 || f > 1<<53 {
			return 0, false
		}
		i = int64(f)
	}
	return i, i > 0
}

func fieldList(spec []fieldSpec) string {
	names := make([]string, len(spec))
	for i, s := range spec {
		names[i] = s.name
		if !s.required {
			names[i] += " (optional)"
		}
	}
	return strings.Join(names, ", ")
}
