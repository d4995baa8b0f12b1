package main

import (
	"time"

	"github.com/cohort-dev/cohort/api"
	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/design"
	"github.com/cohort-dev/cohort/internal/pagetemplate"
	"github.com/cohort-dev/cohort/internal/safehttp"
)

// designAPI sets the design system and template endpoints' dependencies. Images for extraction
// are fetched through safehttp (private and loopback addresses refused unless
// COHORT_ALLOW_PRIVATE_NETWORKS is set; the address is logged, never answered). Fonts are
// suggested when the AI provider is OpenAI-compatible (its chat model must accept images); with
// the local provider, or when the provider cannot be built, the stream notes that fonts need a
// vision-capable model.
func (c *core) designAPI(d *api.Deps) {
	opts := design.ExtractorOptions{
		HTTP: safehttp.NewClient(safehttp.Options{AllowPrivate: c.cfg.AllowPrivateNetworks, Timeout: design.DefaultFetchTimeout,
			MaxResponseBytes: design.DefaultMaxImageBytes + 1, Logger: c.log}),
		Logger: c.log,
	}
	if provider, err := c.openAI(); err != nil {
		c.log.Error("design extraction: the AI provider cannot be built; fonts are not suggested", "error", err)
	} else if provider.Name() == ai.ProviderOpenAI {
		opts.Fonts = design.AIFonts{Provider: provider}
	}
	d.Design = &api.DesignDeps{Store: design.NewStore(c.db.Pool, time.Now), Extractor: design.NewExtractor(opts)}
	d.Templates = &api.TemplatesDeps{Service: pagetemplate.NewService(c.db.Pool, time.Now)}
}
