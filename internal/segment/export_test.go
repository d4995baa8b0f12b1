package segment

import "time"

// WithPreviewTimeout returns a copy of the service whose previews time out after d.
func (s *Service) WithPreviewTimeout(d time.Duration) *Service {
	c := *s
	c.previewTimeout = d
	return &c
}
