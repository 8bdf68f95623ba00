package proxy

import (
	"errors"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// scrub removes from text, said about server s, the secrets of s
// (upstream.Scrub) and every secret the aggregator knows of any server
// (Options.Upstream.Secrets): a server may print a value another holds too,
// and what is said here reaches clients, mcp_status and the log.
func (p *Proxy) scrub(s *config.Server, text string) string {
	return p.opts.Upstream.Secrets.String(upstream.Scrub(s, text))
}

// scrubError is scrub for an error; an error with nothing to scrub is
// returned as is, so that it can still be classified.
func (p *Proxy) scrubError(s *config.Server, err error) error {
	if err == nil {
		return nil
	}
	if clean := p.scrub(s, err.Error()); clean != err.Error() {
		return errors.New(clean)
	}
	return err
}
