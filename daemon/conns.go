package daemon

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/h1"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
)

// apiServer is what Run needs of the API's HTTP server: serving, and the
// drain's steps.
type apiServer interface {
	Serve(net.Listener) error
	SetKeepAlivesEnabled(bool)
	// CloseQuiet closes the connections that carry no request.
	CloseQuiet()
	Shutdown(context.Context) error
	Close() error
}

// The API's timeouts, for either server.
const (
	readHeaderTimeout = 5 * time.Second
	idleTimeout       = 120 * time.Second
	// Long-polls hold a request for up to MaxWaitSeconds.
	writeTimeout = (api.MaxWaitSeconds + 30) * time.Second
)

// newAPIServer is the server of the API and the listener it serves: package
// h1 over plain connections (the hot path's cost; see its doc), net/http
// over TLS (HTTP/2, client certificates).
func (d *Daemon) newAPIServer(baseCtx context.Context) (apiServer, net.Listener) {
	if d.tls == nil {
		s := &h1.Server{
			Handler:           d.handler,
			ReadHeaderTimeout: readHeaderTimeout,
			IdleTimeout:       idleTimeout,
			WriteTimeout:      writeTimeout,
			MaxHeaderBytes:    httpapi.MaxHeaderBytes,
			BaseContext:       baseCtx,
			ErrorBody:         httpapi.ServerErrorBody,
			Logger:            d.log,
			NoEarlyAnswers:    d.opts.LateAnswers,
		}
		d.plain.Store(s)
		return s, d.ln
	}
	s := httpapi.NewTrackedServer(&http.Server{
		Handler:           d.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    httpapi.MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
		TLSConfig:         d.tls.ServerConfig(),
	})
	// The same configuration: net/http adds "h2" to its NextProtos.
	return s, tls.NewListener(d.ln, s.TLSConfig)
}
