package sdkjs

import (
	"bytes"
	"regexp"
	"testing"
)

func TestBundleEmbedded(t *testing.T) {
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(Version()) {
		t.Fatalf("version %q", Version())
	}
	if len(Bundle()) < 1000 || !bytes.Contains(Bundle(), []byte("Cohort")) {
		t.Fatalf("bundle of %d bytes does not define Cohort", len(Bundle()))
	}
}
