// Package sdkjs embeds the client library's browser bundle so the API can serve it
// (/sdk/v1/cohort.min.js). The bundle is built by `npm run build` in this directory and committed;
// the library's tests fail when the committed bundle differs from a fresh build.
package sdkjs

import (
	_ "embed"
	"encoding/json"
)

//go:embed dist/cohort.min.js
var bundle []byte

//go:embed package.json
var packageJSON []byte

// Bundle is the minified browser bundle (an IIFE defining the global Cohort).
func Bundle() []byte { return bundle }

// Version is the library's version from package.json.
func Version() string {
	var p struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(packageJSON, &p); err != nil || p.Version == "" {
		panic("sdk/js/package.json has no version")
	}
	return p.Version
}
