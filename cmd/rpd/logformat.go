package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/hashicorp/hcl/v2"
)

// Log formats of the daemon (-log-format).
const (
	logText = "text"
	logJSON = "json"
)

// daemonLogger builds the daemon's logger: slog's text or JSON handler on
// w. In JSON every line is one JSON object, so that a log shipper never
// meets a line it cannot parse: the daemon's own start-up errors and
// configuration diagnostics go through the logger too (diagnosticsLogger).
func daemonLogger(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case logText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case logJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("-log-format %q: use %s or %s", format, logText, logJSON)
}

// diagnosticsLogger logs configuration diagnostics one record each, with
// the position, instead of printing Terraform's text layout.
func diagnosticsLogger(log *slog.Logger) func(map[string]*hcl.File, hcl.Diagnostics) {
	return func(_ map[string]*hcl.File, diags hcl.Diagnostics) {
		for _, d := range diags {
			level, msg := slog.LevelWarn, "configuration warning"
			if d.Severity == hcl.DiagError {
				level, msg = slog.LevelError, "configuration error"
			}
			attrs := []any{"summary", d.Summary}
			if d.Detail != "" {
				attrs = append(attrs, "detail", d.Detail)
			}
			if d.Subject != nil {
				attrs = append(attrs, "pos", fmt.Sprintf("%s:%d:%d", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column))
			}
			log.Log(context.Background(), level, msg, attrs...)
		}
	}
}
