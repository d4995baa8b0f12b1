// Package config is Cohort's one typed configuration, loaded from the environment once in main.
// Every secret also has a _FILE variant (for Kubernetes secret volumes): FOO_FILE=/path reads FOO
// from that file.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Role is what the process runs; it decides which settings are required.
type Role string

const (
	RoleServe   Role = "serve"
	RoleWorker  Role = "worker"
	RoleMigrate Role = "migrate"
	RoleDev     Role = "dev"
	RoleTenants Role = "tenants"
)

type Config struct {
	HTTPAddr      string // COHORT_HTTP_ADDR
	MetricsAddr   string // COHORT_METRICS_ADDR: the metrics listener (/metrics, /healthz); see MetricsListen
	PublicBaseURL string // COHORT_PUBLIC_URL: base of links the service hands out (signed downloads)
	DataDir       string // COHORT_DATA_DIR: embedded mode state (Postgres cluster, Temporal SQLite, blobs)
	LogLevel      string // COHORT_LOG_LEVEL: debug|info|warn|error
	LogFormat     string // COHORT_LOG_FORMAT: json|text

	DatabaseURL string // DATABASE_URL (+_FILE)
	SecretKey   []byte // COHORT_SECRET_KEY (+_FILE): token signing, URL signing, secret encryption
	// PreviousSecretKeys (COHORT_SECRET_KEY_PREVIOUS, +_FILE; several separated by commas or
	// newlines) are earlier secret keys kept during a rotation: they still open secrets sealed with
	// them (until `cohort secret-key reseal`) and verify tokens and links signed with them (until
	// those expire, 24 h). Nothing new is signed or sealed with them.
	PreviousSecretKeys [][]byte

	Temporal TemporalConfig
	// Bus is the event bus: COHORT_BUS pubsub|nats. Unset: nats when NATS_URL is set, else
	// pubsub (see EventBus); `cohort dev` with neither runs NATS JetStream embedded.
	Bus       string
	PubSub    PubSubConfig
	NATS      NATSConfig
	Warehouse string // COHORT_WAREHOUSE: bigquery|postgres
	BigQuery  BigQueryConfig
	Blob      string // COHORT_BLOB_STORE: gcs|local
	GCSBucket string // GCS_BUCKET
	AI        AIConfig
	Search    SearchConfig
	JWT       JWTConfig
	// Telemetry is OpenTelemetry tracing, from the standard OTEL_* variables; off by default.
	Telemetry TelemetryConfig

	// Embedded Temporal of `cohort dev` (when TEMPORAL_ADDRESS is not set).
	DevTemporalPort int // COHORT_DEV_TEMPORAL_PORT, default 7233
	DevUIPort       int // COHORT_DEV_UI_PORT, default 8233; 0 disables the Web UI
	// Embedded NATS of `cohort dev`: COHORT_DEV_NATS_ADDR host:port also serves outside clients
	// (the nats CLI); empty, the default, serves the process only.
	DevNATSAddr string

	AllowPrivateNetworks bool   // COHORT_ALLOW_PRIVATE_NETWORKS
	KlaviyoAPIURL        string // COHORT_KLAVIYO_API_URL: Klaviyo's API base (default https://a.klaviyo.com)
	MaxBodyBytes         int64  // COHORT_MAX_BODY_BYTES: default request body cap
	// ShutdownTimeout (COHORT_SHUTDOWN_TIMEOUT, default 8s) is how long serve drains in-flight
	// requests after SIGTERM.
	ShutdownTimeout time.Duration
	// WorkerStopTimeout (COHORT_WORKER_STOP_TIMEOUT, default 50s) is how long a stopping worker
	// lets its running activities finish (Temporal's WorkerStopTimeout) before it cancels them:
	// the pod's terminationGracePeriodSeconds (60 s) less a margin for the rest of the shutdown.
	WorkerStopTimeout time.Duration

	// The event loader (worker): partitions written concurrently, and StreamingPull streams.
	LoaderFlushers int // COHORT_LOADER_FLUSHERS, default 2
	LoaderStreams  int // COHORT_LOADER_STREAMS, default 4
	// IdentityMaxAnonymousIDs is how many ids one user may have linked (identity graph); a link
	// beyond it is refused, never merged. COHORT_IDENTITY_MAX_ANONYMOUS_IDS, default 100.
	IdentityMaxAnonymousIDs int
}

type TemporalConfig struct {
	Address       string // TEMPORAL_ADDRESS
	Namespace     string // TEMPORAL_NAMESPACE
	TaskQueue     string // TEMPORAL_TASK_QUEUE
	APIKey        string // TEMPORAL_API_KEY (+_FILE), Temporal Cloud API keys
	TLSCertFile   string // TEMPORAL_TLS_CERT (mTLS client certificate, PEM file)
	TLSKeyFile    string // TEMPORAL_TLS_KEY
	TLSCAFile     string // TEMPORAL_TLS_CA
	TLSServerName string // TEMPORAL_TLS_SERVER_NAME
	TLS           bool   // TEMPORAL_TLS: force TLS (implied by cert, API key)
}

type PubSubConfig struct {
	Project      string // PUBSUB_PROJECT
	Topic        string // PUBSUB_TOPIC
	Subscription string // PUBSUB_SUBSCRIPTION
}

// NATSConfig is NATS JetStream as the event bus (off Google Cloud, and embedded in cohort dev).
type NATSConfig struct {
	URL       string // NATS_URL: nats://host:4222 or tls://..., comma-separated for a cluster
	CredsFile string // NATS_CREDS: a .creds file (JWT + NKey seed)
	Token     string // NATS_TOKEN (+_FILE)
	CAFile    string // NATS_CA: extra root CAs (PEM) for tls://
	Stream    string // NATS_STREAM, default COHORT_EVENTS
	Subject   string // NATS_SUBJECT, default cohort.events
	Consumer  string // NATS_CONSUMER, default cohort-loader (durable pull consumer)
	// ManageStream (NATS_MANAGE_STREAM) brings an existing stream and consumer to these
	// settings; otherwise Cohort only creates them when missing and leaves them to operators.
	ManageStream bool
	MaxAge       time.Duration // NATS_STREAM_MAX_AGE, default 168h
	MaxBytes     int64         // NATS_STREAM_MAX_BYTES, default 10 GiB; a full stream refuses publishes (503)
	Replicas     int           // NATS_STREAM_REPLICAS, default 1
	AckWait      time.Duration // NATS_ACK_WAIT, default 30s
}

// TelemetryConfig is OpenTelemetry tracing, read from the standard OTEL_* variables. Tracing is
// off unless an OTLP endpoint is set; spans then go to it over OTLP/gRPC. The exporter also reads
// the other OTEL_EXPORTER_OTLP_* variables itself (headers, certificate, insecure, timeout,
// compression), the resource OTEL_RESOURCE_ATTRIBUTES, the batch processor OTEL_BSP_*.
type TelemetryConfig struct {
	// Endpoint: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT, e.g.
	// http://otel-collector:4317 (http: plaintext, https: TLS). Empty: tracing off.
	Endpoint string
	// Exporter: OTEL_TRACES_EXPORTER, otlp (default) or none (off even with an endpoint).
	Exporter string
	// Protocol: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL; only grpc.
	Protocol string
	// Disabled: OTEL_SDK_DISABLED=true turns tracing off.
	Disabled bool
	// ServiceName: OTEL_SERVICE_NAME, default cohort.
	ServiceName string
	// Sampler: OTEL_TRACES_SAMPLER, default parentbased_always_on; SamplerArg:
	// OTEL_TRACES_SAMPLER_ARG, the ratio of the *traceidratio samplers (default 1).
	Sampler    string
	SamplerArg string
}

// TracingEnabled reports whether spans are exported.
func (t TelemetryConfig) TracingEnabled() bool {
	return t.Endpoint != "" && !t.Disabled && t.Exporter != "none"
}

// TracesSamplers are the OTEL_TRACES_SAMPLER values Cohort takes (the OpenTelemetry SDK's own).
var TracesSamplers = []string{"always_on", "always_off", "traceidratio",
	"parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"}

// Validate checks the tracing settings (Config.Validate includes it).
func (t TelemetryConfig) Validate() error {
	var bad []error
	switch t.Exporter {
	case "", "otlp", "none":
	default:
		bad = append(bad, fmt.Errorf("OTEL_TRACES_EXPORTER must be otlp or none, got %q", t.Exporter))
	}
	if t.TracingEnabled() && t.Protocol != "" && t.Protocol != "grpc" {
		bad = append(bad, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: only grpc is supported, got %q", t.Protocol))
	}
	if t.Endpoint != "" {
		if u, err := url.Parse(t.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad = append(bad, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL, got %q", t.Endpoint))
		}
	}
	if t.Sampler != "" && !slices.Contains(TracesSamplers, t.Sampler) {
		bad = append(bad, fmt.Errorf("OTEL_TRACES_SAMPLER must be one of %s, got %q", strings.Join(TracesSamplers, ", "), t.Sampler))
	}
	if t.SamplerArg != "" && strings.HasSuffix(t.Sampler, "traceidratio") {
		if r, err := strconv.ParseFloat(t.SamplerArg, 64); err != nil || r < 0 || r > 1 {
			bad = append(bad, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG must be a ratio between 0 and 1, got %q", t.SamplerArg))
		}
	}
	return errors.Join(bad...)
}

type BigQueryConfig struct {
	Project string // BIGQUERY_PROJECT
	Dataset string // BIGQUERY_DATASET
}

type AIConfig struct {
	Provider       string // COHORT_AI_PROVIDER: local|openai (openai when OPENAI_API_KEY is set)
	BaseURL        string // OPENAI_BASE_URL
	APIKey         string // OPENAI_API_KEY (+_FILE)
	ChatModel      string // OPENAI_CHAT_MODEL
	EmbeddingModel string // OPENAI_EMBEDDING_MODEL
	Dimensions     int    // OPENAI_EMBEDDING_DIMENSIONS
	// Timeout bounds each provider call, and a streamed answer only while it is silent
	// (OPENAI_TIMEOUT, default 30 s).
	Timeout time.Duration
	// RateLimit AI requests (builds, extraction, generation, drafts) per tenant per RateWindow,
	// shared by every replica (COHORT_AI_RATE_LIMIT, default 60; COHORT_AI_RATE_WINDOW, 1m).
	RateLimit  int
	RateWindow time.Duration
	// PageEmbeddingWait bounds how long a page generation waits for the queued embeddings of the
	// products its query could match (COHORT_PAGE_EMBEDDING_WAIT; 0: activities.DefaultEmbeddingWait).
	PageEmbeddingWait time.Duration
}

// SearchConfig sizes the in-process vector index of semantic search (internal/search).
type SearchConfig struct {
	// Memory (COHORT_SEARCH_MEMORY: bytes, or with a unit B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)
	// is the heap the index may hold per process; 0 (unset): SearchMemory's default.
	Memory int64
	// Dir (COHORT_SEARCH_DIR) holds the float32 files the index rescores from ("": the temporary
	// directory). Its disk needs 4 bytes per dimension per loaded vector.
	Dir string
}

// Search memory defaults: SearchMemoryShare of GOMEMLIMIT, or DefaultSearchMemory without one.
const (
	SearchMemoryShare   = 0.5
	DefaultSearchMemory = 1 << 30
)

// SearchMemory is the index's memory budget in bytes: COHORT_SEARCH_MEMORY, else half of the
// process's memory limit goMemLimit (runtime/debug.SetMemoryLimit(-1): GOMEMLIMIT, math.MaxInt64
// when unset), else DefaultSearchMemory.
func (c *Config) SearchMemory(goMemLimit int64) int64 {
	switch {
	case c.Search.Memory > 0:
		return c.Search.Memory
	case goMemLimit > 0 && goMemLimit < math.MaxInt64:
		return int64(float64(goMemLimit) * SearchMemoryShare)
	}
	return DefaultSearchMemory
}

type JWTConfig struct {
	JWKSURL     string // COHORT_JWKS_URL: external identity provider's key set (RS256/ES256)
	Issuer      string // COHORT_JWT_ISSUER
	Audience    string // COHORT_JWT_AUDIENCE
	TenantClaim string // COHORT_JWT_TENANT_CLAIM: claim holding the tenant slug or id
}

// Getenv looks a variable up; os.LookupEnv in main, a map in tests.
type Getenv func(key string) (string, bool)

// DefaultWorkerStopTimeout fits the worker pod's terminationGracePeriodSeconds (60 s in
// deploy/k8s/base/worker.yaml) with 10 s left for the event loader and the client to close.
const DefaultWorkerStopTimeout = 50 * time.Second

// MissingError names every required setting that was not set.
type MissingError struct{ Names []string }

// alternatives are the settings that replace a missing one (a production adapter's settings
// and the other adapter that needs none of them).
var alternatives = []struct {
	prefixes []string
	text     string
}{
	{[]string{"PUBSUB_"}, "NATS_URL (NATS JetStream) replaces PUBSUB_*"},
	{[]string{"BIGQUERY_"}, "COHORT_WAREHOUSE=postgres (the warehouse in DATABASE_URL's Postgres) replaces BIGQUERY_*"},
	{[]string{"GCS_BUCKET"}, "COHORT_BLOB_STORE=local replaces GCS_BUCKET (blobs under COHORT_DATA_DIR, default .cohort: a volume every replica shares)"},
}

func (e *MissingError) Error() string {
	msg := "missing required setting(s): " + strings.Join(e.Names, ", ")
	var alts []string
	for _, a := range alternatives {
		if slices.ContainsFunc(e.Names, func(n string) bool {
			return slices.ContainsFunc(a.prefixes, func(p string) bool { return strings.HasPrefix(n, p) })
		}) {
			alts = append(alts, a.text)
		}
	}
	if len(alts) > 0 {
		msg += "; or: " + strings.Join(alts, "; ")
	}
	return msg
}

// Load reads the configuration. It does not check required settings: call Validate with the role.
func Load(env Getenv) (*Config, error) {
	r := reader{env: env}
	c := &Config{
		HTTPAddr:      r.str("COHORT_HTTP_ADDR", ""),
		MetricsAddr:   r.str("COHORT_METRICS_ADDR", ""),
		PublicBaseURL: strings.TrimRight(r.str("COHORT_PUBLIC_URL", ""), "/"),
		DataDir:       r.str("COHORT_DATA_DIR", ".cohort"),
		LogLevel:      r.str("COHORT_LOG_LEVEL", "info"),
		LogFormat:     r.str("COHORT_LOG_FORMAT", "json"),
		DatabaseURL:   r.secret("DATABASE_URL"),
		Temporal: TemporalConfig{
			Address:       r.str("TEMPORAL_ADDRESS", ""),
			Namespace:     r.str("TEMPORAL_NAMESPACE", "default"),
			TaskQueue:     r.str("TEMPORAL_TASK_QUEUE", "cohort"),
			APIKey:        r.secret("TEMPORAL_API_KEY"),
			TLSCertFile:   r.str("TEMPORAL_TLS_CERT", ""),
			TLSKeyFile:    r.str("TEMPORAL_TLS_KEY", ""),
			TLSCAFile:     r.str("TEMPORAL_TLS_CA", ""),
			TLSServerName: r.str("TEMPORAL_TLS_SERVER_NAME", ""),
			TLS:           r.boolean("TEMPORAL_TLS", false),
		},
		Bus: r.str("COHORT_BUS", ""),
		NATS: NATSConfig{
			URL:          r.str("NATS_URL", ""),
			CredsFile:    r.str("NATS_CREDS", ""),
			Token:        r.secret("NATS_TOKEN"),
			CAFile:       r.str("NATS_CA", ""),
			Stream:       r.str("NATS_STREAM", "COHORT_EVENTS"),
			Subject:      r.str("NATS_SUBJECT", "cohort.events"),
			Consumer:     r.str("NATS_CONSUMER", "cohort-loader"),
			ManageStream: r.boolean("NATS_MANAGE_STREAM", false),
			MaxAge:       r.duration("NATS_STREAM_MAX_AGE", 7*24*time.Hour),
			MaxBytes:     int64(r.integer("NATS_STREAM_MAX_BYTES", 10<<30)),
			Replicas:     r.integer("NATS_STREAM_REPLICAS", 1),
			AckWait:      r.duration("NATS_ACK_WAIT", 30*time.Second),
		},
		DevNATSAddr: r.str("COHORT_DEV_NATS_ADDR", ""),
		PubSub: PubSubConfig{
			Project:      r.str("PUBSUB_PROJECT", ""),
			Topic:        r.str("PUBSUB_TOPIC", ""),
			Subscription: r.str("PUBSUB_SUBSCRIPTION", ""),
		},
		Warehouse: r.str("COHORT_WAREHOUSE", "bigquery"),
		BigQuery: BigQueryConfig{
			Project: r.str("BIGQUERY_PROJECT", ""),
			Dataset: r.str("BIGQUERY_DATASET", ""),
		},
		Blob:      r.str("COHORT_BLOB_STORE", "gcs"),
		GCSBucket: r.str("GCS_BUCKET", ""),
		AI: AIConfig{
			Provider: r.str("COHORT_AI_PROVIDER", ""),
			BaseURL:  r.str("OPENAI_BASE_URL", "https://api.openai.com/v1"),
			APIKey:   r.secret("OPENAI_API_KEY"),
			// Empty: the provider's own default (gpt-4o-mini and text-embedding-3-small for openai,
			// local-template and local-ngram-v1 for local), so stored embeddings name the model
			// that made them.
			ChatModel:         r.str("OPENAI_CHAT_MODEL", ""),
			EmbeddingModel:    r.str("OPENAI_EMBEDDING_MODEL", ""),
			Dimensions:        r.integer("OPENAI_EMBEDDING_DIMENSIONS", 0),
			Timeout:           r.duration("OPENAI_TIMEOUT", 30*time.Second),
			RateLimit:         r.integer("COHORT_AI_RATE_LIMIT", 60),
			RateWindow:        r.duration("COHORT_AI_RATE_WINDOW", time.Minute),
			PageEmbeddingWait: r.duration("COHORT_PAGE_EMBEDDING_WAIT", 0),
		},
		Search: SearchConfig{
			Memory: r.bytes("COHORT_SEARCH_MEMORY"),
			Dir:    r.str("COHORT_SEARCH_DIR", ""),
		},
		JWT: JWTConfig{
			JWKSURL:     r.str("COHORT_JWKS_URL", ""),
			Issuer:      r.str("COHORT_JWT_ISSUER", ""),
			Audience:    r.str("COHORT_JWT_AUDIENCE", ""),
			TenantClaim: r.str("COHORT_JWT_TENANT_CLAIM", "cohort_tenant"),
		},
		Telemetry: TelemetryConfig{
			Endpoint:    r.str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", r.str("OTEL_EXPORTER_OTLP_ENDPOINT", "")),
			Exporter:    strings.ToLower(r.str("OTEL_TRACES_EXPORTER", "otlp")),
			Protocol:    strings.ToLower(r.str("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", r.str("OTEL_EXPORTER_OTLP_PROTOCOL", ""))),
			Disabled:    r.boolean("OTEL_SDK_DISABLED", false),
			ServiceName: r.str("OTEL_SERVICE_NAME", "cohort"),
			Sampler:     strings.ToLower(r.str("OTEL_TRACES_SAMPLER", "")),
			SamplerArg:  r.str("OTEL_TRACES_SAMPLER_ARG", ""),
		},
		DevTemporalPort:         r.integer("COHORT_DEV_TEMPORAL_PORT", 7233),
		DevUIPort:               r.integer("COHORT_DEV_UI_PORT", 8233),
		AllowPrivateNetworks:    r.boolean("COHORT_ALLOW_PRIVATE_NETWORKS", false),
		KlaviyoAPIURL:           r.str("COHORT_KLAVIYO_API_URL", "https://a.klaviyo.com"),
		MaxBodyBytes:            int64(r.integer("COHORT_MAX_BODY_BYTES", 1<<20)),
		ShutdownTimeout:         r.duration("COHORT_SHUTDOWN_TIMEOUT", 8*time.Second),
		WorkerStopTimeout:       r.duration("COHORT_WORKER_STOP_TIMEOUT", DefaultWorkerStopTimeout),
		LoaderFlushers:          r.integer("COHORT_LOADER_FLUSHERS", 2),
		LoaderStreams:           r.integer("COHORT_LOADER_STREAMS", 4),
		IdentityMaxAnonymousIDs: r.integer("COHORT_IDENTITY_MAX_ANONYMOUS_IDS", 100),
	}
	if s := r.secret("COHORT_SECRET_KEY"); s != "" {
		c.SecretKey = []byte(s)
	}
	for _, k := range strings.FieldsFunc(r.secret("COHORT_SECRET_KEY_PREVIOUS"), func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		if k = strings.TrimSpace(k); k != "" {
			c.PreviousSecretKeys = append(c.PreviousSecretKeys, []byte(k))
		}
	}
	if c.AI.Provider == "" {
		c.AI.Provider = "local"
		if c.AI.APIKey != "" {
			c.AI.Provider = "openai"
		}
	}
	if len(r.errs) > 0 {
		return nil, errors.Join(r.errs...)
	}
	return c, nil
}

// DefaultMetricsAddr is where serve and worker serve /metrics (and /healthz) by default: a port
// apart from the public API's, for Prometheus (PodMonitoring) and the worker's probes.
const DefaultMetricsAddr = ":9090"

// MetricsListen is the address of role's metrics listener, "" for none: COHORT_METRICS_ADDR
// ("off": none); unset, DefaultMetricsAddr for serve and worker, and none for dev, which then
// serves /metrics on its API port instead (one process on a laptop: one port to remember).
func (c *Config) MetricsListen(role Role) string {
	switch {
	case c.MetricsAddr == "off":
		return ""
	case c.MetricsAddr != "":
		return c.MetricsAddr
	case role == RoleServe || role == RoleWorker:
		return DefaultMetricsAddr
	}
	return ""
}

// Validate checks that every setting the role needs is present and well formed.
// The dev role fills its gaps with embedded defaults, so it requires nothing.
func (c *Config) Validate(role Role) error {
	var missing []string
	need := func(name, v string) {
		if v == "" {
			missing = append(missing, name)
		}
	}
	switch role {
	case RoleServe, RoleWorker:
		need("DATABASE_URL", c.DatabaseURL)
		need("TEMPORAL_ADDRESS", c.Temporal.Address)
		if c.EventBus() == "nats" {
			need("NATS_URL", c.NATS.URL)
		} else {
			need("PUBSUB_PROJECT", c.PubSub.Project)
			need("PUBSUB_TOPIC", c.PubSub.Topic)
			if role == RoleWorker {
				need("PUBSUB_SUBSCRIPTION", c.PubSub.Subscription)
			}
		}
		if len(c.SecretKey) == 0 {
			missing = append(missing, "COHORT_SECRET_KEY")
		}
		if c.Warehouse == "bigquery" {
			need("BIGQUERY_PROJECT", c.BigQuery.Project)
			need("BIGQUERY_DATASET", c.BigQuery.Dataset)
		}
		if c.Blob == "gcs" {
			need("GCS_BUCKET", c.GCSBucket)
		}
		if c.AI.Provider == "openai" {
			need("OPENAI_API_KEY", c.AI.APIKey)
		}
		// The API hands out links; a worker writing to the local blob store signs them too.
		if role == RoleServe || c.Blob == "local" {
			need("COHORT_PUBLIC_URL", c.PublicBaseURL)
		}
	case RoleMigrate:
		need("DATABASE_URL", c.DatabaseURL)
	}
	if len(missing) > 0 {
		return &MissingError{Names: missing}
	}
	var bad []error
	if role != RoleDev && role != RoleTenants && len(c.SecretKey) > 0 && len(c.SecretKey) < 32 {
		bad = append(bad, errors.New("COHORT_SECRET_KEY must be at least 32 bytes"))
	}
	for i, k := range c.PreviousSecretKeys {
		switch {
		case len(k) < 32:
			bad = append(bad, fmt.Errorf("COHORT_SECRET_KEY_PREVIOUS: key %d must be at least 32 bytes", i+1))
		case bytes.Equal(k, c.SecretKey):
			bad = append(bad, fmt.Errorf("COHORT_SECRET_KEY_PREVIOUS: key %d is COHORT_SECRET_KEY itself", i+1))
		}
	}
	switch c.Warehouse {
	case "bigquery", "postgres":
	default:
		bad = append(bad, fmt.Errorf("COHORT_WAREHOUSE must be bigquery or postgres, got %q", c.Warehouse))
	}
	switch c.Bus {
	case "", "pubsub", "nats":
	default:
		bad = append(bad, fmt.Errorf("COHORT_BUS must be pubsub or nats, got %q", c.Bus))
	}
	if c.WorkerStopTimeout <= 0 {
		bad = append(bad, errors.New("COHORT_WORKER_STOP_TIMEOUT must be positive"))
	}
	if c.NATS.MaxAge <= 0 {
		bad = append(bad, errors.New("NATS_STREAM_MAX_AGE must be positive"))
	}
	if c.NATS.MaxBytes <= 0 {
		bad = append(bad, errors.New("NATS_STREAM_MAX_BYTES must be positive"))
	}
	if c.NATS.Replicas < 1 || c.NATS.Replicas > 5 {
		bad = append(bad, errors.New("NATS_STREAM_REPLICAS must be between 1 and 5"))
	}
	if c.NATS.AckWait < time.Second {
		bad = append(bad, errors.New("NATS_ACK_WAIT must be at least 1s"))
	}
	switch c.Blob {
	case "gcs", "local":
	default:
		bad = append(bad, fmt.Errorf("COHORT_BLOB_STORE must be gcs or local, got %q", c.Blob))
	}
	switch c.AI.Provider {
	case "local", "openai":
	default:
		bad = append(bad, fmt.Errorf("COHORT_AI_PROVIDER must be local or openai, got %q", c.AI.Provider))
	}
	if c.AI.Timeout <= 0 {
		bad = append(bad, errors.New("OPENAI_TIMEOUT must be positive"))
	}
	if c.AI.RateLimit < 1 || c.AI.RateLimit > 10_000 || c.AI.RateWindow <= 0 {
		bad = append(bad, errors.New("COHORT_AI_RATE_LIMIT must be from 1 to 10000 per positive COHORT_AI_RATE_WINDOW"))
	}
	if (c.Temporal.TLSCertFile == "") != (c.Temporal.TLSKeyFile == "") {
		bad = append(bad, errors.New("TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together"))
	}
	if c.JWT.JWKSURL != "" && c.JWT.Issuer == "" {
		bad = append(bad, errors.New("COHORT_JWT_ISSUER is required with COHORT_JWKS_URL"))
	}
	if c.MaxBodyBytes <= 0 {
		bad = append(bad, errors.New("COHORT_MAX_BODY_BYTES must be positive"))
	}
	if c.LoaderFlushers < 1 || c.LoaderFlushers > 64 {
		bad = append(bad, errors.New("COHORT_LOADER_FLUSHERS must be between 1 and 64"))
	}
	if c.LoaderStreams < 1 || c.LoaderStreams > 64 {
		bad = append(bad, errors.New("COHORT_LOADER_STREAMS must be between 1 and 64"))
	}
	if c.IdentityMaxAnonymousIDs < 1 {
		bad = append(bad, errors.New("COHORT_IDENTITY_MAX_ANONYMOUS_IDS must be at least 1"))
	}
	if err := c.Telemetry.Validate(); err != nil {
		bad = append(bad, err)
	}
	return errors.Join(bad...)
}

// EventBus is the event bus in use: COHORT_BUS if set, else nats when NATS_URL is set, else
// pubsub. (`cohort dev` with neither NATS_URL nor PUBSUB_PROJECT embeds NATS.)
func (c *Config) EventBus() string {
	if c.Bus != "" {
		return c.Bus
	}
	if c.NATS.URL != "" {
		return "nats"
	}
	return "pubsub"
}

type reader struct {
	env  Getenv
	errs []error
}

func (r *reader) str(key, def string) string {
	if v, ok := r.env(key); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	return def
}

// secret reads KEY, or the contents of the file named by KEY_FILE.
func (r *reader) secret(key string) string {
	if v, ok := r.env(key); ok && v != "" {
		return strings.TrimSpace(v)
	}
	if p, ok := r.env(key + "_FILE"); ok && p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("%s_FILE: %w", key, err))
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	return ""
}

func (r *reader) boolean(key string, def bool) bool {
	v := r.str(key, "")
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: want true or false, got %q", key, v))
		return def
	}
	return b
}

func (r *reader) integer(key string, def int) int {
	v := r.str(key, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: want an integer, got %q", key, v))
		return def
	}
	return n
}

// bytes reads a size: an integer of bytes, or one with a unit (B, KiB, MiB, GiB, TiB, or the
// decimal KB, MB, GB, TB), as GOMEMLIMIT takes it; 0 when unset.
func (r *reader) bytes(key string) int64 {
	v := r.str(key, "")
	if v == "" {
		return 0
	}
	n, err := ParseBytes(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: %w", key, err))
		return 0
	}
	return n
}

// ParseBytes reads a size like 1073741824, 512MiB or 2GiB (a positive whole number and an
// optional unit).
func ParseBytes(v string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	num, mult := strings.TrimSpace(v), int64(1)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("want a size like 1073741824, 512MiB or 2GiB, got %q", v)
	}
	return n * mult, nil
}

func (r *reader) duration(key string, def time.Duration) time.Duration {
	v := r.str(key, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: want a duration like 10s, got %q", key, v))
		return def
	}
	return d
}
