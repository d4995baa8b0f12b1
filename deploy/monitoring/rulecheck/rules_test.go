// Package rulecheck runs what `promtool check rules` checks on deploy/monitoring/rules.yaml, and
// parses every query of deploy/monitoring/dashboard.json with the same PromQL parser, so that a
// rule or a panel that Prometheus (or GKE Managed Prometheus's rule evaluator) would refuse
// fails here first. It is a module of its own (Prometheus's dependencies stay out of the
// service's go.mod): go -C deploy/monitoring/rulecheck test ./...
package rulecheck

import (
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// ruleGroups is the Prometheus rule file inside the Rules resource (its spec): GMP's Rules take
// Prometheus's rule groups as they are.
func ruleGroups(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile("../rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Spec       json.RawMessage `json:"spec"`
	}
	// The metadata is kubectl's to check; the spec is checked below, strictly.
	if err := yaml.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if res.APIVersion != "monitoring.googleapis.com/v1" || res.Kind != "Rules" {
		t.Fatalf("rules.yaml is %s %s, want monitoring.googleapis.com/v1 Rules", res.APIVersion, res.Kind)
	}
	out, err := yaml.JSONToYAML(res.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRulesPassPromtoolCheck is `promtool check rules` on the spec: the file format (no unknown
// field), every expression parsed, every label and annotation template parsed, no duplicate rule.
func TestRulesPassPromtoolCheck(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	rgs, errs := rulefmt.Parse(ruleGroups(t), false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("rules.yaml: %v", err)
	}
	if rgs == nil {
		return
	}
	seen := map[string]bool{}
	n := 0
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			n++
			name := r.Alert + r.Record
			if seen[name] {
				t.Errorf("rules.yaml: rule %s appears twice", name)
			}
			seen[name] = true
			if r.Alert == "" {
				continue
			}
			if r.Labels["severity"] != "page" && r.Labels["severity"] != "ticket" {
				t.Errorf("alert %s: severity %q, want page or ticket", r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("alert %s has no summary", r.Alert)
			}
		}
	}
	t.Logf("SUCCESS: %d rules found", n)
	for _, want := range wantAlerts {
		if !seen[want] {
			t.Errorf("rules.yaml has no alert %s", want)
		}
	}
}

// wantAlerts are the alerts the runbooks name (deploy/runbooks/ai-provider-outage.md and
// metrics.md): renaming one must rename them there too.
var wantAlerts = []string{
	"CohortLoaderLagHigh", "CohortDeadLetters", "CohortPublishFailures", "CohortActivationSyncFailures", "CohortHTTP5xxRate",
	"CohortEmbeddingBacklogOld", "CohortSearchUnavailable", "CohortPageBuildFailures", "CohortPageGenerationFailures",
	"CohortFeedSyncFailures", "CohortExportFailures", "CohortAIProviderErrors", "CohortAIProviderSlow",
}

// TestDashboardQueriesParse parses every panel query of the Grafana dashboard, with Grafana's
// $__rate_interval and $__interval replaced by a duration as Grafana does.
func TestDashboardQueriesParse(t *testing.T) {
	raw, err := os.ReadFile("../dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	p := parser.NewParser(parser.Options{})
	n := 0
	for _, panel := range d.Panels {
		if len(panel.Targets) == 0 {
			t.Errorf("panel %q has no query", panel.Title)
		}
		for _, tg := range panel.Targets {
			expr := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m").Replace(tg.Expr)
			if _, err := p.ParseExpr(expr); err != nil {
				t.Errorf("panel %q: %q: %v", panel.Title, tg.Expr, err)
			}
			n++
		}
	}
	t.Logf("%d panels, %d queries parsed", len(d.Panels), n)
}
