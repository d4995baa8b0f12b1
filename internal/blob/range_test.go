package blob

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"
)

func TestOpenRange(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 1000) // 10,000 bytes
	cases := []struct {
		name           string
		offset, length int64
		want           []byte
	}{
		{name: "head", offset: 0, length: 10, want: data[:10]},
		{name: "middle", offset: 5000, length: 1234, want: data[5000:6234]},
		{name: "to the end", offset: 9990, length: -1, want: data[9990:]},
		{name: "past the end is cut", offset: 9995, length: 100, want: data[9995:]},
		{name: "whole", offset: 0, length: -1, want: data},
	}
	stores := map[string]func(t *testing.T) Store{
		"local": func(t *testing.T) Store {
			l, err := NewLocal(LocalConfig{Dir: t.TempDir(), BaseURL: "http://x", SigningKey: bytes.Repeat([]byte{1}, 32), Now: time.Now})
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		"gcs xml": func(t *testing.T) Store { g, _ := newTestGCS(t, 0, storage.WithXMLReads()); return g },
		"gcs json": func(t *testing.T) Store {
			g, _ := newTestGCS(t, 0, option.ClientOption(storage.WithJSONReads()))
			return g
		},
	}
	for sname, open := range stores {
		t.Run(sname, func(t *testing.T) {
			s := open(t)
			ctx := context.Background()
			if _, err := s.Put(ctx, "t1/imports/a.csv", bytes.NewReader(data), "text/csv"); err != nil {
				t.Fatal(err)
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					r, err := s.OpenRange(ctx, "t1/imports/a.csv", tc.offset, tc.length)
					if err != nil {
						t.Fatalf("OpenRange: %v", err)
					}
					defer r.Close()
					got, err := io.ReadAll(r)
					if err != nil {
						t.Fatalf("read: %v", err)
					}
					if !bytes.Equal(got, tc.want) {
						t.Fatalf("got %d bytes %.20q, want %d bytes %.20q", len(got), got, len(tc.want), tc.want)
					}
				})
			}
			if _, err := s.OpenRange(ctx, "t1/imports/missing.csv", 0, 10); !errors.Is(err, ErrNotFound) {
				t.Fatalf("missing object: err = %v, want ErrNotFound", err)
			}
		})
	}
}
