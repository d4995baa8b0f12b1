package blob

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testenv"
)

var testSigningKey = []byte("0123456789abcdef0123456789abcdef")

const testBaseURL = "http://127.0.0.1:8080"

func newTestLocal(t *testing.T) (*Local, *testenv.Clock, string) {
	t.Helper()
	clock := testenv.NewClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	dir := filepath.Join(t.TempDir(), "blobs")
	l, err := NewLocal(LocalConfig{Dir: dir, BaseURL: testBaseURL, SigningKey: testSigningKey, Now: clock.Now})
	if err != nil {
		t.Fatalf("NewLocal: %v", err)
	}
	return l, clock, dir
}

func mustPut(t *testing.T, s Store, key string, data []byte, contentType string) {
	t.Helper()
	n, err := s.Put(context.Background(), key, bytes.NewReader(data), contentType)
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	if n != int64(len(data)) {
		t.Fatalf("Put(%q) wrote %d bytes, want %d", key, n, len(data))
	}
}

func mustRead(t *testing.T, s Store, key string) []byte {
	t.Helper()
	rc, err := s.Open(context.Background(), key)
	if err != nil {
		t.Fatalf("Open(%q): %v", key, err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return got
}

func TestNewLocalConfig(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name     string
		cfg      LocalConfig
		wantBase string // empty: want an error
	}{
		{name: "ok", cfg: LocalConfig{Dir: dir, BaseURL: "http://127.0.0.1:8080", SigningKey: testSigningKey}, wantBase: "http://127.0.0.1:8080"},
		{name: "trailing slash trimmed", cfg: LocalConfig{Dir: dir, BaseURL: "https://cohort.example/", SigningKey: testSigningKey}, wantBase: "https://cohort.example"},
		{name: "path prefix kept", cfg: LocalConfig{Dir: dir, BaseURL: "https://example.com/cohort/", SigningKey: testSigningKey}, wantBase: "https://example.com/cohort"},
		{name: "no dir", cfg: LocalConfig{BaseURL: "http://127.0.0.1:8080", SigningKey: testSigningKey}},
		{name: "no base url", cfg: LocalConfig{Dir: dir, SigningKey: testSigningKey}},
		{name: "relative base url", cfg: LocalConfig{Dir: dir, BaseURL: "127.0.0.1:8080", SigningKey: testSigningKey}},
		{name: "ftp base url", cfg: LocalConfig{Dir: dir, BaseURL: "ftp://h", SigningKey: testSigningKey}},
		{name: "base url with query", cfg: LocalConfig{Dir: dir, BaseURL: "http://h/?a=b", SigningKey: testSigningKey}},
		{name: "short signing key", cfg: LocalConfig{Dir: dir, BaseURL: "http://h", SigningKey: []byte("short")}},
		{name: "no signing key", cfg: LocalConfig{Dir: dir, BaseURL: "http://h"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLocal(tt.cfg)
			if tt.wantBase == "" {
				if err == nil {
					t.Fatalf("NewLocal succeeded, want an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("NewLocal: %v", err)
			}
			if l.baseURL != tt.wantBase {
				t.Fatalf("base url = %q, want %q", l.baseURL, tt.wantBase)
			}
		})
	}
}

func TestLocalRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	tests := []struct {
		name        string
		key         string
		data        []byte
		contentType string
		wantType    string
	}{
		{name: "csv", key: "t1/exports/segment-7.csv", data: []byte("id,email\n1,a@example.com\n"), contentType: "text/csv", wantType: "text/csv"},
		{name: "empty object", key: "t1/empty", data: nil, contentType: "text/plain", wantType: "text/plain"},
		{name: "default content type", key: "t1/raw.bin", data: []byte{0, 1, 2, 255}, wantType: DefaultContentType},
		{name: "large", key: "t1/big.bin", data: big, contentType: "application/gzip", wantType: "application/gzip"},
		{name: "file and directory names coexist", key: "t1/exports", data: []byte("same name as a prefix"), contentType: "text/plain", wantType: "text/plain"},
		{name: "max length key", key: strings.Repeat("k", MaxKeyLen), data: []byte("x"), contentType: "text/plain", wantType: "text/plain"},
	}
	l, clock, _ := newTestLocal(t)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock.Advance(time.Minute)
			mustPut(t, l, tt.key, tt.data, tt.contentType)
			if got := mustRead(t, l, tt.key); !bytes.Equal(got, tt.data) {
				t.Fatalf("content mismatch: got %d bytes, want %d", len(got), len(tt.data))
			}
			info, err := l.Stat(ctx, tt.key)
			if err != nil {
				t.Fatalf("Stat: %v", err)
			}
			want := Info{Key: tt.key, Size: int64(len(tt.data)), ContentType: tt.wantType, Updated: clock.Now()}
			if info != want {
				t.Fatalf("Stat = %+v, want %+v", info, want)
			}
		})
	}
	// Every object is still there after the others were written.
	for _, tt := range tests {
		if got := mustRead(t, l, tt.key); !bytes.Equal(got, tt.data) {
			t.Fatalf("%s: content changed after later puts", tt.name)
		}
	}
}

func TestLocalOverwrite(t *testing.T) {
	l, clock, _ := newTestLocal(t)
	ctx := context.Background()
	const key = "t1/exports/latest.csv"
	mustPut(t, l, key, []byte("version one, the longer one"), "text/csv")

	before, err := l.Open(ctx, key)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer before.Close()

	clock.Advance(time.Hour)
	mustPut(t, l, key, []byte("v2"), "application/json")

	if got := mustRead(t, l, key); string(got) != "v2" {
		t.Fatalf("after overwrite read %q, want %q", got, "v2")
	}
	info, err := l.Stat(ctx, key)
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	if want := (Info{Key: key, Size: 2, ContentType: "application/json", Updated: clock.Now()}); info != want {
		t.Fatalf("Stat = %+v, want %+v", info, want)
	}
	// A reader opened before the overwrite keeps seeing the old version whole.
	old, err := io.ReadAll(before)
	if err != nil {
		t.Fatalf("read old: %v", err)
	}
	if string(old) != "version one, the longer one" {
		t.Fatalf("old reader read %q", old)
	}
}

func TestLocalNotFoundAndDelete(t *testing.T) {
	l, _, _ := newTestLocal(t)
	ctx := context.Background()
	const key = "t1/gone.csv"

	tests := []struct {
		name string
		run  func() error
		want error
	}{
		{name: "open missing", run: func() error { _, err := l.Open(ctx, key); return err }, want: ErrNotFound},
		{name: "stat missing", run: func() error { _, err := l.Stat(ctx, key); return err }, want: ErrNotFound},
		{name: "delete missing", run: func() error { return l.Delete(ctx, key) }, want: nil},
		{name: "put", run: func() error { _, err := l.Put(ctx, key, strings.NewReader("x"), "text/plain"); return err }, want: nil},
		{name: "open present", run: func() error { rc, err := l.Open(ctx, key); closeIf(rc); return err }, want: nil},
		{name: "delete present", run: func() error { return l.Delete(ctx, key) }, want: nil},
		{name: "open deleted", run: func() error { _, err := l.Open(ctx, key); return err }, want: ErrNotFound},
		{name: "stat deleted", run: func() error { _, err := l.Stat(ctx, key); return err }, want: ErrNotFound},
		{name: "delete deleted", run: func() error { return l.Delete(ctx, key) }, want: nil},
	}
	for _, tt := range tests { // sequential on purpose: each row builds on the last
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if tt.want == nil && err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func closeIf(c io.Closer) {
	if c != nil {
		_ = c.Close()
	}
}

func TestLocalInvalidKeysNeverTouchTheFilesystem(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "store", "blobs")
	l, err := NewLocal(LocalConfig{Dir: dir, BaseURL: testBaseURL, SigningKey: testSigningKey})
	if err != nil {
		t.Fatalf("NewLocal: %v", err)
	}
	// Bait outside the store that a traversal would reach.
	secret := filepath.Join(root, "store", "secret")
	if err := os.WriteFile(secret, []byte("do not serve"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys := []struct {
		name string
		key  string
	}{
		{name: "parent", key: "../secret"},
		{name: "parent after segment", key: "a/../../secret"},
		{name: "deep parent", key: "../../../../../../etc/passwd"},
		{name: "absolute", key: "/etc/passwd"},
		{name: "absolute into root", key: secret},
		{name: "dot dot only", key: ".."},
		{name: "dot", key: "."},
		{name: "backslash", key: `..\secret`},
		{name: "encoded", key: "..%2Fsecret"},
		{name: "empty", key: ""},
		{name: "trailing slash", key: "a/"},
		{name: "nul byte", key: "a\x00/../secret"},
	}
	for _, tt := range keys {
		t.Run(tt.name, func(t *testing.T) {
			type result struct {
				op  string
				err error
			}
			_, putErr := l.Put(ctx, tt.key, strings.NewReader("overwrite"), "text/plain")
			rc, openErr := l.Open(ctx, tt.key)
			closeIf(rc)
			_, statErr := l.Stat(ctx, tt.key)
			_, signErr := l.SignedURL(ctx, tt.key, time.Minute)
			ops := []result{
				{"put", putErr},
				{"open", openErr},
				{"stat", statErr},
				{"delete", l.Delete(ctx, tt.key)},
				{"signed url", signErr},
				{"verify", l.Verify(tt.key, "9999999999", strings.Repeat("0", 64))},
			}
			for _, o := range ops {
				if !errors.Is(o.err, ErrInvalidKey) {
					t.Errorf("%s(%q) = %v, want ErrInvalidKey", o.op, tt.key, o.err)
				}
			}
		})
	}
	if got, err := os.ReadFile(secret); err != nil || string(got) != "do not serve" {
		t.Fatalf("bait file changed: %q, %v", got, err)
	}
	// Nothing was created anywhere: the store dir is still empty and the bait
	// is the only other file.
	var files []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0] != secret {
		t.Fatalf("files on disk = %v, want only %s", files, secret)
	}
}

type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestLocalFailedPutKeepsPreviousVersion(t *testing.T) {
	readErr := errors.New("client went away")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		r       io.Reader
		wantErr error
	}{
		{name: "reader error midway", ctx: context.Background(), r: &failingReader{data: []byte("partial"), err: readErr}, wantErr: readErr},
		{name: "cancelled context", ctx: cancelled, r: strings.NewReader("new"), wantErr: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _, dir := newTestLocal(t)
			const key = "t1/report.csv"
			mustPut(t, l, key, []byte("old"), "text/csv")
			if _, err := l.Put(tt.ctx, key, tt.r, "text/csv"); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Put err = %v, want %v", err, tt.wantErr)
			}
			if got := mustRead(t, l, key); string(got) != "old" {
				t.Fatalf("after failed put read %q, want %q", got, "old")
			}
			// No temporary file is left behind.
			var n int
			_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					n++
				}
				return err
			})
			if n != 1 {
				t.Fatalf("%d files in store, want 1", n)
			}
		})
	}
}

func TestLocalFilePermissionsAndSeek(t *testing.T) {
	l, _, dir := newTestLocal(t)
	const key = "t1/x.txt"
	mustPut(t, l, key, []byte("hello, world"), "text/plain")
	p := l.path(key)
	if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
		t.Fatalf("object path %s is not under %s", p, dir)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("file mode = %v, want 0640", fi.Mode().Perm())
	}
	di, err := os.Stat(filepath.Dir(p))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm()&^0o750 != 0 {
		t.Errorf("dir mode = %v, want at most 0750", di.Mode().Perm())
	}

	rc, err := l.Open(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	rs, ok := rc.(io.ReadSeeker)
	if !ok {
		t.Fatalf("%T does not implement io.ReadSeeker", rc)
	}
	if end, err := rs.Seek(0, io.SeekEnd); err != nil || end != 12 {
		t.Fatalf("Seek end = %d, %v; want 12", end, err)
	}
	if _, err := rs.Seek(7, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(rs); string(got) != "world" {
		t.Fatalf("read after seek = %q, want %q", got, "world")
	}
}

func TestLocalSignedURL(t *testing.T) {
	l, clock, _ := newTestLocal(t)
	ctx := context.Background()
	const key = "t1/exports/segment-7.csv"
	const ttl = 15 * time.Minute
	signedAt := clock.Now()

	raw, err := l.SignedURL(ctx, key, ttl)
	if err != nil {
		t.Fatalf("SignedURL: %v", err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("parse %q: %v", raw, err)
	}
	if want := testBaseURL + SignedPathPrefix + key; u.Scheme+"://"+u.Host+u.Path != want {
		t.Fatalf("url %q does not start with %q", raw, want)
	}
	q := u.Query()
	expires, sig := q.Get("expires"), q.Get("sig")
	if want := strconv.FormatInt(signedAt.Add(ttl).Unix(), 10); expires != want {
		t.Fatalf("expires = %q, want %q", expires, want)
	}
	if len(sig) != 64 {
		t.Fatalf("sig = %q, want 64 hex characters", sig)
	}
	gotKey := strings.TrimPrefix(u.Path, SignedPathPrefix)

	other, err := NewLocal(LocalConfig{Dir: t.TempDir(), BaseURL: testBaseURL, SigningKey: bytes.Repeat([]byte("z"), 32), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	flip := func(s string) string { // change the last hex digit
		b := []byte(s)
		if b[len(b)-1] == '0' {
			b[len(b)-1] = '1'
		} else {
			b[len(b)-1] = '0'
		}
		return string(b)
	}
	exp, _ := strconv.ParseInt(expires, 10, 64)

	tests := []struct {
		name    string
		verify  func(key, expires, sig string) error
		key     string
		expires string
		sig     string
		advance time.Duration // from signedAt
		want    error
	}{
		{name: "ok", key: gotKey, expires: expires, sig: sig},
		{name: "ok upper-case hex", key: gotKey, expires: expires, sig: strings.ToUpper(sig)},
		{name: "ok one second before expiry", key: gotKey, expires: expires, sig: sig, advance: ttl - time.Second},
		{name: "expired at expiry", key: gotKey, expires: expires, sig: sig, advance: ttl, want: ErrExpired},
		{name: "expired later", key: gotKey, expires: expires, sig: sig, advance: 24 * time.Hour, want: ErrExpired},
		{name: "tampered sig", key: gotKey, expires: expires, sig: flip(sig), want: ErrBadSignature},
		{name: "tampered key", key: "t1/exports/segment-8.csv", expires: expires, sig: sig, want: ErrBadSignature},
		{name: "tampered key prefix", key: "t2/exports/segment-7.csv", expires: expires, sig: sig, want: ErrBadSignature},
		{name: "extended expiry", key: gotKey, expires: strconv.FormatInt(exp+3600, 10), sig: sig, want: ErrBadSignature},
		{name: "extended expiry after expiry is still bad signature", key: gotKey, expires: strconv.FormatInt(exp+3600, 10), sig: sig, advance: ttl, want: ErrBadSignature},
		{name: "other signing key", verify: other.Verify, key: gotKey, expires: expires, sig: sig, want: ErrBadSignature},
		{name: "invalid key", key: "../" + gotKey, expires: expires, sig: sig, want: ErrInvalidKey},
		{name: "malformed expires empty", key: gotKey, expires: "", sig: sig, want: ErrBadSignature},
		{name: "malformed expires letters", key: gotKey, expires: "soon", sig: sig, want: ErrBadSignature},
		{name: "malformed expires plus sign", key: gotKey, expires: "+" + expires, sig: sig, want: ErrBadSignature},
		{name: "malformed expires leading zero", key: gotKey, expires: "0" + expires, sig: sig, want: ErrBadSignature},
		{name: "malformed expires negative", key: gotKey, expires: "-1", sig: sig, want: ErrBadSignature},
		{name: "malformed expires float", key: gotKey, expires: expires + ".0", sig: sig, want: ErrBadSignature},
		{name: "malformed expires overflow", key: gotKey, expires: "99999999999999999999", sig: sig, want: ErrBadSignature},
		{name: "malformed sig empty", key: gotKey, expires: expires, sig: "", want: ErrBadSignature},
		{name: "malformed sig not hex", key: gotKey, expires: expires, sig: strings.Repeat("zz", 32), want: ErrBadSignature},
		{name: "malformed sig truncated", key: gotKey, expires: expires, sig: sig[:62], want: ErrBadSignature},
		{name: "malformed sig extended", key: gotKey, expires: expires, sig: sig + "00", want: ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock.Set(signedAt.Add(tt.advance))
			verify := tt.verify
			if verify == nil {
				verify = l.Verify
			}
			err := verify(tt.key, tt.expires, tt.sig)
			if tt.want == nil && err != nil {
				t.Fatalf("Verify = %v, want nil", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestLocalSignedURLRoundsExpiryUp(t *testing.T) {
	l, clock, _ := newTestLocal(t)
	clock.Set(clock.Now().Add(300 * time.Millisecond))
	raw, err := l.SignedURL(context.Background(), "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(raw)
	want := clock.Now().Truncate(time.Second).Add(11 * time.Second).Unix()
	if got := u.Query().Get("expires"); got != strconv.FormatInt(want, 10) {
		t.Fatalf("expires = %s, want %d (rounded up, never shorter than ttl)", got, want)
	}
}

func TestLocalSignedURLTTL(t *testing.T) {
	l, _, _ := newTestLocal(t)
	tests := []struct {
		name string
		ttl  time.Duration
		want error
	}{
		{name: "one minute", ttl: time.Minute},
		{name: "seven days", ttl: MaxSignedURLTTL},
		{name: "zero", ttl: 0, want: ErrInvalidTTL},
		{name: "negative", ttl: -time.Second, want: ErrInvalidTTL},
		{name: "over seven days", ttl: MaxSignedURLTTL + time.Second, want: ErrInvalidTTL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.SignedURL(context.Background(), "t1/x", tt.ttl)
			if tt.want == nil && err != nil {
				t.Fatalf("SignedURL = %v, want nil", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("SignedURL = %v, want %v", err, tt.want)
			}
		})
	}
}

// A URL signed before the secret key was rotated verifies while the old key is kept as a
// previous key; new URLs are signed with the new key, and without the previous key the old URL
// is refused.
func TestLocalSignedURLPreviousKey(t *testing.T) {
	ctx := context.Background()
	clock := testenv.NewClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	oldKey, newKey := bytes.Repeat([]byte("o"), 32), bytes.Repeat([]byte("n"), 32)
	dir := t.TempDir()
	open := func(prev ...[]byte) *Local {
		l, err := NewLocal(LocalConfig{Dir: dir, BaseURL: testBaseURL, SigningKey: newKey, PreviousSigningKeys: prev, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	before, err := NewLocal(LocalConfig{Dir: dir, BaseURL: testBaseURL, SigningKey: oldKey, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	const key = "t1/exports/page-3.zip"
	parts := func(l *Local) (string, string) {
		raw, err := l.SignedURL(ctx, key, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return u.Query().Get("expires"), u.Query().Get("sig")
	}
	exp, sig := parts(before)
	if err := open(oldKey).Verify(key, exp, sig); err != nil {
		t.Fatalf("old link with the previous key kept: %v", err)
	}
	if err := open().Verify(key, exp, sig); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("old link without the previous key: %v, want ErrBadSignature", err)
	}
	exp, sig = parts(open(oldKey))
	if err := open().Verify(key, exp, sig); err != nil {
		t.Fatalf("a new link is not signed with the new key: %v", err)
	}
	if err := before.Verify(key, exp, sig); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("a new link verified with the old key alone: %v", err)
	}
	if _, err := NewLocal(LocalConfig{Dir: dir, BaseURL: testBaseURL, SigningKey: newKey, PreviousSigningKeys: [][]byte{[]byte("short")}}); err == nil {
		t.Fatal("a short previous key was accepted")
	}
}
