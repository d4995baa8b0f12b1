// Package devstack provides the embedded defaults of `cohort dev`, `cohort tenants` and the test
// harness: Postgres resolution (including a private cluster started from the machine's PostgreSQL
// binaries), the data directory and the generated dev secret key. The embedded Temporal server lives
// in the subpackage temporalsrv so that production builds can leave it out.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresSource says where the database came from.
type PostgresSource string

const (
	SourceEnv     PostgresSource = "DATABASE_URL"
	SourceLocal   PostgresSource = "local server on 127.0.0.1:5432"
	SourcePrivate PostgresSource = "private cluster"
)

// Postgres is a resolved database server.
type Postgres struct {
	// AdminURL connects to the server's maintenance database (postgres); DatabaseURL to the
	// Cohort database. With DATABASE_URL both are that URL.
	AdminURL    string
	DatabaseURL string
	Database    string // the database's name ("" with DATABASE_URL: whatever it names)
	Source      PostgresSource
	DataDir     string // private cluster only
	owned       bool   // we started the private cluster and stop it on Close
	bin         string
	runAs       *syscall.Credential
}

// PostgresOptions tune the resolution.
type PostgresOptions struct {
	DatabaseURL string // DATABASE_URL; used as is when set
	DataDir     string // where a private cluster lives (<DataDir>/postgres)
	// Database is the database to create on a local or private server; by default the data dir's
	// own (DataDirDatabase).
	Database string
	// NewDataDir lets a data dir without a database of its own get one (cohort dev). Without it
	// such a data dir is a *NoDatabaseError (cohort tenants from the wrong directory).
	NewDataDir bool
	// LegacyDatabase is the one database every data dir shared before each got its own, default
	// "cohort"; a data dir set up with it keeps it.
	LegacyDatabase string
	LocalAddr      string // default 127.0.0.1:5432; "-" skips the local probe
	Log            func(msg string, args ...any)
}

// ErrNoPostgresBinaries means no server was found and none can be started.
var ErrNoPostgresBinaries = errors.New("no PostgreSQL found: set DATABASE_URL, run a server on 127.0.0.1:5432, " +
	"or install the server binaries (Debian/Ubuntu: apt-get install postgresql; macOS: brew install postgresql@16) so a private cluster can be started")

// ResolvePostgres finds a server in the documented order: DATABASE_URL; else a server on
// 127.0.0.1:5432 (trust auth, user postgres); else a private cluster in <DataDir>/postgres,
// initialised and started with initdb and pg_ctl (reused when it is already running).
//
// Without DATABASE_URL the database is the data dir's own (DataDirDatabase), so that a new data
// dir (after rm -rf .cohort, or in a second clone) starts afresh instead of meeting a database set
// up with another data dir's secret key.
func ResolvePostgres(ctx context.Context, o PostgresOptions) (*Postgres, error) {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.DatabaseURL != "" {
		p := &Postgres{AdminURL: o.DatabaseURL, DatabaseURL: o.DatabaseURL, Source: SourceEnv}
		if u, err := url.Parse(o.DatabaseURL); err == nil {
			p.Database = strings.TrimPrefix(u.Path, "/")
		}
		return p, nil
	}
	if o.LocalAddr == "" {
		o.LocalAddr = "127.0.0.1:5432"
	}
	if o.LocalAddr != "-" {
		admin := "postgres://postgres@" + o.LocalAddr + "/postgres?sslmode=disable"
		if err := tryConnect(ctx, admin, 2*time.Second); err == nil {
			p := &Postgres{AdminURL: admin, Source: SourceLocal}
			if err := p.useDatabase(ctx, o); err != nil {
				return nil, err
			}
			return p, nil
		} else if reachable(o.LocalAddr) {
			o.Log("postgres on " + o.LocalAddr + " refused the connection; starting a private cluster: " + err.Error())
		}
	}
	if o.Database == "" && !o.NewDataDir && o.DataDir != "" {
		// A data dir without a cluster holds no database: refuse before initdb makes one.
		if _, err := os.Stat(filepath.Join(o.DataDir, "postgres", "PG_VERSION")); err != nil {
			abs, _ := filepath.Abs(o.DataDir)
			return nil, &NoDatabaseError{DataDir: abs}
		}
	}
	p, err := startPrivate(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := p.useDatabase(ctx, o); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

// useDatabase picks the database on p's server (o.Database, else the data dir's own) and creates
// it when missing.
func (p *Postgres) useDatabase(ctx context.Context, o PostgresOptions) error {
	name := o.Database
	if name == "" {
		var err error
		if name, err = DataDirDatabase(ctx, p.AdminURL, o.DataDir, o.LegacyDatabase, o.NewDataDir); err != nil {
			return err
		}
	}
	if err := EnsureDatabase(ctx, p.AdminURL, name); err != nil {
		return err
	}
	p.Database, p.DatabaseURL = name, withDatabase(p.AdminURL, name)
	return nil
}

// Close stops a private cluster this process started; otherwise it does nothing.
func (p *Postgres) Close() error {
	if !p.owned {
		return nil
	}
	cmd := exec.Command(filepath.Join(p.bin, "pg_ctl"), "-D", p.DataDir, "-m", "fast", "-w", "-t", "20", "stop")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.runAs}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("stop private postgres: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Owned reports whether Close will stop the server.
func (p *Postgres) Owned() bool { return p.owned }

func reachable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func tryConnect(ctx context.Context, dsn string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

func withDatabase(dsn, db string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	u.Path = "/" + db
	return u.String()
}

// EnsureDatabase creates db on the server behind adminURL when it does not exist.
func EnsureDatabase(ctx context.Context, adminURL, db string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, db).Scan(&exists); err != nil {
		return fmt.Errorf("check database %s: %w", db, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		var again bool
		if qerr := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, db).Scan(&again); qerr == nil && again {
			return nil // created concurrently
		}
		return fmt.Errorf("create database %s: %w", db, err)
	}
	return nil
}

// FindPostgresBinaries returns the directory holding initdb, pg_ctl and postgres.
func FindPostgresBinaries() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, pattern := range []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/opt/homebrew/opt/postgresql@*/bin", "/usr/local/opt/postgresql@*/bin", "/usr/local/pgsql/bin"} {
		m, _ := filepath.Glob(pattern)
		sort.Sort(sort.Reverse(sort.StringSlice(m))) // newest version first (lexical is fine for 1x)
		dirs = append(dirs, m...)
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrNoPostgresBinaries
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// runAsCredential: PostgreSQL refuses to run as root, so as root we run it as the "postgres"
// system user (created by the distribution's packages), owning the data directory.
func runAsCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, errors.New("running as root and no 'postgres' user exists: PostgreSQL cannot run as root; create that user or set DATABASE_URL")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func startPrivate(ctx context.Context, o PostgresOptions) (*Postgres, error) {
	bin, err := FindPostgresBinaries()
	if err != nil {
		return nil, err
	}
	if o.DataDir == "" {
		return nil, errors.New("private postgres: no data directory")
	}
	base, err := filepath.Abs(o.DataDir)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	dir := filepath.Join(base, "postgres")
	cred, err := runAsCredential()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("chown %s: %w", dir, err)
		}
		// The postgres user must be able to traverse to the data dir.
		for d := base; d != "/" && d != "."; d = filepath.Dir(d) {
			if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
				_ = os.Chmod(d, st.Mode().Perm()|0o001)
			}
		}
	}
	run := func(name string, args ...string) error {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", name, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	p := &Postgres{Source: SourcePrivate, DataDir: dir, bin: bin, runAs: cred}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err != nil {
		o.Log("initialising private postgres cluster", "dir", dir)
		if err := run("initdb", "-D", dir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
			return nil, err
		}
	}
	if port, ok := runningPort(dir); ok {
		p.AdminURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
		if err := tryConnect(ctx, p.AdminURL, 3*time.Second); err == nil {
			return p, nil // someone else's (an earlier `cohort dev`): reuse, do not stop
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c fsync=off -c max_connections=200", port)
	o.Log("starting private postgres", "dir", dir, "port", port)
	if err := run("pg_ctl", "-D", dir, "-o", opts, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "start"); err != nil {
		return nil, err
	}
	p.owned = true
	p.AdminURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := tryConnect(ctx, p.AdminURL, 10*time.Second); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("connect to private postgres: %w", err)
	}
	return p, nil
}

// runningPort reads postmaster.pid: line 1 is the pid, line 4 the port.
func runningPort(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return 0, false
	}
	pid, err1 := strconv.Atoi(strings.TrimSpace(lines[0]))
	port, err2 := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err1 != nil || err2 != nil || syscall.Kill(pid, 0) != nil {
		return 0, false
	}
	return port, true
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
