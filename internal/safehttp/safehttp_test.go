package safehttp

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer is a loopback httptest server that counts its requests.
type countingServer struct {
	*httptest.Server
	hits atomic.Int64
}

func newServer(t *testing.T, h http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *countingServer) addrPort(t *testing.T) netip.AddrPort {
	t.Helper()
	return s.Listener.Addr().(*net.TCPAddr).AddrPort()
}

func (s *countingServer) port() string {
	return strconv.Itoa(s.Listener.Addr().(*net.TCPAddr).Port)
}

// allowOnly is the test hook admitting exactly the given servers.
func allowOnly(t *testing.T, servers ...*countingServer) func(netip.AddrPort) bool {
	t.Helper()
	allowed := make(map[netip.AddrPort]bool)
	for _, s := range servers {
		allowed[s.addrPort(t)] = true
	}
	return func(ap netip.AddrPort) bool { return allowed[ap] }
}

func okHandler(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }

func get(t *testing.T, c *http.Client, url string) (string, error) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestLoopbackServer(t *testing.T) {
	srv := newServer(t, okHandler)
	tests := []struct {
		name    string
		opts    Options
		url     string
		wantErr error
	}{
		{name: "refused by default", opts: Options{}, url: srv.URL, wantErr: ErrBlockedAddress},
		{name: "localhost resolves to loopback and is refused", opts: Options{}, url: "http://localhost:" + srv.port() + "/", wantErr: ErrBlockedAddress},
		{name: "reachable with AllowPrivate", opts: Options{AllowPrivate: true}, url: srv.URL},
		{name: "localhost reachable with AllowPrivate", opts: Options{AllowPrivate: true}, url: "http://localhost:" + srv.port() + "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := srv.hits.Load()
			body, err := get(t, NewClient(tt.opts), tt.url)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if srv.hits.Load() != before {
					t.Fatal("blocked request reached the server")
				}
				return
			}
			if err != nil || body != "ok" {
				t.Fatalf("body, err = %q, %v; want ok", body, err)
			}
		})
	}
}

func TestBlockedErrorNamesHost(t *testing.T) {
	srv := newServer(t, okHandler)
	_, err := get(t, NewClient(Options{}), "http://localhost:"+srv.port()+"/feed?token=s3cret")
	if !errors.Is(err, ErrBlockedAddress) {
		t.Fatalf("err = %v, want ErrBlockedAddress", err)
	}
	// The error chain under net/http's *url.Error names the host, not the query.
	inner := errors.Unwrap(err)
	if inner == nil {
		t.Fatalf("err %v has no inner error", err)
	}
	if msg := inner.Error(); !strings.Contains(msg, "localhost") || strings.Contains(msg, "s3cret") {
		t.Fatalf("inner error %q should name the host and omit the query", msg)
	}
}

// TestBlockedErrorNamesNoAddress: a refusal tells the caller (whose message may reach a
// tenant) that the destination is not allowed, never what the host resolved to; the resolved
// address goes to the server log. Both for the first request and for a redirect hop.
func TestBlockedErrorNamesNoAddress(t *testing.T) {
	blocked := newServer(t, okHandler)
	redirector := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:"+blocked.port()+"/internal", http.StatusFound)
	})
	for _, tc := range []struct {
		name   string
		client func(opts Options) *http.Client
		url    string
	}{
		{"first request", NewClient, "http://localhost:" + blocked.port() + "/feed"},
		{"redirect hop", func(opts Options) *http.Client { return newClient(opts, allowOnly(t, redirector)) }, redirector.URL + "/start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged bytes.Buffer
			c := tc.client(Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
			_, err := get(t, c, tc.url)
			if !errors.Is(err, ErrBlockedAddress) || !Permanent(err) {
				t.Fatalf("err = %v, want a permanent ErrBlockedAddress", err)
			}
			msg := err.Error()
			for _, leak := range []string{"127.0.0.1", "::1", "dial tcp", "ip "} {
				if strings.Contains(msg, leak) {
					t.Errorf("error %q tells what the host resolved to (%q)", msg, leak)
				}
			}
			if !strings.Contains(msg, "destination not allowed") {
				t.Errorf("error %q, want it to say the destination is not allowed", msg)
			}
			// A refused hop is "a redirect target", named by neither its host nor its address;
			// a refused first request is not.
			if redirect := errors.Is(err, ErrBlockedRedirect); redirect != (tc.name == "redirect hop") {
				t.Errorf("errors.Is(%v, ErrBlockedRedirect) = %v", err, redirect)
			}
			if tc.name == "redirect hop" {
				if inner := errors.Unwrap(err); inner == nil || inner.Error() != "a redirect target: destination not allowed" {
					t.Errorf("inner error %v, want \"a redirect target: destination not allowed\"", inner)
				}
			}
			if log := logged.String(); !strings.Contains(log, "host=localhost") ||
				!(strings.Contains(log, "127.0.0.1") || strings.Contains(log, "::1")) {
				t.Errorf("log %q, want the host and the address it resolved to", log)
			}
			if blocked.hits.Load() != 0 {
				t.Fatal("blocked server was reached")
			}
		})
	}
}

func TestPermanent(t *testing.T) {
	for err, want := range map[error]bool{
		fmt.Errorf("get: %w", ErrBlockedAddress):   true,
		fmt.Errorf("get: %w", ErrBadURL):           true,
		fmt.Errorf("get: %w", ErrTooManyRedirects): true,
		fmt.Errorf("get: %w", ErrResponseTooLarge): false,
		errors.New("connection reset by peer"):     false,
	} {
		if got := Permanent(err); got != want {
			t.Errorf("Permanent(%v) = %v, want %v", err, got, want)
		}
	}
}

func TestBlockedAddressesNeverConnect(t *testing.T) {
	// Control runs before connect, so these fail immediately even with no
	// route; a short timeout catches any real connection attempt.
	tests := []struct {
		name string
		opts Options
		url  string
	}{
		{name: "metadata", url: "http://169.254.169.254/computeMetadata/v1/"},
		{name: "metadata with AllowPrivate", opts: Options{AllowPrivate: true}, url: "http://169.254.169.254/latest/meta-data/"},
		{name: "private 10/8", url: "http://10.0.0.1/"},
		{name: "mapped loopback literal", url: "http://[::ffff:127.0.0.1]:1/"},
		{name: "v6 loopback literal", url: "http://[::1]:1/"},
		{name: "unspecified", url: "http://0.0.0.0:1/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Timeout = 5 * time.Second
			_, err := get(t, NewClient(tt.opts), tt.url)
			if !errors.Is(err, ErrBlockedAddress) {
				t.Fatalf("err = %v, want ErrBlockedAddress", err)
			}
		})
	}
}

func TestRedirects(t *testing.T) {
	blocked := newServer(t, okHandler)
	var target atomic.Value // where the allowed server redirects to
	allowed := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/final" {
			io.WriteString(w, "final")
			return
		}
		http.Redirect(w, r, target.Load().(string), http.StatusFound)
	})

	tests := []struct {
		name        string
		target      string
		wantErr     error
		wantBody    string
		wantBlocked int64
	}{
		{name: "to same allowed server", target: "/final", wantBody: "final"},
		{name: "to blocked loopback server", target: blocked.URL + "/", wantErr: ErrBlockedAddress},
		{name: "to localhost name", target: "http://localhost:" + blocked.port() + "/", wantErr: ErrBlockedAddress},
		{name: "to metadata", target: "http://169.254.169.254/latest/meta-data/", wantErr: ErrBlockedAddress},
		{name: "to ftp", target: "ftp://example.com/file", wantErr: ErrBadURL},
		{name: "to file", target: "file:///etc/passwd", wantErr: ErrBadURL},
		{name: "to userinfo", target: "http://user:pass@" + allowed.Listener.Addr().String() + "/final", wantErr: ErrBadURL},
		{name: "to itself forever", target: "/loop", wantErr: ErrTooManyRedirects},
	}
	c := newClient(Options{}, allowOnly(t, allowed))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target.Store(tt.target)
			before := blocked.hits.Load()
			body, err := get(t, c, allowed.URL+"/start")
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			} else if err != nil || body != tt.wantBody {
				t.Fatalf("body, err = %q, %v; want %q", body, err, tt.wantBody)
			}
			if blocked.hits.Load() != before {
				t.Fatal("blocked server was reached")
			}
		})
	}
}

func TestMaxRedirects(t *testing.T) {
	// /n redirects to /n-1 until /0, which answers "done".
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		if n == 0 {
			io.WriteString(w, "done")
			return
		}
		http.Redirect(w, r, "/"+strconv.Itoa(n-1), http.StatusFound)
	})
	tests := []struct {
		name      string
		max       int
		redirects int
		wantErr   bool
	}{
		{name: "no redirect", max: 0, redirects: 0},
		{name: "default allows 5", max: 0, redirects: 5},
		{name: "default refuses 6", max: 0, redirects: 6, wantErr: true},
		{name: "custom allows 2", max: 2, redirects: 2},
		{name: "custom refuses 3", max: 2, redirects: 3, wantErr: true},
		{name: "negative refuses any", max: -1, redirects: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(Options{MaxRedirects: tt.max}, allowOnly(t, srv))
			body, err := get(t, c, srv.URL+"/"+strconv.Itoa(tt.redirects))
			if tt.wantErr {
				if !errors.Is(err, ErrTooManyRedirects) {
					t.Fatalf("err = %v, want ErrTooManyRedirects", err)
				}
				return
			}
			if err != nil || body != "done" {
				t.Fatalf("body, err = %q, %v; want done", body, err)
			}
		})
	}
}

func TestCheckURL(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		wantErr bool
	}{
		{name: "https", raw: "https://example.com/feed.xml?x=1"},
		{name: "http with port", raw: "http://example.com:8080/a"},
		{name: "uppercase scheme", raw: "HTTPS://example.com/"},
		{name: "bare public ip", raw: "http://8.8.8.8/"},
		{name: "bare v6 ip", raw: "http://[2001:4860:4860::8888]/"},
		{name: "bare loopback ip is syntactically fine", raw: "http://127.0.0.1:8080/"},
		{name: "ftp", raw: "ftp://example.com/file", wantErr: true},
		{name: "file", raw: "file:///etc/passwd", wantErr: true},
		{name: "gopher", raw: "gopher://example.com/", wantErr: true},
		{name: "javascript", raw: "javascript:alert(1)", wantErr: true},
		{name: "data", raw: "data:text/plain,hi", wantErr: true},
		{name: "no scheme", raw: "example.com/feed", wantErr: true},
		{name: "bare ip without scheme", raw: "8.8.8.8", wantErr: true},
		{name: "bare ip and port without scheme", raw: "127.0.0.1:8080/feed", wantErr: true},
		{name: "scheme relative", raw: "//example.com/feed", wantErr: true},
		{name: "no host", raw: "http:///path", wantErr: true},
		{name: "port only", raw: "http://:8080/", wantErr: true},
		{name: "opaque", raw: "http:example.com", wantErr: true},
		{name: "userinfo", raw: "http://user:pass@example.com/", wantErr: true},
		{name: "user only", raw: "https://user@example.com/", wantErr: true},
		{name: "userinfo host confusion", raw: "http://example.com@127.0.0.1/", wantErr: true},
		{name: "empty", raw: "", wantErr: true},
		{name: "unparsable", raw: "http://[::1/", wantErr: true},
		{name: "control character", raw: "http://example.com/\x7f\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := CheckURL(tt.raw)
			if tt.wantErr {
				if !errors.Is(err, ErrBadURL) {
					t.Fatalf("CheckURL(%q) err = %v, want ErrBadURL", tt.raw, err)
				}
				return
			}
			if err != nil || u == nil {
				t.Fatalf("CheckURL(%q) = %v, %v", tt.raw, u, err)
			}
		})
	}
}

func TestBadURLRefusedBeforeDial(t *testing.T) {
	srv := newServer(t, okHandler)
	c := newClient(Options{}, allowOnly(t, srv))
	withUser := strings.Replace(srv.URL, "http://", "http://u:p@", 1)
	_, err := get(t, c, withUser)
	if !errors.Is(err, ErrBadURL) {
		t.Fatalf("err = %v, want ErrBadURL", err)
	}
	if srv.hits.Load() != 0 {
		t.Fatal("request with userinfo reached the server")
	}
}

func TestMaxResponseBytes(t *testing.T) {
	const limit = 100
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		body := bytes.Repeat([]byte("x"), n)
		switch r.URL.Query().Get("mode") {
		case "chunked":
			// No Content-Length: flush to force chunked encoding.
			w.Write(body[:n/2])
			w.(http.Flusher).Flush()
			w.Write(body[n/2:])
		case "gzip":
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			zw.Write(body)
			zw.Close()
		default:
			w.Header().Set("Content-Length", strconv.Itoa(n))
			w.Write(body)
		}
	})
	tests := []struct {
		name    string
		max     int64
		n       int
		mode    string
		wantErr bool
	}{
		{name: "under cap", max: limit, n: limit - 1},
		{name: "exactly cap", max: limit, n: limit},
		{name: "over cap by one", max: limit, n: limit + 1, wantErr: true},
		{name: "far over cap", max: limit, n: 1 << 20, wantErr: true},
		{name: "chunked exactly cap", max: limit, n: limit, mode: "chunked"},
		{name: "chunked over cap", max: limit, n: 10 * limit, mode: "chunked", wantErr: true},
		{name: "gzip counts decompressed bytes", max: limit, n: 1 << 20, mode: "gzip", wantErr: true},
		{name: "gzip under cap", max: limit, n: limit, mode: "gzip"},
		{name: "no cap", max: 0, n: 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(Options{MaxResponseBytes: tt.max}, allowOnly(t, srv))
			body, err := get(t, c, fmt.Sprintf("%s/?n=%d&mode=%s", srv.URL, tt.n, tt.mode))
			if tt.wantErr {
				if !errors.Is(err, ErrResponseTooLarge) {
					t.Fatalf("err = %v, want ErrResponseTooLarge", err)
				}
				if int64(len(body)) > tt.max {
					t.Fatalf("read %d bytes past the cap of %d", len(body), tt.max)
				}
				return
			}
			if err != nil || len(body) != tt.n {
				t.Fatalf("read %d bytes, err %v; want %d, nil", len(body), err, tt.n)
			}
		})
	}
}

func TestLimitedBodyStreaming(t *testing.T) {
	// Small reads across the boundary: exactly max bytes then the error.
	l := &limitedBody{rc: io.NopCloser(strings.NewReader("abcdefgh")), remaining: 5, max: 5, declared: -1}
	var got []byte
	buf := make([]byte, 2)
	var err error
	for err == nil {
		var n int
		n, err = l.Read(buf)
		got = append(got, buf[:n]...)
	}
	if string(got) != "abcde" || !errors.Is(err, ErrResponseTooLarge) {
		t.Fatalf("got %q, %v; want abcde, ErrResponseTooLarge", got, err)
	}
	if _, err := l.Read(buf); !errors.Is(err, ErrResponseTooLarge) {
		t.Fatalf("read after exceeding: %v", err)
	}
}

func TestUserAgent(t *testing.T) {
	var got atomic.Value
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("User-Agent"))
	})
	tests := []struct {
		name      string
		opts      Options
		requestUA string
		want      string
	}{
		{name: "default", want: "cohort/1"},
		{name: "configured", opts: Options{UserAgent: "cohort-feeds/2"}, want: "cohort-feeds/2"},
		{name: "request header wins", opts: Options{UserAgent: "cohort-feeds/2"}, requestUA: "custom/3", want: "custom/3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(tt.opts, allowOnly(t, srv))
			req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.requestUA != "" {
				req.Header.Set("User-Agent", tt.requestUA)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if ua := got.Load(); ua != tt.want {
				t.Fatalf("User-Agent = %v, want %q", ua, tt.want)
			}
			if tt.requestUA == "" && req.Header.Get("User-Agent") != "" {
				t.Fatal("caller's request was modified")
			}
		})
	}
}

func TestClientConfig(t *testing.T) {
	c := NewClient(Options{})
	if c.Timeout != DefaultTimeout {
		t.Errorf("Timeout = %v, want %v", c.Timeout, DefaultTimeout)
	}
	rt, ok := c.Transport.(*roundTripper)
	if !ok {
		t.Fatalf("Transport is %T", c.Transport)
	}
	tr := rt.base
	if tr.Proxy != nil {
		t.Error("transport must not use a proxy")
	}
	if tr.TLSHandshakeTimeout != 10*time.Second || tr.ResponseHeaderTimeout != 20*time.Second {
		t.Errorf("timeouts: tls %v, header %v", tr.TLSHandshakeTimeout, tr.ResponseHeaderTimeout)
	}
	if tr == http.DefaultTransport {
		t.Error("must not share http.DefaultTransport")
	}
	if c2 := NewClient(Options{Timeout: time.Second}); c2.Timeout != time.Second {
		t.Errorf("custom Timeout = %v", c2.Timeout)
	}
	c.CloseIdleConnections() // reaches the pool through roundTripper
}

func TestProxyEnvironmentIgnored(t *testing.T) {
	proxy := newServer(t, okHandler)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	t.Setenv("NO_PROXY", "")
	// 10.255.255.1 is blocked; with a proxy it would be handed to the
	// (allowed) proxy instead of being dialed.
	c := newClient(Options{Timeout: 5 * time.Second}, allowOnly(t, proxy))
	_, err := get(t, c, "http://10.255.255.1/")
	if !errors.Is(err, ErrBlockedAddress) {
		t.Fatalf("err = %v, want ErrBlockedAddress", err)
	}
	if proxy.hits.Load() != 0 {
		t.Fatal("request went through the environment proxy")
	}
}

func TestControl(t *testing.T) {
	tests := []struct {
		name    string
		guard   guard
		network string
		address string
		wantErr bool
	}{
		{name: "public tcp4", network: "tcp4", address: "8.8.8.8:443"},
		{name: "public tcp6", network: "tcp6", address: "[2001:4860:4860::8888]:443"},
		{name: "loopback", network: "tcp4", address: "127.0.0.1:80", wantErr: true},
		{name: "zoned link-local", network: "tcp6", address: "[fe80::1%eth0]:80", wantErr: true},
		{name: "udp refused", network: "udp4", address: "8.8.8.8:53", wantErr: true},
		{name: "unparsable address", network: "tcp4", address: "example.com:80", wantErr: true},
		{name: "loopback with AllowPrivate", guard: guard{allowPrivate: true}, network: "tcp4", address: "127.0.0.1:80"},
		{name: "hook admits only its port", guard: guard{allowAddr: func(ap netip.AddrPort) bool { return ap.Port() == 8080 }}, network: "tcp4", address: "127.0.0.1:8081", wantErr: true},
		{name: "hook admits its port", guard: guard{allowAddr: func(ap netip.AddrPort) bool { return ap.Port() == 8080 }}, network: "tcp4", address: "127.0.0.1:8080"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.guard.control(tt.network, tt.address, nil)
			if tt.wantErr != errors.Is(err, ErrBlockedAddress) {
				t.Fatalf("control(%s, %s) = %v, wantErr %v", tt.network, tt.address, err, tt.wantErr)
			}
		})
	}
}
