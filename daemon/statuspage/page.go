package statuspage

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"maps"
	"mime"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
)

//go:embed assets
var assets embed.FS

// Prefix is the path under which the page's assets are served.
const Prefix = "/ui/"

// ContentSecurityPolicy allows the page its own script, style sheet, icon
// and API, and nothing else: no inline script or style, no other origin,
// no framing.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Public reports whether the daemon serves path without the bearer token:
// the page and its assets, which carry no data.
func Public(p string) bool { return p == "/" || strings.HasPrefix(p, Prefix) }

var pageTemplate = template.Must(template.ParseFS(assets, "assets/index.html"))

// Page serves the status page and its assets. Create it with New.
type Page struct {
	page  []byte
	files map[string][]byte
}

// New builds the page from the embedded assets.
func New() *Page {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic("statuspage: " + err.Error()) // the embed directive guarantees the directory
	}
	files := map[string][]byte{}
	sum := sha256.New()
	_ = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == "index.html" {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		files[p] = b
		sum.Write(b)
		return nil
	})
	// The assets' hash in their URLs lets browsers cache them for good
	// while a new binary's page still loads its own.
	version := hex.EncodeToString(sum.Sum(nil))[:12]
	var page bytes.Buffer
	if err := pageTemplate.Execute(&page, struct{ Version string }{version}); err != nil {
		panic("statuspage: " + err.Error()) // the template is embedded and fixed
	}
	return &Page{page: page.Bytes(), files: files}
}

// Patterns are the http.ServeMux patterns of the page and of each asset,
// so a server can route exactly these to the Page and answer anything else
// in its own way.
func (h *Page) Patterns() []string {
	out := []string{"GET /{$}"}
	for _, name := range slices.Sorted(maps.Keys(h.files)) {
		out = append(out, "GET "+Prefix+name)
	}
	return out
}

// ServeHTTP serves GET and HEAD of / and of Prefix+NAME; anything else
// answers 404 or 405 in plain text.
func (h *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", ContentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("X-Frame-Options", "DENY")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch {
	case r.URL.Path == "/":
		hdr.Set("Content-Type", "text/html; charset=utf-8")
		hdr.Set("Cache-Control", "no-store")
		h.write(w, r, h.page)
	case strings.HasPrefix(r.URL.Path, Prefix):
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		b, ok := h.files[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		ct := mime.TypeByExtension(path.Ext(name))
		if ct == "" {
			ct = "application/octet-stream"
		}
		hdr.Set("Content-Type", ct)
		hdr.Set("Cache-Control", "public, max-age=31536000, immutable")
		h.write(w, r, b)
	default:
		http.NotFound(w, r)
	}
}

func (h *Page) write(w http.ResponseWriter, r *http.Request, b []byte) {
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}
