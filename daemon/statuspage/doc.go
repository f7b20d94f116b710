// Package statuspage is the daemon's built-in status page: one HTML page,
// its script and its style sheet, embedded in the binary and served at
// GET / and GET /ui/. The page holds no data: its script polls the JSON
// API (/v1/status, /v1/leases, /v1/classes) every second and renders the
// stack, the configuration version and last reload (a rejected one in red
// with its file:line), pools, budgets, VM ceilings with their holders, and
// runner classes. With a bearer token configured, the script asks for the
// token once and sends it in the Authorization header, never in a URL.
//
// Every response carries a Content-Security-Policy that allows only the
// page's own script, style sheet and API: no inline code, no CDN, no build
// step (the assets are plain JavaScript and CSS, edited as they are).
//
// Not for: the API itself (package daemon) or anything that needs the
// token: Public reports the paths the daemon serves without it.
//
// Start reading at New and Page.ServeHTTP (page.go), then assets/app.js.
package statuspage
