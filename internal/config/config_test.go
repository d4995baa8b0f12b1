package config_test

import (
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/config"
)

// env is a map-backed config.Getenv.
func env(m map[string]string) config.Getenv {
	return func(key string) (string, bool) {
		v, ok := m[key]
		return v, ok
	}
}

// with returns a copy of base with the overrides applied; an override of "\x00" deletes the key.
func with(base map[string]string, overrides map[string]string) map[string]string {
	out := maps.Clone(base)
	for k, v := range overrides {
		if v == "\x00" {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

const goodSecret = "0123456789abcdef0123456789abcdef" // 32 bytes

// serveEnv is a complete production environment for `cohort serve` with the default adapters
// (BigQuery, GCS, local AI).
func serveEnv() map[string]string {
	return map[string]string{
		"DATABASE_URL":      "postgres://cohort@db/cohort",
		"TEMPORAL_ADDRESS":  "temporal:7233",
		"PUBSUB_PROJECT":    "proj",
		"PUBSUB_TOPIC":      "events",
		"COHORT_SECRET_KEY": goodSecret,
		"COHORT_PUBLIC_URL": "https://cohort.example.com",
		"BIGQUERY_PROJECT":  "bq-proj",
		"BIGQUERY_DATASET":  "cohort",
		"GCS_BUCKET":        "cohort-exports",
	}
}

func workerEnv() map[string]string {
	return with(serveEnv(), map[string]string{"PUBSUB_SUBSCRIPTION": "events-sub", "COHORT_PUBLIC_URL": "\x00"})
}

func mustLoad(t *testing.T, m map[string]string) *config.Config {
	t.Helper()
	c, err := config.Load(env(m))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

// field is one loaded value and what it should be.
type field struct {
	name string
	got  any
	want any
}

// checkFields runs one subtest per field.
func checkFields(t *testing.T, fields []field) {
	t.Helper()
	for _, f := range fields {
		t.Run(f.name, func(t *testing.T) {
			if f.got != f.want {
				t.Errorf("%s = %#v, want %#v", f.name, f.got, f.want)
			}
		})
	}
}

func TestLoadDefaults(t *testing.T) {
	c := mustLoad(t, map[string]string{})
	checkFields(t, []field{
		{"HTTPAddr", c.HTTPAddr, ""},
		{"PublicBaseURL", c.PublicBaseURL, ""},
		{"DataDir", c.DataDir, ".cohort"},
		{"LogLevel", c.LogLevel, "info"},
		{"LogFormat", c.LogFormat, "json"},
		{"DatabaseURL", c.DatabaseURL, ""},
		{"SecretKey is nil", c.SecretKey == nil, true},
		{"Temporal.Address", c.Temporal.Address, ""},
		{"Temporal.Namespace", c.Temporal.Namespace, "default"},
		{"Temporal.TaskQueue", c.Temporal.TaskQueue, "cohort"},
		{"Temporal.APIKey", c.Temporal.APIKey, ""},
		{"Temporal.TLS", c.Temporal.TLS, false},
		{"PubSub.Project", c.PubSub.Project, ""},
		{"PubSub.Topic", c.PubSub.Topic, ""},
		{"PubSub.Subscription", c.PubSub.Subscription, ""},
		{"Warehouse", c.Warehouse, "bigquery"},
		{"Blob", c.Blob, "gcs"},
		{"GCSBucket", c.GCSBucket, ""},
		{"AI.Provider", c.AI.Provider, "local"},
		{"AI.BaseURL", c.AI.BaseURL, "https://api.openai.com/v1"},
		{"AI.APIKey", c.AI.APIKey, ""},
		{"AI.ChatModel", c.AI.ChatModel, ""},
		{"AI.EmbeddingModel", c.AI.EmbeddingModel, ""},
		{"AI.Dimensions", c.AI.Dimensions, 0},
		{"AI.Timeout", c.AI.Timeout, 30 * time.Second},
		{"AI.RateLimit", c.AI.RateLimit, 60},
		{"AI.RateWindow", c.AI.RateWindow, time.Minute},
		{"JWT.JWKSURL", c.JWT.JWKSURL, ""},
		{"JWT.TenantClaim", c.JWT.TenantClaim, "cohort_tenant"},
		{"DevTemporalPort", c.DevTemporalPort, 7233},
		{"DevUIPort", c.DevUIPort, 8233},
		{"AllowPrivateNetworks", c.AllowPrivateNetworks, false},
		{"MaxBodyBytes", c.MaxBodyBytes, int64(1 << 20)},
		{"ShutdownTimeout", c.ShutdownTimeout, 8 * time.Second},
		{"WorkerStopTimeout", c.WorkerStopTimeout, 50 * time.Second},
		{"LoaderFlushers", c.LoaderFlushers, 2},
		{"LoaderStreams", c.LoaderStreams, 4},
		{"IdentityMaxAnonymousIDs", c.IdentityMaxAnonymousIDs, 100},
	})
	// The defaults alone are a valid dev configuration.
	if err := c.Validate(config.RoleDev); err != nil {
		t.Errorf("Validate(dev) on defaults: %v", err)
	}
}

func TestLoadReadsEveryVariable(t *testing.T) {
	m := map[string]string{
		"COHORT_HTTP_ADDR":                  " :9090 ",
		"COHORT_PUBLIC_URL":                 "https://cohort.example.com/",
		"COHORT_DATA_DIR":                   "/var/lib/cohort",
		"COHORT_SEARCH_MEMORY":              "512MiB",
		"COHORT_SEARCH_DIR":                 "/var/cache/cohort-search",
		"COHORT_LOG_LEVEL":                  "debug",
		"COHORT_LOG_FORMAT":                 "text",
		"DATABASE_URL":                      "postgres://x@y/z",
		"COHORT_SECRET_KEY":                 goodSecret,
		"TEMPORAL_ADDRESS":                  "t:7233",
		"TEMPORAL_NAMESPACE":                "ns",
		"TEMPORAL_TASK_QUEUE":               "q",
		"TEMPORAL_API_KEY":                  "tkey",
		"TEMPORAL_TLS_CERT":                 "/c.pem",
		"TEMPORAL_TLS_KEY":                  "/k.pem",
		"TEMPORAL_TLS_CA":                   "/ca.pem",
		"TEMPORAL_TLS_SERVER_NAME":          "temporal.internal",
		"TEMPORAL_TLS":                      "true",
		"PUBSUB_PROJECT":                    "p",
		"PUBSUB_TOPIC":                      "t",
		"PUBSUB_SUBSCRIPTION":               "s",
		"COHORT_WAREHOUSE":                  "postgres",
		"BIGQUERY_PROJECT":                  "bp",
		"BIGQUERY_DATASET":                  "bd",
		"COHORT_BLOB_STORE":                 "local",
		"GCS_BUCKET":                        "b",
		"COHORT_AI_PROVIDER":                "local",
		"OPENAI_BASE_URL":                   "http://127.0.0.1:1/v1",
		"OPENAI_API_KEY":                    "sk-openai",
		"OPENAI_CHAT_MODEL":                 "chat",
		"OPENAI_EMBEDDING_MODEL":            "emb",
		"OPENAI_EMBEDDING_DIMENSIONS":       "256",
		"COHORT_PAGE_EMBEDDING_WAIT":        "90s",
		"OPENAI_TIMEOUT":                    "2m",
		"COHORT_AI_RATE_LIMIT":              "30",
		"COHORT_AI_RATE_WINDOW":             "10s",
		"COHORT_JWKS_URL":                   "https://idp/jwks.json",
		"COHORT_JWT_ISSUER":                 "https://idp/",
		"COHORT_JWT_AUDIENCE":               "cohort",
		"COHORT_JWT_TENANT_CLAIM":           "org",
		"COHORT_DEV_TEMPORAL_PORT":          "17233",
		"COHORT_DEV_UI_PORT":                "0",
		"COHORT_ALLOW_PRIVATE_NETWORKS":     "1",
		"COHORT_MAX_BODY_BYTES":             "2048",
		"COHORT_SHUTDOWN_TIMEOUT":           "1m30s",
		"COHORT_WORKER_STOP_TIMEOUT":        "25s",
		"COHORT_LOADER_FLUSHERS":            "6",
		"COHORT_LOADER_STREAMS":             "8",
		"COHORT_IDENTITY_MAX_ANONYMOUS_IDS": "7",
		"COHORT_BUS":                        "nats",
		"NATS_URL":                          "tls://nats-1:4222,tls://nats-2:4222",
		"NATS_CREDS":                        "/run/nats/cohort.creds",
		"NATS_TOKEN":                        "ntoken",
		"NATS_CA":                           "/run/nats/ca.pem",
		"NATS_STREAM":                       "EVENTS",
		"NATS_SUBJECT":                      "acme.events",
		"NATS_CONSUMER":                     "loader",
		"NATS_MANAGE_STREAM":                "true",
		"NATS_STREAM_MAX_AGE":               "48h",
		"NATS_STREAM_MAX_BYTES":             "1073741824",
		"NATS_STREAM_REPLICAS":              "3",
		"NATS_ACK_WAIT":                     "45s",
		"COHORT_DEV_NATS_ADDR":              "127.0.0.1:4333",
	}
	c := mustLoad(t, m)
	checkFields(t, []field{
		{"HTTPAddr is trimmed", c.HTTPAddr, ":9090"},
		{"PublicBaseURL loses its trailing slash", c.PublicBaseURL, "https://cohort.example.com"},
		{"DataDir", c.DataDir, "/var/lib/cohort"},
		{"LogLevel", c.LogLevel, "debug"},
		{"LogFormat", c.LogFormat, "text"},
		{"DatabaseURL", c.DatabaseURL, "postgres://x@y/z"},
		{"SecretKey", string(c.SecretKey), goodSecret},
		{"Temporal.Address", c.Temporal.Address, "t:7233"},
		{"Temporal.Namespace", c.Temporal.Namespace, "ns"},
		{"Temporal.TaskQueue", c.Temporal.TaskQueue, "q"},
		{"Temporal.APIKey", c.Temporal.APIKey, "tkey"},
		{"Temporal.TLSCertFile", c.Temporal.TLSCertFile, "/c.pem"},
		{"Temporal.TLSKeyFile", c.Temporal.TLSKeyFile, "/k.pem"},
		{"Temporal.TLSCAFile", c.Temporal.TLSCAFile, "/ca.pem"},
		{"Temporal.TLSServerName", c.Temporal.TLSServerName, "temporal.internal"},
		{"Temporal.TLS", c.Temporal.TLS, true},
		{"PubSub.Project", c.PubSub.Project, "p"},
		{"PubSub.Topic", c.PubSub.Topic, "t"},
		{"PubSub.Subscription", c.PubSub.Subscription, "s"},
		{"Warehouse", c.Warehouse, "postgres"},
		{"BigQuery.Project", c.BigQuery.Project, "bp"},
		{"BigQuery.Dataset", c.BigQuery.Dataset, "bd"},
		{"Blob", c.Blob, "local"},
		{"GCSBucket", c.GCSBucket, "b"},
		{"AI.Provider explicit local wins over OPENAI_API_KEY", c.AI.Provider, "local"},
		{"AI.BaseURL", c.AI.BaseURL, "http://127.0.0.1:1/v1"},
		{"AI.APIKey", c.AI.APIKey, "sk-openai"},
		{"AI.ChatModel", c.AI.ChatModel, "chat"},
		{"AI.EmbeddingModel", c.AI.EmbeddingModel, "emb"},
		{"AI.Dimensions", c.AI.Dimensions, 256},
		{"AI.PageEmbeddingWait", c.AI.PageEmbeddingWait, 90 * time.Second},
		{"AI.Timeout", c.AI.Timeout, 2 * time.Minute},
		{"AI.RateLimit", c.AI.RateLimit, 30},
		{"AI.RateWindow", c.AI.RateWindow, 10 * time.Second},
		{"JWT.JWKSURL", c.JWT.JWKSURL, "https://idp/jwks.json"},
		{"JWT.Issuer", c.JWT.Issuer, "https://idp/"},
		{"JWT.Audience", c.JWT.Audience, "cohort"},
		{"JWT.TenantClaim", c.JWT.TenantClaim, "org"},
		{"DevTemporalPort", c.DevTemporalPort, 17233},
		{"DevUIPort 0 disables the UI", c.DevUIPort, 0},
		{"AllowPrivateNetworks", c.AllowPrivateNetworks, true},
		{"MaxBodyBytes", c.MaxBodyBytes, int64(2048)},
		{"ShutdownTimeout", c.ShutdownTimeout, 90 * time.Second},
		{"WorkerStopTimeout", c.WorkerStopTimeout, 25 * time.Second},
		{"LoaderFlushers", c.LoaderFlushers, 6},
		{"LoaderStreams", c.LoaderStreams, 8},
		{"IdentityMaxAnonymousIDs", c.IdentityMaxAnonymousIDs, 7},
		{"Bus", c.Bus, "nats"},
		{"NATS.URL", c.NATS.URL, "tls://nats-1:4222,tls://nats-2:4222"},
		{"NATS.CredsFile", c.NATS.CredsFile, "/run/nats/cohort.creds"},
		{"NATS.Token", c.NATS.Token, "ntoken"},
		{"NATS.CAFile", c.NATS.CAFile, "/run/nats/ca.pem"},
		{"NATS.Stream", c.NATS.Stream, "EVENTS"},
		{"NATS.Subject", c.NATS.Subject, "acme.events"},
		{"NATS.Consumer", c.NATS.Consumer, "loader"},
		{"NATS.ManageStream", c.NATS.ManageStream, true},
		{"NATS.MaxAge", c.NATS.MaxAge, 48 * time.Hour},
		{"NATS.MaxBytes", c.NATS.MaxBytes, int64(1 << 30)},
		{"NATS.Replicas", c.NATS.Replicas, 3},
		{"NATS.AckWait", c.NATS.AckWait, 45 * time.Second},
		{"DevNATSAddr", c.DevNATSAddr, "127.0.0.1:4333"},
		{"Search.Memory", c.Search.Memory, int64(512 << 20)},
		{"Search.Dir", c.Search.Dir, "/var/cache/cohort-search"},
	})
}

// TestSearchMemory: COHORT_SEARCH_MEMORY wins; unset, half of GOMEMLIMIT; without either, the
// default.
func TestSearchMemory(t *testing.T) {
	tests := []struct {
		name     string
		env      string
		limit    int64
		want     int64
		badValue bool
	}{
		{name: "set in bytes", env: "1073741824", limit: math.MaxInt64, want: 1 << 30},
		{name: "set with a binary unit wins over GOMEMLIMIT", env: "256MiB", limit: 900 << 20, want: 256 << 20},
		{name: "set with a decimal unit", env: "2GB", limit: math.MaxInt64, want: 2e9},
		{name: "half of GOMEMLIMIT", limit: 1 << 30, want: 512 << 20},
		{name: "no GOMEMLIMIT", limit: math.MaxInt64, want: config.DefaultSearchMemory},
		{name: "a word", env: "lots", badValue: true},
		{name: "negative", env: "-5MiB", badValue: true},
		{name: "fraction", env: "1.5GiB", badValue: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]string{}
			if tt.env != "" {
				m["COHORT_SEARCH_MEMORY"] = tt.env
			}
			c, err := config.Load(env(m))
			if tt.badValue {
				if err == nil || !strings.Contains(err.Error(), "COHORT_SEARCH_MEMORY") || !strings.Contains(err.Error(), tt.env) {
					t.Fatalf("Load(COHORT_SEARCH_MEMORY=%q): %v, want an error naming it", tt.env, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.SearchMemory(tt.limit); got != tt.want {
				t.Errorf("SearchMemory(%d) = %d, want %d", tt.limit, got, tt.want)
			}
		})
	}
}

func TestLoadBlankValuesFallBackToDefaults(t *testing.T) {
	c := mustLoad(t, map[string]string{
		"COHORT_LOG_LEVEL":        "   ",
		"COHORT_WAREHOUSE":        "",
		"COHORT_DEV_UI_PORT":      " ",
		"COHORT_SHUTDOWN_TIMEOUT": "",
		"TEMPORAL_TLS":            "",
	})
	if c.LogLevel != "info" || c.Warehouse != "bigquery" || c.DevUIPort != 8233 || c.ShutdownTimeout != 8*time.Second || c.Temporal.TLS {
		t.Fatalf("blank values did not fall back to defaults: %+v", c)
	}
}

func TestAIProviderDefault(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "openai")
	if err := os.WriteFile(keyFile, []byte("sk-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{name: "nothing set: local", env: map[string]string{}, want: "local"},
		{name: "OPENAI_API_KEY set: openai", env: map[string]string{"OPENAI_API_KEY": "sk-x"}, want: "openai"},
		{name: "OPENAI_API_KEY_FILE set: openai", env: map[string]string{"OPENAI_API_KEY_FILE": keyFile}, want: "openai"},
		{name: "explicit local beats the key", env: map[string]string{"OPENAI_API_KEY": "sk-x", "COHORT_AI_PROVIDER": "local"}, want: "local"},
		{name: "explicit openai without a key", env: map[string]string{"COHORT_AI_PROVIDER": "openai"}, want: "openai"},
		{name: "blank OPENAI_API_KEY: local", env: map[string]string{"OPENAI_API_KEY": "  "}, want: "local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustLoad(t, tt.env)
			if c.AI.Provider != tt.want {
				t.Fatalf("AI.Provider = %q, want %q", c.AI.Provider, tt.want)
			}
		})
	}
}

func TestSecretFileVariants(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dbFile := write("db", "postgres://from-file/db\n")
	secretFile := write("secret", goodSecret+"\r\n")
	temporalFile := write("temporal", "tkey-file\n\n")
	openaiFile := write("openai", "sk-openai-file\n")

	tests := []struct {
		name string
		env  map[string]string
		get  func(*config.Config) string
		want string
	}{
		{
			name: "DATABASE_URL_FILE, trailing newline trimmed",
			env:  map[string]string{"DATABASE_URL_FILE": dbFile},
			get:  func(c *config.Config) string { return c.DatabaseURL },
			want: "postgres://from-file/db",
		},
		{
			name: "COHORT_SECRET_KEY_FILE, CRLF trimmed",
			env:  map[string]string{"COHORT_SECRET_KEY_FILE": secretFile},
			get:  func(c *config.Config) string { return string(c.SecretKey) },
			want: goodSecret,
		},
		{
			name: "TEMPORAL_API_KEY_FILE",
			env:  map[string]string{"TEMPORAL_API_KEY_FILE": temporalFile},
			get:  func(c *config.Config) string { return c.Temporal.APIKey },
			want: "tkey-file",
		},
		{
			name: "OPENAI_API_KEY_FILE",
			env:  map[string]string{"OPENAI_API_KEY_FILE": openaiFile},
			get:  func(c *config.Config) string { return c.AI.APIKey },
			want: "sk-openai-file",
		},
		{
			name: "the variable itself wins over its _FILE",
			env:  map[string]string{"DATABASE_URL": "postgres://direct/db", "DATABASE_URL_FILE": dbFile},
			get:  func(c *config.Config) string { return c.DatabaseURL },
			want: "postgres://direct/db",
		},
		{
			name: "an empty variable falls back to its _FILE",
			env:  map[string]string{"DATABASE_URL": "", "DATABASE_URL_FILE": dbFile},
			get:  func(c *config.Config) string { return c.DatabaseURL },
			want: "postgres://from-file/db",
		},
		{
			name: "empty _FILE is ignored",
			env:  map[string]string{"DATABASE_URL_FILE": ""},
			get:  func(c *config.Config) string { return c.DatabaseURL },
			want: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustLoad(t, tt.env)
			if got := tt.get(c); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSecretFileUnreadable(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "does-not-exist")
	tests := []struct {
		name string
		key  string
		path string
	}{
		{name: "DATABASE_URL_FILE missing", key: "DATABASE_URL_FILE", path: missing},
		{name: "COHORT_SECRET_KEY_FILE is a directory", key: "COHORT_SECRET_KEY_FILE", path: dir},
		{name: "TEMPORAL_API_KEY_FILE missing", key: "TEMPORAL_API_KEY_FILE", path: missing},
		{name: "OPENAI_API_KEY_FILE missing", key: "OPENAI_API_KEY_FILE", path: missing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Load(env(map[string]string{tt.key: tt.path}))
			if err == nil {
				t.Fatalf("Load succeeded (%+v), want an error naming %s", c, tt.key)
			}
			if c != nil {
				t.Errorf("Load returned a config along with the error")
			}
			if !strings.Contains(err.Error(), tt.key) {
				t.Errorf("error %q does not name %s", err, tt.key)
			}
		})
	}
}

func TestLoadRejectsMalformedValues(t *testing.T) {
	tests := []struct {
		name string
		key  string
		val  string
	}{
		{name: "bool word", key: "COHORT_ALLOW_PRIVATE_NETWORKS", val: "maybe"},
		{name: "bool yes is not accepted", key: "TEMPORAL_TLS", val: "yes"},
		{name: "int with letters", key: "COHORT_DEV_TEMPORAL_PORT", val: "72a3"},
		{name: "int float", key: "COHORT_DEV_UI_PORT", val: "8233.5"},
		{name: "int dimensions", key: "OPENAI_EMBEDDING_DIMENSIONS", val: "many"},
		{name: "int body size with unit", key: "COHORT_MAX_BODY_BYTES", val: "1MB"},
		{name: "duration without unit", key: "COHORT_SHUTDOWN_TIMEOUT", val: "10"},
		{name: "duration word", key: "COHORT_SHUTDOWN_TIMEOUT", val: "ten seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Load(env(map[string]string{tt.key: tt.val}))
			if err == nil {
				t.Fatalf("Load(%s=%q) succeeded (%+v), want error", tt.key, tt.val, c)
			}
			if !strings.Contains(err.Error(), tt.key) {
				t.Errorf("error %q does not name %s", err, tt.key)
			}
			if !strings.Contains(err.Error(), tt.val) {
				t.Errorf("error %q does not quote the bad value %q", err, tt.val)
			}
		})
	}
}

func TestLoadReportsEveryMalformedValue(t *testing.T) {
	_, err := config.Load(env(map[string]string{
		"TEMPORAL_TLS":            "nope",
		"COHORT_DEV_UI_PORT":      "x",
		"COHORT_SHUTDOWN_TIMEOUT": "y",
		"DATABASE_URL_FILE":       filepath.Join(t.TempDir(), "missing"),
	}))
	if err == nil {
		t.Fatal("Load succeeded, want errors")
	}
	for _, name := range []string{"TEMPORAL_TLS", "COHORT_DEV_UI_PORT", "COHORT_SHUTDOWN_TIMEOUT", "DATABASE_URL_FILE"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}

func TestLoadBooleans(t *testing.T) {
	tests := []struct {
		val  string
		want bool
	}{
		{"true", true}, {"TRUE", true}, {"1", true}, {"t", true},
		{"false", false}, {"0", false}, {"F", false}, {" true ", true},
	}
	for _, tt := range tests {
		t.Run(tt.val, func(t *testing.T) {
			c := mustLoad(t, map[string]string{"COHORT_ALLOW_PRIVATE_NETWORKS": tt.val})
			if c.AllowPrivateNetworks != tt.want {
				t.Fatalf("AllowPrivateNetworks = %v, want %v", c.AllowPrivateNetworks, tt.want)
			}
		})
	}
}

func missingNames(t *testing.T, err error) []string {
	t.Helper()
	var me *config.MissingError
	if !errors.As(err, &me) {
		t.Fatalf("error %v (%T) is not a *config.MissingError", err, err)
	}
	for _, n := range me.Names {
		if !strings.Contains(me.Error(), n) {
			t.Errorf("MissingError text %q does not contain %s", me.Error(), n)
		}
	}
	return me.Names
}

func TestValidateRequiredSettings(t *testing.T) {
	tests := []struct {
		name    string
		role    config.Role
		env     map[string]string
		missing []string // nil: Validate must succeed
	}{
		// serve
		{name: "serve complete", role: config.RoleServe, env: serveEnv()},
		{
			name: "serve with nothing set",
			role: config.RoleServe,
			env:  map[string]string{},
			missing: []string{"DATABASE_URL", "TEMPORAL_ADDRESS", "PUBSUB_PROJECT", "PUBSUB_TOPIC", "COHORT_SECRET_KEY",
				"COHORT_PUBLIC_URL", "BIGQUERY_PROJECT", "BIGQUERY_DATASET", "GCS_BUCKET"},
		},
		{name: "serve without DATABASE_URL", role: config.RoleServe, env: with(serveEnv(), map[string]string{"DATABASE_URL": "\x00"}), missing: []string{"DATABASE_URL"}},
		{name: "serve without TEMPORAL_ADDRESS", role: config.RoleServe, env: with(serveEnv(), map[string]string{"TEMPORAL_ADDRESS": "\x00"}), missing: []string{"TEMPORAL_ADDRESS"}},
		{name: "serve without PUBSUB_PROJECT", role: config.RoleServe, env: with(serveEnv(), map[string]string{"PUBSUB_PROJECT": "\x00"}), missing: []string{"PUBSUB_PROJECT"}},
		{name: "serve without PUBSUB_TOPIC", role: config.RoleServe, env: with(serveEnv(), map[string]string{"PUBSUB_TOPIC": "\x00"}), missing: []string{"PUBSUB_TOPIC"}},
		{name: "serve without COHORT_SECRET_KEY", role: config.RoleServe, env: with(serveEnv(), map[string]string{"COHORT_SECRET_KEY": "\x00"}), missing: []string{"COHORT_SECRET_KEY"}},
		{name: "serve without COHORT_PUBLIC_URL", role: config.RoleServe, env: with(serveEnv(), map[string]string{"COHORT_PUBLIC_URL": "\x00"}), missing: []string{"COHORT_PUBLIC_URL"}},
		{name: "serve with blank COHORT_PUBLIC_URL", role: config.RoleServe, env: with(serveEnv(), map[string]string{"COHORT_PUBLIC_URL": "  "}), missing: []string{"COHORT_PUBLIC_URL"}},
		{name: "serve does not need PUBSUB_SUBSCRIPTION", role: config.RoleServe, env: with(serveEnv(), map[string]string{"PUBSUB_SUBSCRIPTION": "\x00"})},
		{name: "serve bigquery without BIGQUERY_PROJECT", role: config.RoleServe, env: with(serveEnv(), map[string]string{"BIGQUERY_PROJECT": "\x00"}), missing: []string{"BIGQUERY_PROJECT"}},
		{name: "serve bigquery without BIGQUERY_DATASET", role: config.RoleServe, env: with(serveEnv(), map[string]string{"BIGQUERY_DATASET": "\x00"}), missing: []string{"BIGQUERY_DATASET"}},
		{
			name: "serve postgres warehouse needs no BIGQUERY_*",
			role: config.RoleServe,
			env:  with(serveEnv(), map[string]string{"COHORT_WAREHOUSE": "postgres", "BIGQUERY_PROJECT": "\x00", "BIGQUERY_DATASET": "\x00"}),
		},
		{name: "serve gcs without GCS_BUCKET", role: config.RoleServe, env: with(serveEnv(), map[string]string{"GCS_BUCKET": "\x00"}), missing: []string{"GCS_BUCKET"}},
		{name: "serve local blob store needs no GCS_BUCKET", role: config.RoleServe, env: with(serveEnv(), map[string]string{"COHORT_BLOB_STORE": "local", "GCS_BUCKET": "\x00"})},
		{name: "serve openai without OPENAI_API_KEY", role: config.RoleServe, env: with(serveEnv(), map[string]string{"COHORT_AI_PROVIDER": "openai"}), missing: []string{"OPENAI_API_KEY"}},
		{name: "serve openai with OPENAI_API_KEY", role: config.RoleServe, env: with(serveEnv(), map[string]string{"COHORT_AI_PROVIDER": "openai", "OPENAI_API_KEY": "sk-x"})},
		{name: "serve local AI needs no OPENAI_API_KEY", role: config.RoleServe, env: with(serveEnv(), map[string]string{"COHORT_AI_PROVIDER": "local"})},
		{
			name:    "serve names several missing at once",
			role:    config.RoleServe,
			env:     with(serveEnv(), map[string]string{"DATABASE_URL": "\x00", "GCS_BUCKET": "\x00", "COHORT_AI_PROVIDER": "openai"}),
			missing: []string{"DATABASE_URL", "GCS_BUCKET", "OPENAI_API_KEY"},
		},

		// worker
		{name: "worker complete", role: config.RoleWorker, env: workerEnv()},
		{
			name: "worker with nothing set",
			role: config.RoleWorker,
			env:  map[string]string{},
			missing: []string{"DATABASE_URL", "TEMPORAL_ADDRESS", "PUBSUB_PROJECT", "PUBSUB_TOPIC", "PUBSUB_SUBSCRIPTION",
				"COHORT_SECRET_KEY", "BIGQUERY_PROJECT", "BIGQUERY_DATASET", "GCS_BUCKET"},
		},
		{name: "worker without PUBSUB_SUBSCRIPTION", role: config.RoleWorker, env: with(workerEnv(), map[string]string{"PUBSUB_SUBSCRIPTION": "\x00"}), missing: []string{"PUBSUB_SUBSCRIPTION"}},
		{name: "worker does not need COHORT_PUBLIC_URL", role: config.RoleWorker, env: workerEnv()},
		{name: "worker with the local blob store needs COHORT_PUBLIC_URL", role: config.RoleWorker,
			env: with(workerEnv(), map[string]string{"COHORT_BLOB_STORE": "local", "GCS_BUCKET": "\x00"}), missing: []string{"COHORT_PUBLIC_URL"}},
		{name: "worker without COHORT_SECRET_KEY", role: config.RoleWorker, env: with(workerEnv(), map[string]string{"COHORT_SECRET_KEY": "\x00"}), missing: []string{"COHORT_SECRET_KEY"}},
		{name: "worker openai without key", role: config.RoleWorker, env: with(workerEnv(), map[string]string{"COHORT_AI_PROVIDER": "openai"}), missing: []string{"OPENAI_API_KEY"}},
		{name: "worker bigquery without dataset", role: config.RoleWorker, env: with(workerEnv(), map[string]string{"BIGQUERY_DATASET": "\x00"}), missing: []string{"BIGQUERY_DATASET"}},

		// NATS JetStream instead of Pub/Sub
		{
			name: "serve on nats needs NATS_URL, no PUBSUB_*",
			role: config.RoleServe,
			env:  with(serveEnv(), map[string]string{"NATS_URL": "nats://nats:4222", "PUBSUB_PROJECT": "\x00", "PUBSUB_TOPIC": "\x00"}),
		},
		{
			name:    "serve with COHORT_BUS=nats and no NATS_URL",
			role:    config.RoleServe,
			env:     with(serveEnv(), map[string]string{"COHORT_BUS": "nats"}),
			missing: []string{"NATS_URL"},
		},
		{
			name: "worker on nats needs no PUBSUB_SUBSCRIPTION",
			role: config.RoleWorker,
			env:  with(workerEnv(), map[string]string{"NATS_URL": "nats://nats:4222", "PUBSUB_SUBSCRIPTION": "\x00", "PUBSUB_PROJECT": "\x00"}),
		},
		{
			name:    "COHORT_BUS=pubsub wins over NATS_URL",
			role:    config.RoleWorker,
			env:     with(workerEnv(), map[string]string{"COHORT_BUS": "pubsub", "NATS_URL": "nats://nats:4222", "PUBSUB_SUBSCRIPTION": "\x00"}),
			missing: []string{"PUBSUB_SUBSCRIPTION"},
		},

		// migrate
		{name: "migrate with only DATABASE_URL", role: config.RoleMigrate, env: map[string]string{"DATABASE_URL": "postgres://x/y"}},
		{name: "migrate without DATABASE_URL", role: config.RoleMigrate, env: map[string]string{}, missing: []string{"DATABASE_URL"}},
		{name: "migrate ignores everything serve needs", role: config.RoleMigrate, env: map[string]string{"DATABASE_URL": "postgres://x/y", "COHORT_AI_PROVIDER": "openai"}},

		// dev
		{name: "dev with nothing set", role: config.RoleDev, env: map[string]string{}},
		{name: "dev with openai and no key", role: config.RoleDev, env: map[string]string{"COHORT_AI_PROVIDER": "openai"}},
		{name: "dev with a short secret key", role: config.RoleDev, env: map[string]string{"COHORT_SECRET_KEY": "short"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustLoad(t, tt.env)
			err := c.Validate(tt.role)
			if tt.missing == nil {
				if err != nil {
					t.Fatalf("Validate(%s) = %v, want nil", tt.role, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%s) = nil, want missing %v", tt.role, tt.missing)
			}
			got := missingNames(t, err)
			want := slices.Clone(tt.missing)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("missing = %v, want %v", got, want)
			}
		})
	}
}

func TestValidateRejectsBadValues(t *testing.T) {
	tests := []struct {
		name    string
		role    config.Role
		env     map[string]string
		mention string // "" means valid
	}{
		{name: "serve short secret key", role: config.RoleServe, env: with(serveEnv(), map[string]string{"COHORT_SECRET_KEY": "too-short-secret"}), mention: "COHORT_SECRET_KEY"},
		{name: "serve 31-byte secret key", role: config.RoleServe, env: with(serveEnv(), map[string]string{"COHORT_SECRET_KEY": goodSecret[:31]}), mention: "COHORT_SECRET_KEY"},
		{name: "serve 32-byte secret key", role: config.RoleServe, env: serveEnv()},
		{name: "worker short secret key", role: config.RoleWorker, env: with(workerEnv(), map[string]string{"COHORT_SECRET_KEY": "short"}), mention: "COHORT_SECRET_KEY"},
		{name: "unknown warehouse", role: config.RoleServe, env: with(serveEnv(), map[string]string{"COHORT_WAREHOUSE": "snowflake"}), mention: "COHORT_WAREHOUSE"},
		{name: "unknown warehouse in dev", role: config.RoleDev, env: map[string]string{"COHORT_WAREHOUSE": "snowflake"}, mention: "COHORT_WAREHOUSE"},
		{name: "unknown blob store", role: config.RoleServe, env: with(serveEnv(), map[string]string{"COHORT_BLOB_STORE": "s3"}), mention: "COHORT_BLOB_STORE"},
		{name: "zero OPENAI_TIMEOUT", role: config.RoleServe, env: with(serveEnv(), map[string]string{"OPENAI_TIMEOUT": "0s"}), mention: "OPENAI_TIMEOUT"},
		{name: "AI rate limit out of range", role: config.RoleServe, env: with(serveEnv(), map[string]string{"COHORT_AI_RATE_LIMIT": "0"}), mention: "COHORT_AI_RATE_LIMIT"},
		{name: "unknown AI provider", role: config.RoleDev, env: map[string]string{"COHORT_AI_PROVIDER": "anthropic"}, mention: "COHORT_AI_PROVIDER"},
		{name: "TLS cert without key", role: config.RoleServe, env: with(serveEnv(), map[string]string{"TEMPORAL_TLS_CERT": "/c.pem"}), mention: "TEMPORAL_TLS_KEY"},
		{name: "TLS key without cert", role: config.RoleServe, env: with(serveEnv(), map[string]string{"TEMPORAL_TLS_KEY": "/k.pem"}), mention: "TEMPORAL_TLS_CERT"},
		{name: "TLS cert and key", role: config.RoleServe, env: with(serveEnv(), map[string]string{"TEMPORAL_TLS_CERT": "/c.pem", "TEMPORAL_TLS_KEY": "/k.pem"})},
		{name: "JWKS without issuer", role: config.RoleServe, env: with(serveEnv(), map[string]string{"COHORT_JWKS_URL": "https://idp/jwks"}), mention: "COHORT_JWT_ISSUER"},
		{name: "JWKS with issuer", role: config.RoleServe, env: with(serveEnv(), map[string]string{"COHORT_JWKS_URL": "https://idp/jwks", "COHORT_JWT_ISSUER": "https://idp/"})},
		{name: "zero body cap", role: config.RoleDev, env: map[string]string{"COHORT_MAX_BODY_BYTES": "0"}, mention: "COHORT_MAX_BODY_BYTES"},
		{name: "negative body cap", role: config.RoleServe, env: with(serveEnv(), map[string]string{"COHORT_MAX_BODY_BYTES": "-1"}), mention: "COHORT_MAX_BODY_BYTES"},
		{name: "no loader flushers", role: config.RoleDev, env: map[string]string{"COHORT_LOADER_FLUSHERS": "0"}, mention: "COHORT_LOADER_FLUSHERS"},
		{name: "no linked ids allowed", role: config.RoleDev, env: map[string]string{"COHORT_IDENTITY_MAX_ANONYMOUS_IDS": "0"}, mention: "COHORT_IDENTITY_MAX_ANONYMOUS_IDS"},
		{name: "too many loader streams", role: config.RoleDev, env: map[string]string{"COHORT_LOADER_STREAMS": "65"}, mention: "COHORT_LOADER_STREAMS"},
		{name: "unknown bus", role: config.RoleServe, env: with(serveEnv(), map[string]string{"COHORT_BUS": "kafka"}), mention: "COHORT_BUS"},
		{name: "zero stream bytes", role: config.RoleDev, env: map[string]string{"NATS_STREAM_MAX_BYTES": "0"}, mention: "NATS_STREAM_MAX_BYTES"},
		{name: "negative stream age", role: config.RoleDev, env: map[string]string{"NATS_STREAM_MAX_AGE": "-1h"}, mention: "NATS_STREAM_MAX_AGE"},
		{name: "six replicas", role: config.RoleServe, env: with(serveEnv(), map[string]string{"NATS_STREAM_REPLICAS": "6"}), mention: "NATS_STREAM_REPLICAS"},
		{name: "zero worker stop timeout", role: config.RoleWorker, env: with(workerEnv(), map[string]string{"COHORT_WORKER_STOP_TIMEOUT": "0s"}), mention: "COHORT_WORKER_STOP_TIMEOUT"},
		{name: "sub-second ack wait", role: config.RoleDev, env: map[string]string{"NATS_ACK_WAIT": "500ms"}, mention: "NATS_ACK_WAIT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustLoad(t, tt.env)
			err := c.Validate(tt.role)
			if tt.mention == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate = nil, want an error naming %s", tt.mention)
			}
			var me *config.MissingError
			if errors.As(err, &me) {
				t.Fatalf("Validate = MissingError %v, want a bad-value error", me)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("error %q does not name %s", err, tt.mention)
			}
		})
	}
}

func TestEventBus(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"nothing set", map[string]string{}, "pubsub"},
		{"pubsub project", map[string]string{"PUBSUB_PROJECT": "p"}, "pubsub"},
		{"nats url", map[string]string{"NATS_URL": "nats://n:4222"}, "nats"},
		{"explicit pubsub over a nats url", map[string]string{"NATS_URL": "nats://n:4222", "COHORT_BUS": "pubsub"}, "pubsub"},
		{"explicit nats", map[string]string{"COHORT_BUS": "nats"}, "nats"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustLoad(t, tc.env).EventBus(); got != tc.want {
				t.Fatalf("EventBus() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMissingErrorMessage(t *testing.T) {
	e := &config.MissingError{Names: []string{"DATABASE_URL", "TEMPORAL_ADDRESS"}}
	if got, want := e.Error(), "missing required setting(s): DATABASE_URL, TEMPORAL_ADDRESS"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}

// Serve started with nothing set names the Google Cloud settings it misses and, beside each,
// the setting that replaces them off Google Cloud.
func TestMissingErrorNamesAlternatives(t *testing.T) {
	c, err := config.Load(env(map[string]string{}))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate(config.RoleServe)
	missingNames(t, err)
	msg := err.Error()
	for _, want := range []string{"PUBSUB_PROJECT", "BIGQUERY_PROJECT", "GCS_BUCKET",
		"NATS_URL", "COHORT_WAREHOUSE=postgres", "COHORT_BLOB_STORE=local", "COHORT_DATA_DIR"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not name %s", msg, want)
		}
	}
	// Only the alternatives of what is missing.
	e := &config.MissingError{Names: []string{"GCS_BUCKET"}}
	if strings.Contains(e.Error(), "NATS_URL") || !strings.Contains(e.Error(), "COHORT_BLOB_STORE=local") {
		t.Errorf("GCS_BUCKET alone: %q", e.Error())
	}
}

func TestPreviousSecretKeys(t *testing.T) {
	other := strings.Repeat("p", 32)
	third := strings.Repeat("q", 40)
	c, err := config.Load(env(with(serveEnv(), map[string]string{"COHORT_SECRET_KEY_PREVIOUS": other + ", " + third + "\n"})))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.PreviousSecretKeys) != 2 || string(c.PreviousSecretKeys[0]) != other || string(c.PreviousSecretKeys[1]) != third {
		t.Fatalf("previous keys = %q", c.PreviousSecretKeys)
	}
	if err := c.Validate(config.RoleServe); err != nil {
		t.Fatalf("valid previous keys refused: %v", err)
	}
	file := filepath.Join(t.TempDir(), "previous")
	if err := os.WriteFile(file, []byte(other+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err = config.Load(env(with(serveEnv(), map[string]string{"COHORT_SECRET_KEY_PREVIOUS_FILE": file}))); err != nil || len(c.PreviousSecretKeys) != 1 {
		t.Fatalf("from a file: %q, %v", c.PreviousSecretKeys, err)
	}
	for _, bad := range []string{"short", goodSecret} {
		c, err := config.Load(env(with(serveEnv(), map[string]string{"COHORT_SECRET_KEY_PREVIOUS": bad})))
		if err != nil {
			t.Fatal(err)
		}
		err = c.Validate(config.RoleServe)
		if err == nil || !strings.Contains(err.Error(), "COHORT_SECRET_KEY_PREVIOUS") || strings.Contains(err.Error(), bad) {
			t.Fatalf("previous key %q: %v; want an error naming the variable, not the key", bad, err)
		}
	}
}
