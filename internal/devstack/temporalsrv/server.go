// Package temporalsrv runs a Temporal server (and optionally its Web UI) inside the process, on
// go.temporal.io/server's public packages with SQLite persistence. It is the embedded default of
// `cohort dev` and of the end-to-end tests; production talks to a Temporal cluster instead, and the
// production build (-tags nodev) does not link this package.
package temporalsrv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	tlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/common/primitives/timestamp"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

// Options configure the embedded server.
type Options struct {
	IP           string // default 127.0.0.1
	FrontendPort int    // default 7233; 0 picks a free port when Ephemeral
	UIPort       int    // 0: no Web UI
	// DatabaseFile is the SQLite file; empty keeps everything in memory (tests).
	DatabaseFile string
	Namespace    string // default "default"
	// SearchAttributes registers custom search attributes on the namespace at creation.
	SearchAttributes map[string]enumspb.IndexedValueType
	Logger           *slog.Logger
	// LogLevel of the server's own logs, which are chatty; default warn.
	LogLevel slog.Level
}

// Server is a running embedded Temporal.
type Server struct {
	srv       temporal.Server
	ui        *uiserver.Server
	frontend  string
	uiAddr    string
	namespace string
	stopped   atomic.Bool
	level     *slog.LevelVar
}

// FrontendAddress is host:port of the gRPC frontend, for client.Dial.
func (s *Server) FrontendAddress() string { return s.frontend }

// UIAddress is host:port of the Web UI, empty without one.
func (s *Server) UIAddress() string { return s.uiAddr }

// Namespace is the namespace created at start.
func (s *Server) Namespace() string { return s.namespace }

// Start starts the server and waits until its frontend accepts connections.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.IP == "" {
		o.IP = "127.0.0.1"
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LogLevel == 0 {
		o.LogLevel = slog.LevelWarn
	}
	var err error
	pickFrontend := o.FrontendPort == 0
	if o.FrontendPort == 0 {
		if o.FrontendPort, err = freePort(o.IP); err != nil {
			return nil, err
		}
	}
	if err := portFree(o.IP, o.FrontendPort); err != nil {
		return nil, fmt.Errorf("temporal frontend port: %w", err)
	}
	if o.UIPort != 0 {
		if err := portFree(o.IP, o.UIPort); err != nil {
			return nil, fmt.Errorf("temporal ui port: %w", err)
		}
	}
	const clusterName = "active"
	sqlConf, err := sqlConfig(o, clusterName)
	if err != nil {
		return nil, err
	}
	// The internal ports (history, matching, worker, the frontend's HTTP API; the frontend too when
	// it was picked here) are found free and bound a moment later by the server: another process
	// can take one in between. That is worth a retry with new ports, never a failed start.
	var srv temporal.Server
	var level *slog.LevelVar
	var frontend string
	for attempt := 1; ; attempt++ {
		srv, level, frontend, err = newServer(o, clusterName, sqlConf)
		if err == nil || attempt == 5 || !addrInUse(err) {
			break
		}
		o.Logger.Warn("temporal: a port was taken between picking and binding it; retrying with new ports", "attempt", attempt)
		if pickFrontend {
			if o.FrontendPort, err = freePort(o.IP); err != nil {
				return nil, err
			}
		}
	}
	if err != nil {
		return nil, err
	}
	s := &Server{srv: srv, frontend: frontend, namespace: o.Namespace, level: level}
	if o.UIPort != 0 {
		s.uiAddr = net.JoinHostPort(o.IP, strconv.Itoa(o.UIPort))
		s.ui = uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
			Host:                o.IP,
			Port:                o.UIPort,
			TemporalGRPCAddress: frontend,
			EnableUI:            true,
			CORS:                uiconfig.CORS{CookieInsecure: true},
			HideLogs:            true,
			DisableNewsFetch:    true,
			DefaultNamespace:    o.Namespace,
		}))
		uiErr := make(chan error, 1)
		go func() { uiErr <- s.ui.Start() }()
		if err := waitListening(ctx, s.uiAddr, uiErr); err != nil {
			s.Stop()
			return nil, fmt.Errorf("start temporal ui: %w", err)
		}
	}
	if err := waitListening(ctx, frontend, nil); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// newServer creates and starts a server on newly picked internal ports.
func newServer(o Options, clusterName string, sqlConf *config.SQL) (temporal.Server, *slog.LevelVar, string, error) {
	var err error
	ports := map[primitives.ServiceName]int{primitives.FrontendService: o.FrontendPort}
	for _, svc := range []primitives.ServiceName{primitives.HistoryService, primitives.MatchingService, primitives.WorkerService} {
		if ports[svc], err = internalPort(o.IP); err != nil {
			return nil, nil, "", err
		}
	}
	httpPort, err := internalPort(o.IP)
	if err != nil {
		return nil, nil, "", err
	}
	frontend := net.JoinHostPort(o.IP, strconv.Itoa(o.FrontendPort))

	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = o.IP
	conf.Persistence.DefaultStore = "sqlite"
	conf.Persistence.VisibilityStore = "sqlite"
	conf.Persistence.NumHistoryShards = 1
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite": {SQL: sqlConf}}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{clusterName: {
			Enabled:                true,
			InitialFailoverVersion: 1,
			RPCAddress:             frontend,
			HTTPAddress:            net.JoinHostPort(o.IP, strconv.Itoa(httpPort)),
			ClusterID:              "cohort-embedded",
		}},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{}
	hosts := map[primitives.ServiceName]static.Hosts{}
	for svc, port := range ports {
		var sc config.Service
		sc.RPC.GRPCPort = port
		sc.RPC.BindOnIP = o.IP
		if svc == primitives.FrontendService {
			sc.RPC.HTTPPort = httpPort
		}
		conf.Services[string(svc)] = sc
		hosts[svc] = static.SingleLocalHost(net.JoinHostPort(o.IP, strconv.Itoa(port)))
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = frontend

	level := &slog.LevelVar{}
	level.Set(o.LogLevel)
	logger := slogLogger{log: o.Logger.With("component", "temporal"), level: level}
	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		return nil, nil, "", fmt.Errorf("temporal authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger)
	if err != nil {
		return nil, nil, "", fmt.Errorf("temporal claim mapper: %w", err)
	}
	dyn := dynamicconfig.StaticClient{
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                 8192,
		// Let custom search attributes be used in list filters right away.
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
		// A stopping worker's ShutdownWorker completes its outstanding polls, so no workflow task
		// is dispatched to a worker that drops it (it would wait out its 10 s timeout).
		dynamicconfig.EnableCancelWorkerPollsOnShutdown.Key(): true,
	}
	srv, err := temporal.NewServer(
		temporal.WithConfig(&conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dyn),
	)
	if err != nil {
		return nil, nil, "", fmt.Errorf("create temporal server: %w", err)
	}
	if err := srv.Start(); err != nil {
		_ = srv.Stop()
		return nil, nil, "", fmt.Errorf("start temporal server: %w", err)
	}
	return srv, level, frontend, nil
}

// addrInUse tells a bind refused because the port is taken.
func addrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// Stop shuts the UI and the server down; safe to call twice.
func (s *Server) Stop() {
	if !s.stopped.CompareAndSwap(false, true) {
		return
	}
	// Pollers complain loudly while the services stop one by one; that is expected.
	s.level.Set(slog.LevelError + 1)
	if s.ui != nil {
		s.ui.Stop()
	}
	_ = s.srv.Stop()
}

func sqlConfig(o Options, clusterName string) (*config.SQL, error) {
	conf := &config.SQL{PluginName: sqliteplugin.PluginName}
	if o.DatabaseFile == "" {
		conf.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		n, err := freePort("127.0.0.1") // any unique-enough number names the in-memory database
		if err != nil {
			return nil, err
		}
		conf.DatabaseName = "cohort-mem-" + strconv.Itoa(n) + "-" + strconv.Itoa(os.Getpid())
	} else {
		conf.ConnectAttributes = map[string]string{"mode": "rwc", "_journal_mode": "WAL", "_synchronous": "NORMAL"}
		conf.DatabaseName = o.DatabaseFile
		if err := os.MkdirAll(filepath.Dir(o.DatabaseFile), 0o755); err != nil {
			return nil, fmt.Errorf("temporal data dir: %w", err)
		}
	}
	// The SQLite plugin creates the schema of in-memory databases itself; a file needs it once.
	if o.DatabaseFile != "" {
		if _, err := os.Stat(o.DatabaseFile); errors.Is(err, os.ErrNotExist) {
			if err := sqliteschema.SetupSchema(conf); err != nil {
				return nil, fmt.Errorf("temporal sqlite schema: %w", err)
			}
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, o.Namespace, false, o.SearchAttributes)
	if err != nil {
		return nil, fmt.Errorf("temporal namespace: %w", err)
	}
	ns.Detail.Config.Retention = timestamp.DurationFromHours(7 * 24)
	if err := sqliteschema.CreateNamespaces(conf, ns); err != nil {
		return nil, fmt.Errorf("create temporal namespace: %w", err)
	}
	return conf, nil
}

// internalPort picks a port for one of the server's internal services (a test makes it collide).
var internalPort = freePort

func freePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func portFree(ip string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("%s:%d is in use (is another cohort dev or temporal server running?)", ip, port)
	}
	return l.Close()
}

func waitListening(ctx context.Context, addr string, failed <-chan error) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case err := <-failed:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not start listening within 60s", addr)
}

// slogLogger adapts slog to Temporal's logger interface.
type slogLogger struct {
	log   *slog.Logger
	level *slog.LevelVar
}

func (l slogLogger) Debug(msg string, tags ...tag.Tag)  { l.emit(slog.LevelDebug, msg, tags) }
func (l slogLogger) Info(msg string, tags ...tag.Tag)   { l.emit(slog.LevelInfo, msg, tags) }
func (l slogLogger) Warn(msg string, tags ...tag.Tag)   { l.emit(slog.LevelWarn, msg, tags) }
func (l slogLogger) Error(msg string, tags ...tag.Tag)  { l.emit(slog.LevelError, msg, tags) }
func (l slogLogger) DPanic(msg string, tags ...tag.Tag) { l.emit(slog.LevelError, msg, tags) }
func (l slogLogger) Panic(msg string, tags ...tag.Tag)  { l.emit(slog.LevelError, msg, tags) }
func (l slogLogger) Fatal(msg string, tags ...tag.Tag)  { l.emit(slog.LevelError, msg, tags) }

var _ tlog.Logger = slogLogger{}

func (l slogLogger) emit(level slog.Level, msg string, tags []tag.Tag) {
	if level < l.level.Level() {
		return
	}
	attrs := make([]slog.Attr, len(tags))
	for i, t := range tags {
		attrs[i] = slog.Any(t.Key(), t.Value())
	}
	l.log.LogAttrs(context.Background(), level, msg, attrs...)
}
