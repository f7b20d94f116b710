package security

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rpdhq/rpd/api"
	"github.com/rpdhq/rpd/daemon/internal/httpapi"
	"github.com/rpdhq/rpd/daemon/statuspage"
	"github.com/rpdhq/rpd/spec"
)

// scope is a set of spec.Scope* bits.
type Scope uint8

const (
	ScopeRead Scope = 1 << iota
	ScopeWork
	ScopeAdmin
	// scopePublic marks routes that need no principal (probes and the
	// status page's HTML and assets, which carry no data).
	ScopePublic
	// scopeAny is any principal at all: a route nobody declared (it
	// answers 404 or 405, which says nothing to an anonymous caller).
	ScopeAny = ScopeRead | ScopeWork | ScopeAdmin
)

func ParseScopes(names []string) Scope {
	var s Scope
	for _, n := range names {
		switch n {
		case spec.ScopeRead:
			s |= ScopeRead
		case spec.ScopeWork:
			s |= ScopeWork
		case spec.ScopeAdmin:
			s |= ScopeAdmin
		}
	}
	return s
}

func (s Scope) String() string {
	var out []string
	for _, b := range []struct {
		s    Scope
		name string
	}{{ScopeRead, spec.ScopeRead}, {ScopeWork, spec.ScopeWork}, {ScopeAdmin, spec.ScopeAdmin}} {
		if s&b.s != 0 {
			out = append(out, b.name)
		}
	}
	return strings.Join(out, "|")
}

// routeScopes is the scope each route (its ServeMux pattern) needs; admin
// may do everything. A route missing here needs admin: TestRouteScopes
// fails first.
var RouteScopes = map[string]Scope{
	"GET /healthz":     ScopePublic,
	"GET /readyz":      ScopePublic,
	"GET /metrics":     ScopeRead,
	"GET /v1/status":   ScopeRead,
	"POST /v1/reload":  ScopeAdmin,
	"/":                ScopeAny,
	"GET /v1/pools":    ScopeRead,
	"GET /v1/leases":   ScopeRead,
	"GET /v1/budgets":  ScopeRead,
	"GET /v1/ceilings": ScopeRead,
	"GET /v1/classes":  ScopeRead,

	"GET /v1/pools/{name}":                         ScopeRead,
	"POST /v1/pools/{name}/acquire":                ScopeWork,
	"POST /v1/leases/{id}/heartbeat":               ScopeWork,
	"DELETE /v1/leases/{id}":                       ScopeWork,
	"GET /v1/budgets/{name}":                       ScopeRead,
	"POST /v1/budgets/{name}/permits":              ScopeWork,
	"DELETE /v1/budgets/{name}/permits/{id}":       ScopeWork,
	"GET /v1/ceilings/{name}":                      ScopeRead,
	"POST /v1/ceilings/{name}/claims":              ScopeWork,
	"POST /v1/ceilings/{name}/claims/{id}/confirm": ScopeWork,
	"DELETE /v1/ceilings/{name}/claims/{id}":       ScopeWork,
	"PUT /v1/ceilings/{name}/usage":                ScopeAdmin,
	"GET /v1/classes/{class}":                      ScopeRead,
	"POST /v1/classes/{class}/pickup":              ScopeWork,
	"GET /v1/classes/{class}/instances":            ScopeRead,
	"POST /v1/classes/{class}/instances":           ScopeWork,
	"GET /v1/instances/{id}":                       ScopeRead,
	"POST /v1/instances/{id}/release":              ScopeWork,
	"POST /v1/instances/{id}/confirm":              ScopeWork,
}

// scopeOf is the scope the route of pattern needs: routeScopes', public
// for the status page's HTML and assets (its script sends the token),
// admin for anything else.
func ScopeOf(pattern string) Scope {
	if s, ok := RouteScopes[pattern]; ok {
		return s
	}
	if m, p, _ := strings.Cut(pattern, " "); m == http.MethodGet && (p == "/{$}" || strings.HasPrefix(p, statuspage.Prefix)) {
		return ScopePublic
	}
	return ScopeAdmin
}

// principal is who a request comes from: a named token, RPD_TOKEN, a
// client certificate, or everyone when no credential is configured.
type Principal struct {
	// name is what the audit log and the grants record: a token's name,
	// "env.RPD_TOKEN", "rpd.token", or "cert:" and a certificate's subject.
	// "" is the anonymous principal of a daemon without credentials.
	name   string
	scopes Scope
	// components, when not nil, limit work to these names.
	components []string
	// limit, when not nil, is the token's rate_limit.
	limit *rateLimiter
}

// rateLimiter is a token bucket: rate requests a second, as many at once.
// A principal's requests wait for nobody else's: a flood from one token
// is answered 429 while the others go on.
type rateLimiter struct {
	rate float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newRateLimiter(perSecond int) *rateLimiter {
	return &rateLimiter{rate: float64(perSecond), tokens: float64(perSecond)}
}

// allow takes one token if there is one.
func (l *rateLimiter) allow(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() {
		l.tokens = min(l.rate, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	}
	l.last = now
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}

func (p *Principal) May(s Scope) bool { return p.scopes&ScopeAdmin != 0 || p.scopes&s == s }

// Owner is what a grant taken by p records as its holder.
func (p *Principal) Owner() string { return p.name }

// anonymous is everyone, on a daemon that configures no credential.
var Anonymous = &Principal{scopes: ScopeAny}

// fleetPrincipal owns the VM-ceiling claims the daemon takes for the
// runners it launches (fleet_adapters.go): a work principal may not end
// them through the API, an admin may.
var FleetPrincipal = &Principal{name: "rpd.fleet", scopes: ScopeAdmin}

// withPrincipal returns ctx carrying p, for grants the daemon takes itself.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// namedToken is a token compared by the SHA-256 of its secret.
type namedToken struct {
	sum [sha256.Size]byte
	p   *Principal
}

// credentials are the secrets the daemon accepts, built from the
// configuration (and RPD_TOKEN) on every reload and swapped whole.
type Credentials struct {
	tokens []namedToken
	// open: no credential at all (a loopback daemon without tokens):
	// every request is the anonymous admin.
	open bool
	// certScopes are the scopes of a verified client certificate; 0 when
	// the daemon verifies none.
	certScopes Scope
}

// Open reports whether c has no credential at all: every request is the
// anonymous admin, whatever its route.
func (c *Credentials) Open() bool { return c.open }

// minSecretBytes is the shortest shared secret a daemon reachable from
// other hosts accepts.
const minSecretBytes = 16

// newCredentials builds the credentials of cfg, with envToken (RPD_TOKEN)
// as one more admin token, reading token files now. On a listen address
// reachable from other hosts it refuses a configuration without any
// credential, and every secret it can see shorter than minSecretBytes.
func NewCredentials(cfg *spec.Config, envToken, listen string) (*Credentials, error) {
	c := &Credentials{}
	exposed := !IsLoopback(listen)
	add := func(name, secret string, scopes Scope, components []string, limit *rateLimiter) error {
		if exposed && len(secret) < minSecretBytes {
			what := fmt.Sprintf("token %q", name)
			switch name {
			case "env.RPD_TOKEN":
				what = "RPD_TOKEN"
			case "rpd.token":
				what = "the rpd block's token"
			}
			return fmt.Errorf("refusing to listen on %s with the %d-byte secret of %s: a shared secret must be at least %d bytes on an address other hosts reach; make one with `openssl rand -hex 32`", listen, len(secret), what, minSecretBytes)
		}
		c.tokens = append(c.tokens, namedToken{sum: sha256.Sum256([]byte(secret)), p: &Principal{name: name, scopes: scopes, components: components, limit: limit}})
		return nil
	}
	if envToken != "" {
		if err := add("env.RPD_TOKEN", envToken, ScopeAdmin, nil, nil); err != nil {
			return nil, err
		}
	}
	if cfg.Token != "" {
		if err := add("rpd.token", cfg.Token, ScopeAdmin, nil, nil); err != nil {
			return nil, err
		}
	}
	for _, t := range cfg.Tokens {
		s, comps := ParseScopes(t.Scopes), slices.Clone(t.Components)
		var limit *rateLimiter
		if t.RateLimit > 0 {
			limit = newRateLimiter(t.RateLimit)
		}
		if t.File == "" {
			var sum [sha256.Size]byte
			if n, err := hex.Decode(sum[:], []byte(t.SHA256)); err != nil || n != len(sum) {
				return nil, fmt.Errorf("token %q: sha256 %q is not 64 hexadecimal digits", t.Name, t.SHA256)
			}
			c.tokens = append(c.tokens, namedToken{sum: sum, p: &Principal{name: t.Name, scopes: s, components: comps, limit: limit}})
			continue
		}
		b, err := os.ReadFile(t.File)
		if err != nil {
			return nil, fmt.Errorf("token %q: read its secret: %w", t.Name, err)
		}
		secret := strings.TrimRight(string(b), "\r\n")
		if secret == "" {
			return nil, fmt.Errorf("token %q: %s is empty; write the secret into it (make one with `openssl rand -hex 32`)", t.Name, t.File)
		}
		if err := add(t.Name, secret, s, comps, limit); err != nil {
			return nil, err
		}
	}
	if cfg.TLS != nil && cfg.TLS.ClientCAFile != "" {
		c.certScopes = ParseScopes(cfg.TLS.ClientScopes)
	}
	c.open = len(c.tokens) == 0 && c.certScopes == 0
	if c.open && exposed {
		return nil, fmt.Errorf("refusing to listen on %s without a bearer token or a client certificate CA: that address is reachable from other hosts; declare a token block, set RPD_TOKEN (make one with `openssl rand -hex 32`) or client_ca_file in the tls block, or listen on 127.0.0.1", listen)
	}
	return c, nil
}

// bearer finds the principal of an Authorization header: the SHA-256 of
// the presented secret is compared, in constant time, with every token's
// (all of them, so the time taken does not say which one matched).
func (c *Credentials) bearer(header string) *Principal {
	scheme, got, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil
	}
	sum := sha256.Sum256([]byte(strings.TrimLeft(got, " ")))
	var found *Principal
	for i := range c.tokens {
		if subtle.ConstantTimeCompare(sum[:], c.tokens[i].sum[:]) == 1 {
			found = c.tokens[i].p
		}
	}
	return found
}

type principalKey struct{}

// principalOf returns the principal the middleware found for r (anonymous
// when it set none: handlers called directly by tests).
func PrincipalOf(ctx context.Context) *Principal {
	if p, ok := ctx.Value(principalKey{}).(*Principal); ok {
		return p
	}
	return Anonymous
}

// ForwardedHeader marks a request a standby forwarded to its leader,
// naming the standby; a forwarded request is never forwarded again.
const ForwardedHeader = "X-Rpd-Forwarded-By"

// PrincipalHeader carries, from a standby to its leader, the principal of
// a request that authenticated with a client certificate (a bearer token
// goes on as it came). The leader believes it only over a connection whose
// verified certificate is a replica's (tlsFiles.isReplica).
const PrincipalHeader = "X-Rpd-Principal"

// certPrefix starts the name of a client certificate's principal.
const CertPrefix = "cert:"

// displayName names p in messages and the audit log.
func DisplayName(p *Principal) string {
	if p.name == "" {
		return "anonymous"
	}
	return p.name
}

// componentOf is the pool, budget, VM ceiling or runner class a path
// names, "" for none.
func ComponentOf(path string) string {
	rest, ok := strings.CutPrefix(path, "/v1/")
	if !ok {
		return ""
	}
	kind, rest, _ := strings.Cut(rest, "/")
	switch kind {
	case "pools", "budgets", "ceilings", "classes":
		name, _, _ := strings.Cut(rest, "/")
		return name
	}
	return ""
}

// holderOnly refuses (403) a request to heartbeat, release, confirm or
// cancel a grant taken by another principal: only the grant's owner or an
// admin may. A grant without an owner (taken while no credential was
// configured, or recorded before owners were) is anyone's with work.
func HolderOnly(ctx context.Context, what, owner string) error {
	p := PrincipalOf(ctx)
	if owner == "" || p.name == owner || p.scopes&ScopeAdmin != 0 {
		return nil
	}
	return &httpapi.Error{Status: http.StatusForbidden, Code: api.CodeForbidden,
		Msg: fmt.Sprintf("%s was taken by principal %s; only it, or an admin, may end or extend it", what, owner)}
}

// setForwardedPrincipal sets principalHeader on a forwarded request whose
// principal is a client certificate's, and removes one a client sent.
func SetForwardedPrincipal(in, out *http.Request) {
	out.Header.Del(PrincipalHeader)
	if p := PrincipalOf(in.Context()); strings.HasPrefix(p.name, CertPrefix) && in.Header.Get("Authorization") == "" {
		out.Header.Set(PrincipalHeader, p.name)
	}
}

// isLoopback reports whether addr (host:port) only accepts connections
// from this host.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Authenticate finds r's principal, or nil when it presents no valid
// credential.
func Authenticate(r *http.Request, c *Credentials, replicas *TLSFiles) *Principal {
	if c.open {
		return Anonymous
	}
	if h := r.Header.Get("Authorization"); h != "" {
		return c.bearer(h)
	}
	if c.certScopes == 0 || r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return nil
	}
	leaf := r.TLS.VerifiedChains[0][0]
	if name := r.Header.Get(PrincipalHeader); name != "" && r.Header.Get(ForwardedHeader) != "" && replicas != nil && replicas.IsReplica(leaf) {
		return &Principal{name: name, scopes: c.certScopes}
	}
	return &Principal{name: CertPrefix + leaf.Subject.String(), scopes: c.certScopes}
}

// Authorize answers 401 or 403 for a request p may not make (and returns
// false), given the scope its route needs.
func Authorize(w http.ResponseWriter, r *http.Request, p *Principal, need Scope, m *Metrics) bool {
	if need == ScopePublic {
		return true
	}
	if p == nil {
		m.unauthorized.Inc()
		w.Header().Set("WWW-Authenticate", `Bearer realm="rpd"`)
		httpapi.WriteError(w, http.StatusUnauthorized, api.CodeUnauthorized, "missing or wrong credentials: send \"Authorization: Bearer <token>\" with a token the daemon knows (a token block, or RPD_TOKEN), or a client certificate its client_ca_file signed")
		return false
	}
	if need == ScopeAny || p.May(need) {
		if comp := ComponentOf(r.URL.Path); need == ScopeWork && comp != "" && p.components != nil && !slices.Contains(p.components, comp) {
			m.forbidden.Inc()
			httpapi.WriteError(w, http.StatusForbidden, api.CodeForbidden, fmt.Sprintf("principal %s may only use %s, not %s", p.name, strings.Join(p.components, ", "), comp))
			return false
		}
		if p.limit != nil && !p.limit.allow(time.Now()) {
			m.rateLimited.Inc()
			w.Header().Set("Retry-After", "1")
			httpapi.WriteError(w, http.StatusTooManyRequests, api.CodeRateLimited, fmt.Sprintf("principal %s is over its rate_limit of %v requests per second; slow down and retry", p.name, p.limit.rate))
			return false
		}
		return true
	}
	m.forbidden.Inc()
	httpapi.WriteError(w, http.StatusForbidden, api.CodeForbidden, fmt.Sprintf("principal %s has scope %s; %s %s needs %s", DisplayName(p), p.scopes, r.Method, r.URL.Path, need))
	return false
}
