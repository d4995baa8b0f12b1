package blob

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/md5"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"
)

// fakeGCS is a loopback server speaking the subset of the GCS JSON and XML
// APIs that cloud.google.com/go/storage uses for GCS's methods:
//
//	POST   /upload/storage/v1/b/{bucket}/o?uploadType=multipart        single-request upload
//	POST   /upload/storage/v1/b/{bucket}/o?uploadType=resumable        start a resumable session
//	POST   /upload/storage/v1/b/{bucket}/o?...&upload_id={id}          resumable chunk (Content-Range)
//	GET    /storage/v1/b/{bucket}/o/{object}                           metadata (alt=json)
//	GET    /storage/v1/b/{bucket}/o/{object}?alt=media                 JSON API download
//	DELETE /storage/v1/b/{bucket}/o/{object}
//	GET    /{bucket}/{object}                                          XML API download (the default)
//
// {object} arrives path-escaped ("/" as %2F). Anything else fails the test.
type fakeGCS struct {
	t      *testing.T
	bucket string
	srv    *httptest.Server

	mu      sync.Mutex
	objects map[string]fakeObject
	uploads map[string]*fakeUpload
	gen     int64
	calls   []fakeCall
}

type fakeObject struct {
	data        []byte
	contentType string
	generation  int64
	updated     time.Time
}

type fakeUpload struct {
	name, contentType string
	data              []byte
	chunks            int
}

type fakeCall struct {
	method, path string // path as escaped on the wire
	query        url.Values
}

func (c fakeCall) String() string {
	return c.method + " " + c.path + "?" + c.query.Encode()
}

var fakeEpoch = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func newFakeGCS(t *testing.T, bucket string) *fakeGCS {
	f := &fakeGCS{t: t, bucket: bucket, objects: map[string]fakeObject{}, uploads: map[string]*fakeUpload{}}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGCS) object(name string) (fakeObject, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.objects[name]
	return o, ok
}

func (f *fakeGCS) recorded() []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeCall(nil), f.calls...)
}

func (f *fakeGCS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	f.mu.Lock()
	f.calls = append(f.calls, fakeCall{method: r.Method, path: path, query: r.URL.Query()})
	f.mu.Unlock()

	uploadPrefix := "/upload/storage/v1/b/" + f.bucket + "/o"
	jsonPrefix := "/storage/v1/b/" + f.bucket + "/o/"
	xmlPrefix := "/" + f.bucket + "/"
	q := r.URL.Query()
	switch {
	case path == uploadPrefix && r.Method == http.MethodPost && q.Get("upload_id") != "":
		f.resumableChunk(w, r, q.Get("upload_id"))
	case path == uploadPrefix && r.Method == http.MethodPost && q.Get("uploadType") == "multipart":
		f.multipartUpload(w, r)
	case path == uploadPrefix && r.Method == http.MethodPost && q.Get("uploadType") == "resumable":
		f.startResumable(w, r)
	case strings.HasPrefix(path, jsonPrefix) && (r.Method == http.MethodGet || r.Method == http.MethodDelete):
		name, err := url.PathUnescape(strings.TrimPrefix(path, jsonPrefix))
		if err != nil {
			jsonError(w, http.StatusBadRequest, err.Error())
			return
		}
		switch {
		case r.Method == http.MethodDelete:
			f.delete(w, name)
		case q.Get("alt") == "media":
			f.download(w, r, name, false)
		case q.Get("alt") == "json" || q.Get("alt") == "":
			f.metadata(w, name)
		default:
			f.unexpected(w, r)
		}
	case strings.HasPrefix(path, xmlPrefix) && r.Method == http.MethodGet:
		name, err := url.PathUnescape(strings.TrimPrefix(path, xmlPrefix))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.download(w, r, name, true)
	default:
		f.unexpected(w, r)
	}
}

func (f *fakeGCS) unexpected(w http.ResponseWriter, r *http.Request) {
	f.t.Errorf("fake gcs: unexpected request %s %s", r.Method, r.URL.String())
	jsonError(w, http.StatusNotImplemented, "not implemented by the fake")
}

func jsonError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": code, "message": msg,
		"errors": []map[string]any{{"message": msg, "domain": "global", "reason": http.StatusText(code)}},
	}})
}

// uploadMeta is the object resource a client sends when uploading.
type uploadMeta struct {
	Name        string `json:"name"`
	Bucket      string `json:"bucket"`
	ContentType string `json:"contentType"`
	Crc32c      string `json:"crc32c"`
}

func crc32c(b []byte) string {
	var buf [4]byte
	binary.BigEndian.PutUint32(buf[:], crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	return base64.StdEncoding.EncodeToString(buf[:])
}

func (f *fakeGCS) multipartUpload(w http.ResponseWriter, r *http.Request) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/related" {
		jsonError(w, http.StatusBadRequest, fmt.Sprintf("content type %q is not multipart/related", r.Header.Get("Content-Type")))
		return
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	metaPart, err := mr.NextPart()
	if err != nil {
		jsonError(w, http.StatusBadRequest, "missing metadata part: "+err.Error())
		return
	}
	var meta uploadMeta
	if err := json.NewDecoder(metaPart).Decode(&meta); err != nil {
		jsonError(w, http.StatusBadRequest, "metadata: "+err.Error())
		return
	}
	mediaPart, err := mr.NextPart()
	if err != nil {
		jsonError(w, http.StatusBadRequest, "missing media part: "+err.Error())
		return
	}
	data, err := io.ReadAll(mediaPart)
	if err != nil {
		jsonError(w, http.StatusBadRequest, "media: "+err.Error())
		return
	}
	if meta.ContentType == "" {
		meta.ContentType = mediaPart.Header.Get("Content-Type")
	}
	if name := r.URL.Query().Get("name"); name != "" && meta.Name != "" && name != meta.Name {
		jsonError(w, http.StatusBadRequest, "name mismatch")
		return
	}
	if meta.Name == "" {
		meta.Name = r.URL.Query().Get("name")
	}
	if meta.Crc32c != "" && meta.Crc32c != crc32c(data) {
		jsonError(w, http.StatusBadRequest, "crc32c mismatch")
		return
	}
	f.commit(w, meta.Name, meta.ContentType, data)
}

func (f *fakeGCS) startResumable(w http.ResponseWriter, r *http.Request) {
	var meta uploadMeta
	if err := json.NewDecoder(r.Body).Decode(&meta); err != nil {
		jsonError(w, http.StatusBadRequest, "metadata: "+err.Error())
		return
	}
	if meta.Name == "" {
		meta.Name = r.URL.Query().Get("name")
	}
	if meta.ContentType == "" {
		meta.ContentType = r.Header.Get("X-Upload-Content-Type")
	}
	f.mu.Lock()
	id := strconv.Itoa(len(f.uploads) + 1)
	f.uploads[id] = &fakeUpload{name: meta.Name, contentType: meta.ContentType}
	f.mu.Unlock()
	w.Header().Set("Location", "http://"+r.Host+"/upload/storage/v1/b/"+f.bucket+"/o?uploadType=resumable&upload_id="+id)
	w.WriteHeader(http.StatusOK)
}

// resumableChunk takes "Content-Range: bytes a-b/*" (more to come),
// "bytes a-b/total" (last chunk) or "bytes */total" (empty last chunk).
func (f *fakeGCS) resumableChunk(w http.ResponseWriter, r *http.Request, id string) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		jsonError(w, http.StatusBadRequest, err.Error())
		return
	}
	cr := strings.TrimPrefix(r.Header.Get("Content-Range"), "bytes ")
	span, total, ok := strings.Cut(cr, "/")
	if !ok {
		jsonError(w, http.StatusBadRequest, "bad Content-Range "+cr)
		return
	}
	f.mu.Lock()
	up, ok := f.uploads[id]
	var have int
	var final fakeUpload
	if ok {
		have = len(up.data)
		first, _, _ := strings.Cut(span, "-")
		if off, err := strconv.Atoi(first); span == "*" || (err == nil && off == have) {
			up.data = append(up.data, data...)
			up.chunks++
			have = len(up.data)
			final = *up
		} else {
			ok = false
		}
	}
	f.mu.Unlock()
	switch {
	case !ok:
		jsonError(w, http.StatusBadRequest, fmt.Sprintf("upload %s: chunk %q does not continue at byte %d", id, cr, have))
	case total == "*":
		w.Header().Set("X-Http-Status-Code-Override", "308")
		w.Header().Set("Range", fmt.Sprintf("bytes=0-%d", have-1))
		w.WriteHeader(http.StatusOK)
	case total != strconv.Itoa(have):
		jsonError(w, http.StatusBadRequest, fmt.Sprintf("total %s, have %d bytes", total, have))
	case r.Header.Get("X-Goog-Hash") != "" && r.Header.Get("X-Goog-Hash") != "crc32c="+crc32c(final.data):
		jsonError(w, http.StatusBadRequest, "crc32c mismatch")
	default:
		f.commit(w, final.name, final.contentType, final.data)
	}
}

func (f *fakeGCS) commit(w http.ResponseWriter, name, contentType string, data []byte) {
	if err := ValidateKey(name); err != nil { // stricter than GCS; catches a client sending junk
		jsonError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.mu.Lock()
	f.gen++
	o := fakeObject{data: data, contentType: contentType, generation: f.gen, updated: fakeEpoch.Add(time.Duration(f.gen) * time.Second)}
	f.objects[name] = o
	f.mu.Unlock()
	f.writeResource(w, name, o)
}

func (f *fakeGCS) writeResource(w http.ResponseWriter, name string, o fakeObject) {
	sum := md5.Sum(o.data)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"kind":           "storage#object",
		"id":             fmt.Sprintf("%s/%s/%d", f.bucket, name, o.generation),
		"name":           name,
		"bucket":         f.bucket,
		"generation":     strconv.FormatInt(o.generation, 10),
		"metageneration": "1",
		"contentType":    o.contentType,
		"size":           strconv.Itoa(len(o.data)),
		"crc32c":         crc32c(o.data),
		"md5Hash":        base64.StdEncoding.EncodeToString(sum[:]),
		"timeCreated":    o.updated.Format(time.RFC3339Nano),
		"updated":        o.updated.Format(time.RFC3339Nano),
		"storageClass":   "STANDARD",
	})
}

func (f *fakeGCS) metadata(w http.ResponseWriter, name string) {
	o, ok := f.object(name)
	if !ok {
		jsonError(w, http.StatusNotFound, "No such object: "+f.bucket+"/"+name)
		return
	}
	f.writeResource(w, name, o)
}

func (f *fakeGCS) download(w http.ResponseWriter, r *http.Request, name string, xml bool) {
	o, ok := f.object(name)
	if !ok {
		if xml {
			w.Header().Set("Content-Type", "application/xml; charset=UTF-8")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, "<?xml version='1.0' encoding='UTF-8'?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>")
			return
		}
		jsonError(w, http.StatusNotFound, "No such object: "+f.bucket+"/"+name)
		return
	}
	sum := md5.Sum(o.data)
	h := w.Header()
	if rg := r.Header.Get("Range"); rg != "" {
		// "bytes=a-b" or "bytes=a-", as storage.Reader sends for NewRangeReader.
		var from, to int
		spec := strings.TrimPrefix(rg, "bytes=")
		a, b, _ := strings.Cut(spec, "-")
		from, err := strconv.Atoi(a)
		if err != nil || from < 0 {
			f.t.Errorf("fake gcs: unsupported Range %q", rg)
			jsonError(w, http.StatusBadRequest, "bad range")
			return
		}
		to = len(o.data) - 1
		if b != "" {
			if to, err = strconv.Atoi(b); err != nil {
				jsonError(w, http.StatusBadRequest, "bad range")
				return
			}
			to = min(to, len(o.data)-1)
		}
		if from >= len(o.data) {
			h.Set("Content-Range", "bytes */"+strconv.Itoa(len(o.data)))
			jsonError(w, http.StatusRequestedRangeNotSatisfiable, "range not satisfiable")
			return
		}
		part := o.data[from : to+1]
		h.Set("Content-Type", o.contentType)
		h.Set("Content-Length", strconv.Itoa(len(part)))
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to, len(o.data)))
		h.Set("X-Goog-Generation", strconv.FormatInt(o.generation, 10))
		h.Set("X-Goog-Stored-Content-Length", strconv.Itoa(len(o.data)))
		w.WriteHeader(http.StatusPartialContent)
		_, _ = w.Write(part)
		return
	}
	h.Set("Content-Type", o.contentType)
	h.Set("Content-Length", strconv.Itoa(len(o.data)))
	h.Set("X-Goog-Generation", strconv.FormatInt(o.generation, 10))
	h.Set("X-Goog-Metageneration", "1")
	h.Set("X-Goog-Stored-Content-Length", strconv.Itoa(len(o.data)))
	h.Set("X-Goog-Hash", "crc32c="+crc32c(o.data)+",md5="+base64.StdEncoding.EncodeToString(sum[:]))
	h.Set("Last-Modified", o.updated.Format(http.TimeFormat))
	_, _ = w.Write(o.data)
}

func (f *fakeGCS) delete(w http.ResponseWriter, name string) {
	f.mu.Lock()
	_, ok := f.objects[name]
	delete(f.objects, name)
	f.mu.Unlock()
	if !ok {
		jsonError(w, http.StatusNotFound, "No such object: "+f.bucket+"/"+name)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

const testBucket = "cohort-exports"

// newTestGCS returns a GCS on a fresh fake, built the way production builds
// it (NewGCS creating the client) but pointed at the loopback server.
func newTestGCS(t *testing.T, chunkSize int, extra ...option.ClientOption) (*GCS, *fakeGCS) {
	t.Helper()
	f := newFakeGCS(t, testBucket)
	opts := append([]option.ClientOption{
		option.WithEndpoint(f.srv.URL + "/storage/v1/"),
		option.WithoutAuthentication(),
	}, extra...)
	g, err := NewGCS(context.Background(), GCSConfig{Bucket: testBucket, ClientOptions: opts, ChunkSize: chunkSize})
	if err != nil {
		t.Fatalf("NewGCS: %v", err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g, f
}

func hasCall(calls []fakeCall, method, path, param, value string) bool {
	for _, c := range calls {
		if c.method == method && c.path == path && (param == "" || c.query.Get(param) == value) {
			return true
		}
	}
	return false
}

func TestGCSRoundTrip(t *testing.T) {
	const chunk = 256 << 10                                 // the library's minimum
	large := bytes.Repeat([]byte("segment,user\n"), 50_000) // ~650 KB: three chunks
	readModes := []struct {
		name string
		opt  option.ClientOption
	}{
		{name: "xml reads", opt: storage.WithXMLReads()},
		{name: "json reads", opt: storage.WithJSONReads()},
	}
	tests := []struct {
		name        string
		key         string
		data        []byte
		contentType string
		chunkSize   int
		wantType    string
		wantUpload  string
	}{
		{name: "csv", key: "report.csv", data: []byte("id,email\n1,a@example.com\n"), contentType: "text/csv", wantType: "text/csv", wantUpload: "multipart"},
		{name: "nested key", key: "t1/exports/2026/segment-7.csv", data: []byte("x\n"), contentType: "text/csv", wantType: "text/csv", wantUpload: "multipart"},
		{name: "empty object", key: "t1/empty", data: []byte{}, contentType: "text/plain", wantType: "text/plain", wantUpload: "multipart"},
		{name: "default content type", key: "t1/raw.bin", data: []byte{0, 1, 2, 255}, wantType: DefaultContentType, wantUpload: "multipart"},
		{name: "resumable in chunks", key: "t1/exports/big.csv", data: large, contentType: "text/csv", chunkSize: chunk, wantType: "text/csv", wantUpload: "resumable"},
	}
	for _, mode := range readModes {
		t.Run(mode.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					g, f := newTestGCS(t, tt.chunkSize, mode.opt)
					ctx := context.Background()
					mustPut(t, g, tt.key, tt.data, tt.contentType)

					stored, ok := f.object(tt.key)
					if !ok {
						t.Fatalf("fake has no object %q", tt.key)
					}
					if !bytes.Equal(stored.data, tt.data) || stored.contentType != tt.wantType {
						t.Fatalf("fake stored %d bytes as %q, want %d bytes as %q", len(stored.data), stored.contentType, len(tt.data), tt.wantType)
					}
					if got := mustRead(t, g, tt.key); !bytes.Equal(got, tt.data) {
						t.Fatalf("read %d bytes, want %d", len(got), len(tt.data))
					}
					info, err := g.Stat(ctx, tt.key)
					if err != nil {
						t.Fatalf("Stat: %v", err)
					}
					want := Info{Key: tt.key, Size: int64(len(tt.data)), ContentType: tt.wantType, Updated: stored.updated}
					if !info.Updated.Equal(want.Updated) {
						t.Fatalf("Stat updated = %v, want %v", info.Updated, want.Updated)
					}
					info.Updated = want.Updated
					if info != want {
						t.Fatalf("Stat = %+v, want %+v", info, want)
					}
					if err := g.Delete(ctx, tt.key); err != nil {
						t.Fatalf("Delete: %v", err)
					}
					if _, ok := f.object(tt.key); ok {
						t.Fatalf("object still in fake after Delete")
					}

					// The client spoke the API the fake documents.
					calls := f.recorded()
					esc := url.PathEscape(tt.key)
					if !hasCall(calls, "POST", "/upload/storage/v1/b/"+testBucket+"/o", "uploadType", tt.wantUpload) {
						t.Errorf("no %s upload in %v", tt.wantUpload, calls)
					}
					if mode.name == "xml reads" && !hasCall(calls, "GET", "/"+testBucket+"/"+esc, "", "") {
						t.Errorf("no xml download in %v", calls)
					}
					if mode.name == "json reads" && !hasCall(calls, "GET", "/storage/v1/b/"+testBucket+"/o/"+esc, "alt", "media") {
						t.Errorf("no json download in %v", calls)
					}
					if !hasCall(calls, "GET", "/storage/v1/b/"+testBucket+"/o/"+esc, "alt", "json") {
						t.Errorf("no metadata get in %v", calls)
					}
					if !hasCall(calls, "DELETE", "/storage/v1/b/"+testBucket+"/o/"+esc, "", "") {
						t.Errorf("no delete in %v", calls)
					}
					if tt.wantUpload == "resumable" {
						f.mu.Lock()
						chunks := f.uploads["1"].chunks
						f.mu.Unlock()
						if want := (len(tt.data) + chunk - 1) / chunk; chunks != want {
							t.Errorf("resumable upload used %d chunks, want %d", chunks, want)
						}
					}
				})
			}
		})
	}
}

func TestGCSOverwrite(t *testing.T) {
	g, f := newTestGCS(t, 0)
	ctx := context.Background()
	const key = "t1/exports/latest.csv"
	mustPut(t, g, key, []byte("version one, the longer one"), "text/csv")
	first, _ := f.object(key)
	mustPut(t, g, key, []byte("v2"), "application/json")

	if got := mustRead(t, g, key); string(got) != "v2" {
		t.Fatalf("read %q after overwrite, want %q", got, "v2")
	}
	info, err := g.Stat(ctx, key)
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	if info.Size != 2 || info.ContentType != "application/json" || !info.Updated.After(first.updated) {
		t.Fatalf("Stat = %+v, want size 2, application/json, updated after %v", info, first.updated)
	}
}

func TestGCSNotFoundAndDelete(t *testing.T) {
	for _, mode := range []struct {
		name string
		opt  option.ClientOption
	}{{"xml reads", storage.WithXMLReads()}, {"json reads", storage.WithJSONReads()}} {
		t.Run(mode.name, func(t *testing.T) {
			g, _ := newTestGCS(t, 0, mode.opt)
			ctx := context.Background()
			const key = "t1/gone.csv"
			tests := []struct {
				name string
				run  func() error
				want error
			}{
				{name: "open missing", run: func() error { _, err := g.Open(ctx, key); return err }, want: ErrNotFound},
				{name: "stat missing", run: func() error { _, err := g.Stat(ctx, key); return err }, want: ErrNotFound},
				{name: "delete missing", run: func() error { return g.Delete(ctx, key) }},
				{name: "put", run: func() error { _, err := g.Put(ctx, key, strings.NewReader("x"), "text/plain"); return err }},
				{name: "open present", run: func() error { rc, err := g.Open(ctx, key); closeIf(rc); return err }},
				{name: "delete present", run: func() error { return g.Delete(ctx, key) }},
				{name: "open deleted", run: func() error { _, err := g.Open(ctx, key); return err }, want: ErrNotFound},
				{name: "stat deleted", run: func() error { _, err := g.Stat(ctx, key); return err }, want: ErrNotFound},
				{name: "delete deleted", run: func() error { return g.Delete(ctx, key) }},
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
		})
	}
}

func TestGCSInvalidKeysMakeNoRequest(t *testing.T) {
	g, f := newTestGCS(t, 0)
	ctx := context.Background()
	for _, key := range []string{"", "../x", "a/../../x", "/etc/passwd", "a//b", "a/", "a b", `..\x`} {
		t.Run(fmt.Sprintf("%q", key), func(t *testing.T) {
			_, putErr := g.Put(ctx, key, strings.NewReader("x"), "text/plain")
			rc, openErr := g.Open(ctx, key)
			closeIf(rc)
			_, statErr := g.Stat(ctx, key)
			_, signErr := g.SignedURL(ctx, key, time.Minute)
			for op, err := range map[string]error{"put": putErr, "open": openErr, "stat": statErr, "delete": g.Delete(ctx, key), "signed url": signErr} {
				if !errors.Is(err, ErrInvalidKey) {
					t.Errorf("%s(%q) = %v, want ErrInvalidKey", op, key, err)
				}
			}
		})
	}
	if calls := f.recorded(); len(calls) != 0 {
		t.Fatalf("invalid keys reached the server: %v", calls)
	}
}

func TestGCSFailedPutWritesNothing(t *testing.T) {
	readErr := errors.New("client went away")
	tests := []struct {
		name      string
		chunkSize int
		partial   int
	}{
		{name: "single request upload", partial: 1000},
		{name: "resumable upload after first chunk", chunkSize: 256 << 10, partial: 300 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, f := newTestGCS(t, tt.chunkSize)
			const key = "t1/report.csv"
			mustPut(t, g, key, []byte("old"), "text/csv")
			r := &failingReader{data: bytes.Repeat([]byte("x"), tt.partial), err: readErr}
			if _, err := g.Put(context.Background(), key, r, "text/csv"); !errors.Is(err, readErr) {
				t.Fatalf("Put err = %v, want %v", err, readErr)
			}
			if got := mustRead(t, g, key); string(got) != "old" {
				t.Fatalf("after failed put read %d bytes, want the old object", len(got))
			}
			if o, _ := f.object(key); string(o.data) != "old" {
				t.Fatalf("fake holds %d bytes, want the old object", len(o.data))
			}
		})
	}
}

func TestNewGCSConfig(t *testing.T) {
	ctx := context.Background()
	rsaPEM := testRSAPEM(t, "pkcs8")
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKCS8PrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	ecPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})
	noAuth := []option.ClientOption{option.WithoutAuthentication()}
	tests := []struct {
		name string
		cfg  GCSConfig
		ok   bool
	}{
		{name: "bucket only", cfg: GCSConfig{Bucket: testBucket, ClientOptions: noAuth}, ok: true},
		{name: "access id without key signs through iam", cfg: GCSConfig{Bucket: testBucket, ClientOptions: noAuth, GoogleAccessID: "sa@p.iam.gserviceaccount.com"}, ok: true},
		{name: "access id and key", cfg: GCSConfig{Bucket: testBucket, ClientOptions: noAuth, GoogleAccessID: "sa@p.iam.gserviceaccount.com", PrivateKey: rsaPEM}, ok: true},
		{name: "no bucket", cfg: GCSConfig{ClientOptions: noAuth}},
		{name: "key without access id", cfg: GCSConfig{Bucket: testBucket, ClientOptions: noAuth, PrivateKey: rsaPEM}},
		{name: "garbage key", cfg: GCSConfig{Bucket: testBucket, ClientOptions: noAuth, GoogleAccessID: "sa@p", PrivateKey: []byte("not a key")}},
		{name: "ec key", cfg: GCSConfig{Bucket: testBucket, ClientOptions: noAuth, GoogleAccessID: "sa@p", PrivateKey: ecPEM}},
		{name: "negative chunk size", cfg: GCSConfig{Bucket: testBucket, ClientOptions: noAuth, ChunkSize: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := NewGCS(ctx, tt.cfg)
			if tt.ok != (err == nil) {
				t.Fatalf("NewGCS err = %v, want ok=%v", err, tt.ok)
			}
			if g != nil {
				_ = g.Close()
			}
		})
	}

	t.Run("caller's client is not closed", func(t *testing.T) {
		c, err := storage.NewClient(ctx, option.WithoutAuthentication())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		g, err := NewGCS(ctx, GCSConfig{Bucket: testBucket, Client: c})
		if err != nil {
			t.Fatal(err)
		}
		if g.ownsClient {
			t.Fatal("GCS claims ownership of the caller's client")
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

var (
	testRSAOnce sync.Once
	testRSAKey  *rsa.PrivateKey
	testRSAErr  error
)

// testRSAPEM returns one generated RSA key in the given PEM encoding.
func testRSAPEM(t *testing.T, format string) []byte {
	t.Helper()
	testRSAOnce.Do(func() { testRSAKey, testRSAErr = rsa.GenerateKey(rand.Reader, 2048) })
	if testRSAErr != nil {
		t.Fatal(testRSAErr)
	}
	switch format {
	case "pkcs1":
		return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(testRSAKey)})
	case "pkcs8":
		der, err := x509.MarshalPKCS8PrivateKey(testRSAKey)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	t.Fatalf("unknown key format %q", format)
	return nil
}

func TestGCSSignedURL(t *testing.T) {
	const accessID = "cohort-exports@example-project.iam.gserviceaccount.com"
	const key = "t1/exports/segment-7.csv"
	tests := []struct {
		name   string
		format string
		ttl    time.Duration
	}{
		{name: "pkcs8 fifteen minutes", format: "pkcs8", ttl: 15 * time.Minute},
		{name: "pkcs1 one hour", format: "pkcs1", ttl: time.Hour},
		{name: "pkcs8 seven days", format: "pkcs8", ttl: MaxSignedURLTTL},
		{name: "pkcs1 one second", format: "pkcs1", ttl: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Default endpoint and no credentials: signing is offline, no request is made.
			g, err := NewGCS(context.Background(), GCSConfig{
				Bucket:         testBucket,
				ClientOptions:  []option.ClientOption{option.WithoutAuthentication()},
				GoogleAccessID: accessID,
				PrivateKey:     testRSAPEM(t, tt.format),
			})
			if err != nil {
				t.Fatalf("NewGCS: %v", err)
			}
			defer g.Close()
			before := time.Now().UTC().Truncate(time.Second)
			raw, err := g.SignedURL(context.Background(), key, tt.ttl)
			if err != nil {
				t.Fatalf("SignedURL: %v", err)
			}
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatalf("parse %q: %v", raw, err)
			}
			if u.Scheme != "https" || u.Host != "storage.googleapis.com" || u.Path != "/"+testBucket+"/"+key {
				t.Fatalf("url %q: want https://storage.googleapis.com/%s/%s", raw, testBucket, key)
			}
			q := u.Query()
			if got := q.Get("X-Goog-Algorithm"); got != "GOOG4-RSA-SHA256" {
				t.Errorf("X-Goog-Algorithm = %q", got)
			}
			if got, want := q.Get("X-Goog-Expires"), strconv.Itoa(int(tt.ttl/time.Second)); got != want {
				t.Errorf("X-Goog-Expires = %q, want %q", got, want)
			}
			cred := q.Get("X-Goog-Credential")
			if !strings.HasPrefix(cred, accessID+"/") || !strings.HasSuffix(cred, "/auto/storage/goog4_request") {
				t.Errorf("X-Goog-Credential = %q, want %s/<date>/auto/storage/goog4_request", cred, accessID)
			}
			if got := q.Get("X-Goog-SignedHeaders"); got != "host" {
				t.Errorf("X-Goog-SignedHeaders = %q, want host", got)
			}
			date, err := time.Parse("20060102T150405Z", q.Get("X-Goog-Date"))
			if err != nil || date.Before(before) || date.After(time.Now().Add(time.Minute)) {
				t.Errorf("X-Goog-Date = %q (%v), want about now", q.Get("X-Goog-Date"), err)
			}
			sig, err := hex.DecodeString(q.Get("X-Goog-Signature"))
			if err != nil || len(sig) != 256 {
				t.Fatalf("X-Goog-Signature = %q: want 256 hex-encoded bytes", q.Get("X-Goog-Signature"))
			}
			verifyV4Signature(t, u, sig)
		})
	}
}

// verifyV4Signature rebuilds the V4 string to sign from the URL, as GCS does
// (https://cloud.google.com/storage/docs/authentication/signatures), and
// checks the RSA signature with the test key's public half.
func verifyV4Signature(t *testing.T, u *url.URL, sig []byte) {
	t.Helper()
	q := u.Query()
	q.Del("X-Goog-Signature")
	canonicalQuery := strings.ReplaceAll(q.Encode(), "+", "%20")
	canonicalRequest := strings.Join([]string{
		"GET",
		u.EscapedPath(),
		canonicalQuery,
		"host:" + u.Hostname() + "\n",
		"host",
		"UNSIGNED-PAYLOAD",
	}, "\n")
	_, scope, _ := strings.Cut(q.Get("X-Goog-Credential"), "/")
	reqHash := sha256.Sum256([]byte(canonicalRequest))
	stringToSign := strings.Join([]string{"GOOG4-RSA-SHA256", q.Get("X-Goog-Date"), scope, hex.EncodeToString(reqHash[:])}, "\n")
	digest := sha256.Sum256([]byte(stringToSign))
	if err := rsa.VerifyPKCS1v15(&testRSAKey.PublicKey, crypto.SHA256, digest[:], sig); err != nil {
		t.Fatalf("signature does not verify with the test key: %v", err)
	}
}

func TestGCSSignedURLTTL(t *testing.T) {
	g, err := NewGCS(context.Background(), GCSConfig{
		Bucket:         testBucket,
		ClientOptions:  []option.ClientOption{option.WithoutAuthentication()},
		GoogleAccessID: "sa@example-project.iam.gserviceaccount.com",
		PrivateKey:     testRSAPEM(t, "pkcs8"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	tests := []struct {
		name string
		ttl  time.Duration
		want error
	}{
		{name: "seven days", ttl: MaxSignedURLTTL},
		{name: "seven days and a second", ttl: MaxSignedURLTTL + time.Second, want: ErrInvalidTTL},
		{name: "eight days", ttl: 8 * 24 * time.Hour, want: ErrInvalidTTL},
		{name: "zero", ttl: 0, want: ErrInvalidTTL},
		{name: "negative", ttl: -time.Minute, want: ErrInvalidTTL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := g.SignedURL(context.Background(), "t1/x.csv", tt.ttl)
			if tt.want == nil && err != nil {
				t.Fatalf("SignedURL = %v, want nil", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("SignedURL = %v, want %v", err, tt.want)
			}
		})
	}
}
