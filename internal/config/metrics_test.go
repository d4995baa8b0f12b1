package config_test

import (
	"testing"

	"github.com/cohort-dev/cohort/internal/config"
)

func TestMetricsListen(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		role      config.Role
		want      string
	}{
		{"serve defaults to the metrics port", "", config.RoleServe, ":9090"},
		{"worker defaults to the metrics port", "", config.RoleWorker, ":9090"},
		{"dev has no listener by default (/metrics on its API port)", "", config.RoleDev, ""},
		{"set: every role listens there", "127.0.0.1:9191", config.RoleDev, "127.0.0.1:9191"},
		{"set for serve", ":9100", config.RoleServe, ":9100"},
		{"off disables the listener", "off", config.RoleWorker, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			if tc.env != "" {
				env["COHORT_METRICS_ADDR"] = tc.env
			}
			c := mustLoad(t, env)
			if got := c.MetricsListen(tc.role); got != tc.want {
				t.Errorf("MetricsListen(%s) = %q, want %q", tc.role, got, tc.want)
			}
		})
	}
}
