package page

import (
	"errors"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/errs"
)

// TestCreatePageRefusesQueryWithoutWords: a page of an AIQuery whose text the search cannot use
// (it would embed to nothing and match no product) is a 400 on query that names the text, and
// nothing is recorded or started.
func TestCreatePageRefusesQueryWithoutWords(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.query(e.a, "?! ...")
	_, err := e.svc.CreatePage(e.ctx, e.a, CreateInput{Query: &q.ID})
	var ve *errs.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(ve.Fields["query"], `text "?! ..." has no words the search can use`) {
		t.Fatalf("error %v, want a 400 on query naming its text", err)
	}
	if pages, err := e.svc.ListPages(e.ctx, e.a); err != nil || len(pages) != 0 || len(e.gen.pages) != 0 {
		t.Fatalf("pages %v (%v), starts %v: want none", pages, err, e.gen.pages)
	}
	ok := e.query(e.a, "the best of 2026")
	e.page(e.a, CreateInput{Query: &ok.ID})
}

// TestPendingEmbeddings: the count the generation records shows on GET, 0 clears it, and
// another tenant's page is not found.
func TestPendingEmbeddings(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.query(e.a, "linen dresses")
	p := e.page(e.a, CreateInput{Query: &q.ID})
	if p.PendingEmbeddings != nil {
		t.Fatalf("new page pending_embeddings %v, want null", *p.PendingEmbeddings)
	}
	for _, n := range []int64{7, 7, 3} {
		if err := e.svc.SetPendingEmbeddings(e.ctx, e.a, p.ID, n); err != nil {
			t.Fatal(err)
		}
		got, err := e.svc.GetPage(e.ctx, e.a, p.ID)
		if err != nil || got.PendingEmbeddings == nil || *got.PendingEmbeddings != n || got.Status != StatusGenerating {
			t.Fatalf("after %d: %+v %v", n, got, err)
		}
	}
	if err := e.svc.SetPendingEmbeddings(e.ctx, e.a, p.ID, 0); err != nil {
		t.Fatal(err)
	}
	if got, err := e.svc.GetPage(e.ctx, e.a, p.ID); err != nil || got.PendingEmbeddings != nil {
		t.Fatalf("cleared: %+v %v", got, err)
	}
	if err := e.svc.SetPendingEmbeddings(e.ctx, e.b, p.ID, 2); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("another tenant's page: %v, want not found", err)
	}
}
