// Package safehttp is the one outbound HTTP client for user-supplied URLs
// (product feeds, images, platform endpoints). It refuses to reach internal
// addresses (SSRF): every connection is checked after DNS resolution on the IP
// actually being dialed, so redirects and DNS rebinding are covered too.
package safehttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

var (
	// ErrBlockedAddress means the URL's host resolved to an address user URLs may not reach. The
	// error names the host it was given, never the address the host resolved to (that would tell
	// a tenant what an internal name points at): the address goes to Options.Logger.
	ErrBlockedAddress = errors.New("destination not allowed")
	// ErrBlockedRedirect means a redirect led to an address user URLs may not reach; it matches
	// ErrBlockedAddress too. It names neither the refused hop's host nor its address, and says
	// the refused destination is a redirect target, not the host the caller asked for.
	ErrBlockedRedirect = fmt.Errorf("a redirect target: %w", ErrBlockedAddress)
	// ErrBadURL means the URL is not an absolute http(s) URL with a host and no userinfo.
	ErrBadURL = errors.New("safehttp: bad url")
	// ErrResponseTooLarge is returned by a response body reader after Options.MaxResponseBytes.
	ErrResponseTooLarge = errors.New("safehttp: response too large")
	// ErrTooManyRedirects means the request was redirected more than Options.MaxRedirects times.
	ErrTooManyRedirects = errors.New("safehttp: too many redirects")
)

// Defaults applied by NewClient for zero Options fields.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultMaxRedirects = 5
	DefaultUserAgent    = "cohort/1"
)

const (
	dialTimeout           = 10 * time.Second
	tlsHandshakeTimeout   = 10 * time.Second
	responseHeaderTimeout = 20 * time.Second
	idleConnTimeout       = 90 * time.Second
)

// Options configures NewClient.
type Options struct {
	// AllowPrivate (COHORT_ALLOW_PRIVATE_NETWORKS=true) allows loopback,
	// private and other internal addresses, for dev and tests. Link-local
	// addresses (cloud metadata, 169.254.169.254) stay blocked.
	AllowPrivate bool
	// Timeout bounds the whole request including reading the body; 0 means 30s.
	Timeout time.Duration
	// MaxRedirects is how many redirects are followed; 0 means 5, negative means none.
	MaxRedirects int
	// MaxResponseBytes caps the (decompressed) response body: reads fail with
	// ErrResponseTooLarge once the body exceeds it. 0 means no cap.
	MaxResponseBytes int64
	// UserAgent is sent when the request sets none; "" means "cohort/1".
	UserAgent string
	// Logger receives the detail of every refused connection (the host, the address it
	// resolved to and why it is refused), which the returned error leaves out; nil logs nothing.
	Logger *slog.Logger
}

// Permanent reports whether err is a refusal that retrying cannot change: a blocked destination,
// a bad URL, or a redirect loop (ErrTooManyRedirects).
func Permanent(err error) bool {
	return errors.Is(err, ErrBlockedAddress) || errors.Is(err, ErrBadURL) || errors.Is(err, ErrTooManyRedirects)
}

// NewClient returns an *http.Client for user-supplied URLs. It uses its own
// Transport (no proxy from the environment, so a proxy cannot be used to
// bypass the address check), refuses non-http(s) URLs and URLs with userinfo
// on the first request and every redirect, and refuses to connect to blocked
// addresses (see IsBlockedIP) unless opts.AllowPrivate is set. Errors from Do
// wrap ErrBlockedAddress (ErrBlockedRedirect for a redirect hop), ErrBadURL or
// ErrTooManyRedirects; note that
// net/http wraps them in a *url.Error whose message includes the request URL.
// A blocked address's error names the host only; the resolved address is
// logged to opts.Logger.
func NewClient(opts Options) *http.Client {
	return newClient(opts, nil)
}

// newClient is NewClient with a test hook: allowAddr, when non-nil, admits
// the specific addresses it returns true for even though they are blocked.
// It exists so in-package tests can reach one httptest server on loopback
// while every other loopback address stays blocked.
func newClient(opts Options, allowAddr func(netip.AddrPort) bool) *http.Client {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxRedirects == 0 {
		opts.MaxRedirects = DefaultMaxRedirects
	}
	if opts.UserAgent == "" {
		opts.UserAgent = DefaultUserAgent
	}

	g := &guard{allowPrivate: opts.AllowPrivate, allowAddr: allowAddr, log: opts.Logger}
	dialer := &net.Dialer{
		Timeout:   dialTimeout,
		KeepAlive: 30 * time.Second,
		Control:   g.control,
	}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           g.dialContext(dialer),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   10,
		IdleConnTimeout:       idleConnTimeout,
		TLSHandshakeTimeout:   tlsHandshakeTimeout,
		ResponseHeaderTimeout: responseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
	}
	maxRedirects := max(opts.MaxRedirects, 0)
	return &http.Client{
		Transport: &roundTripper{
			base:      transport,
			userAgent: opts.UserAgent,
			maxBytes:  opts.MaxResponseBytes,
		},
		Timeout: opts.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return fmt.Errorf("redirect to %s: stopped after %d: %w", req.URL.Host, maxRedirects, ErrTooManyRedirects)
			}
			if err := checkURL(req.URL); err != nil {
				return fmt.Errorf("redirect to %s: %w", req.URL.Host, err)
			}
			return nil
		},
	}
}

// CheckURL parses raw and checks that it is an absolute http or https URL
// with a host and without userinfo. It does not resolve the host: the address
// check happens when connecting. Errors wrap ErrBadURL.
func CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // drop the echo of the full URL
		}
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	if err := checkURL(u); err != nil {
		return nil, err
	}
	return u, nil
}

func checkURL(u *url.URL) error {
	switch {
	case u == nil:
		return fmt.Errorf("%w: missing", ErrBadURL)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: scheme %q not allowed, want http or https", ErrBadURL, u.Scheme)
	case u.Opaque != "":
		return fmt.Errorf("%w: not a hierarchical url", ErrBadURL)
	case u.User != nil:
		return fmt.Errorf("%w: userinfo not allowed", ErrBadURL)
	case u.Hostname() == "":
		return fmt.Errorf("%w: host required", ErrBadURL)
	}
	return nil
}

// guard decides which dialed addresses are allowed.
type guard struct {
	allowPrivate bool
	allowAddr    func(netip.AddrPort) bool // test hook, see newClient
	log          *slog.Logger              // nil: refusals are not logged
}

// control runs for every socket the dialer opens, after DNS resolution and
// before connect, with the literal IP being dialed.
func (g *guard) control(network, address string, _ syscall.RawConn) error {
	switch network {
	case "tcp4", "tcp6":
	default:
		return fmt.Errorf("network %s: %w", network, ErrBlockedAddress)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("address %s: %w", address, ErrBlockedAddress)
	}
	if !g.allowed(ap) {
		return fmt.Errorf("ip %s: %w", ap.Addr(), ErrBlockedAddress)
	}
	return nil
}

func (g *guard) allowed(ap netip.AddrPort) bool {
	if g.allowAddr != nil && g.allowAddr(ap) {
		return true
	}
	ip := ap.Addr()
	if g.allowPrivate {
		return !isAlwaysBlocked(ip)
	}
	return !IsBlockedIP(ip)
}

// dialContext turns a refused address into an error that names the host the
// caller gave and nothing else: the dialer's error carries the resolved IP
// (what an internal name points at), which goes to the log only.
func (g *guard) dialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil && errors.Is(err, ErrBlockedAddress) {
			host, _, splitErr := net.SplitHostPort(addr)
			if splitErr != nil {
				host = addr
			}
			if g.log != nil {
				g.log.WarnContext(ctx, "safehttp: destination refused", "host", host, "detail", err.Error())
			}
			return nil, fmt.Errorf("host %s: %w", host, ErrBlockedAddress)
		}
		return conn, err
	}
}

// roundTripper checks every request URL (the first and each redirect hop),
// sets the default User-Agent and caps the response body.
type roundTripper struct {
	base      *http.Transport
	userAgent string
	maxBytes  int64
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := checkURL(req.URL); err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper must close the body, even on error
		}
		return nil, err
	}
	if req.Header.Get("User-Agent") == "" {
		req = req.Clone(req.Context())
		req.Header.Set("User-Agent", rt.userAgent)
	}
	resp, err := rt.base.RoundTrip(req)
	if err != nil {
		if req.Response != nil && errors.Is(err, ErrBlockedAddress) {
			// A redirect hop (net/http sets Response on the requests it follows redirects with).
			return nil, ErrBlockedRedirect
		}
		return nil, err
	}
	if rt.maxBytes > 0 && resp.Body != nil {
		resp.Body = &limitedBody{rc: resp.Body, remaining: rt.maxBytes, max: rt.maxBytes, declared: resp.ContentLength}
	}
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the pool.
func (rt *roundTripper) CloseIdleConnections() { rt.base.CloseIdleConnections() }

// limitedBody fails with ErrResponseTooLarge once more than max bytes have
// been read, or at the first read when Content-Length already exceeds max.
type limitedBody struct {
	rc        io.ReadCloser
	remaining int64
	max       int64
	declared  int64
	exceeded  bool
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.exceeded || l.declared > l.max {
		l.exceeded = true
		return 0, l.tooLarge()
	}
	if len(p) == 0 {
		return l.rc.Read(p)
	}
	// Read one byte past the cap so a body of exactly max bytes still ends
	// with io.EOF rather than an error.
	if int64(len(p)) > l.remaining+1 {
		p = p[:l.remaining+1]
	}
	n, err := l.rc.Read(p)
	if int64(n) > l.remaining {
		n = int(l.remaining)
		l.remaining = 0
		l.exceeded = true
		return n, l.tooLarge()
	}
	l.remaining -= int64(n)
	return n, err
}

func (l *limitedBody) tooLarge() error {
	return fmt.Errorf("body over %d bytes: %w", l.max, ErrResponseTooLarge)
}

func (l *limitedBody) Close() error { return l.rc.Close() }
