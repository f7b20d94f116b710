package spec

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Scopes a token or a client certificate may carry (docs/security.md).
const (
	// ScopeRead: status, page data, lists of leases and inventory, metrics.
	ScopeRead = "read"
	// ScopeWork: acquire, heartbeat and release its own leases, permits and
	// claims; runner pickup, offer and confirm.
	ScopeWork = "work"
	// ScopeAdmin: everything, including reload, usage figures and ending
	// anyone's grant.
	ScopeAdmin = "admin"
)

// AuditStdout is the audit_log value that writes the audit log to the
// daemon's standard output.
const AuditStdout = "-"

// TLS is the rpd block's tls block: the daemon's certificate, and the CAs
// it verifies clients (mutual TLS) and its leader with.
type TLS struct {
	// CertFile and KeyFile are the PEM certificate chain and key the daemon
	// serves; both are re-read when they change.
	CertFile, KeyFile string
	// ClientCAFile, when set, makes the daemon ask clients for a
	// certificate and verify any it is given against these CAs: a verified
	// certificate is a principal named after its subject, with
	// ClientScopes. It also verifies the leader a standby forwards to.
	ClientCAFile string
	// CAFile verifies the leader a standby forwards to (default
	// ClientCAFile, else the system's roots).
	CAFile string
	// ClientScopes are the scopes of a principal that authenticates with
	// a client certificate (default ["read"]).
	ClientScopes []string

	DeclRange hcl.Range
}

// Token is a token "NAME" block: one named bearer token and what it may do.
type Token struct {
	Name string
	// SHA256 is the hex SHA-256 of the secret (64 lowercase digits), or ""
	// when File is set.
	SHA256 string
	// File names a file holding the secret itself, re-read on every reload.
	File string
	// Scopes are ScopeRead, ScopeWork and ScopeAdmin, as declared.
	Scopes []string
	// Components, when not empty, limit the token's work to the pools,
	// budgets, VM ceilings and runner classes of these names.
	Components []string
	// RateLimit is the requests per second the token may make (with as
	// many in a burst); 0 is unlimited.
	RateLimit int

	DeclRange hcl.Range
}

var (
	tlsSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "cert_file", Required: true}, {Name: "key_file", Required: true},
		{Name: "client_ca_file"}, {Name: "ca_file"}, {Name: "client_scopes"},
	}}
	tokenSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "sha256"}, {Name: "file"}, {Name: "scopes", Required: true}, {Name: "pools"}, {Name: "rate_limit"},
	}}
)

// security decodes the rpd block's audit_log attribute and tls block.
func (d *decoder) security(audit *hcl.Attribute, b *hcl.Block, cfg *Config) {
	if s, ok := d.str(audit); ok {
		if d.path(audit, s) {
			cfg.AuditLog = s
		}
	}
	if b == nil {
		return
	}
	attrs, _ := d.content(b.Body, tlsSchema)
	t := &TLS{DeclRange: b.DefRange, ClientScopes: []string{ScopeRead}}
	ok := true
	for _, f := range []struct {
		name string
		dst  *string
	}{{"cert_file", &t.CertFile}, {"key_file", &t.KeyFile}, {"client_ca_file", &t.ClientCAFile}, {"ca_file", &t.CAFile}} {
		a := attrs[f.name]
		if a == nil {
			continue
		}
		s, good := d.str(a)
		if good = good && d.path(a, s) && s != AuditStdout; !good {
			ok = false
			continue
		}
		*f.dst = s
	}
	if a := attrs["client_scopes"]; a != nil {
		scopes, good := d.scopes(a)
		switch {
		case !good:
			ok = false
		case t.ClientCAFile == "":
			d.errorf(a.Expr.Range(), "client_scopes without client_ca_file", "client_scopes are the scopes of a client certificate, which only client_ca_file makes the daemon verify: set client_ca_file too, or remove client_scopes.")
			ok = false
		default:
			t.ClientScopes = scopes
		}
	}
	if ok && t.CertFile != "" && t.KeyFile != "" {
		cfg.TLS = t
	}
}

// path checks a file path attribute: not empty, no NUL byte.
func (d *decoder) path(a *hcl.Attribute, s string) bool {
	if strings.TrimSpace(s) == "" || strings.ContainsRune(s, 0) {
		d.errorf(a.Expr.Range(), fmt.Sprintf("Invalid %s", a.Name), "%s must name a file, such as \"/etc/rpd/%s\".", a.Name, strings.TrimSuffix(a.Name, "_file"))
		return false
	}
	return true
}

// scopes reads a non-empty list of known scopes, each once.
func (d *decoder) scopes(a *hcl.Attribute) ([]string, bool) {
	l, ok := d.strList(a)
	if !ok {
		return nil, false
	}
	if len(l) == 0 {
		d.errorf(a.Expr.Range(), "Empty scopes", "A principal without a scope can do nothing: list at least one of %q, %q and %q.", ScopeRead, ScopeWork, ScopeAdmin)
		return nil, false
	}
	for i, s := range l {
		switch {
		case s != ScopeRead && s != ScopeWork && s != ScopeAdmin:
			d.errorf(a.Expr.Range(), "Unknown scope", "%q is not a scope: use %q (status, lists, metrics), %q (acquire, heartbeat and release its own grants, pickup) or %q (everything).", s, ScopeRead, ScopeWork, ScopeAdmin)
			return nil, false
		case slices.Contains(l[:i], s):
			d.errorf(a.Expr.Range(), "Duplicate scope", "%q is listed twice; list each scope once.", s)
			return nil, false
		}
	}
	return l, true
}

// tokens decodes the token blocks, sorted by name, and refuses two that
// share a secret (one would shadow the other).
func (d *decoder) tokens(blocks []*hcl.Block, cfg *Config) {
	byHash := map[string]string{}
	for _, b := range blocks {
		t, ok := d.token(b)
		if !ok {
			continue
		}
		if t.SHA256 != "" {
			if first, dup := byHash[t.SHA256]; dup {
				d.errorf(b.DefRange, "Duplicate token secret", "Tokens %q and %q have the same sha256, so one secret would stand for two principals: give each principal its own secret.", first, t.Name)
				continue
			}
			byHash[t.SHA256] = t.Name
		}
		cfg.Tokens = append(cfg.Tokens, t)
	}
	slices.SortFunc(cfg.Tokens, func(a, b Token) int { return strings.Compare(a.Name, b.Name) })
}

func (d *decoder) token(b *hcl.Block) (Token, bool) {
	t := Token{Name: b.Labels[0], DeclRange: b.DefRange}
	attrs, _ := d.content(b.Body, tokenSchema)
	ok := true
	sum, file := attrs["sha256"], attrs["file"]
	switch {
	case sum != nil && file != nil:
		d.errorf(file.NameRange, "Both sha256 and file", "Token %q sets both sha256 and file: keep one (sha256 for a hash kept in git, file for a secret mounted at run time).", t.Name)
		ok = false
	case sum == nil && file == nil:
		d.errorf(b.DefRange, "Token without a secret", "Token %q needs sha256 (the hex SHA-256 of the secret, such as the output of `printf %%s \"$SECRET\" | sha256sum`) or file (a file holding the secret).", t.Name)
		ok = false
	case sum != nil:
		s, good := d.str(sum)
		if good {
			s = strings.ToLower(s)
			if _, err := hex.DecodeString(s); err != nil || len(s) != 64 {
				d.errorf(sum.Expr.Range(), "Invalid sha256", "sha256 must be 64 hexadecimal digits, the SHA-256 of the secret: make a secret with `openssl rand -hex 32` and hash it with `printf %%s \"$SECRET\" | sha256sum`.")
				good = false
			}
		}
		ok = ok && good
		t.SHA256 = s
	default:
		s, good := d.str(file)
		ok = ok && good && d.path(file, s)
		t.File = s
	}
	if scopes, good := d.scopes(attrs["scopes"]); good {
		t.Scopes = scopes
	} else if attrs["scopes"] != nil {
		ok = false
	}
	if a := attrs["pools"]; a != nil {
		l, good := d.strList(a)
		for _, n := range l {
			if !validName(n) {
				d.errorf(a.Expr.Range(), "Invalid name in pools", "%q is not a valid pool, budget, vm_ceiling or runner_class name.", n)
				good = false
			}
		}
		if good && len(l) == 0 {
			d.errorf(a.Expr.Range(), "Empty pools", "A token limited to no component can acquire nothing: list the pools, budgets, VM ceilings or runner classes it may use, or remove pools to allow all.")
			good = false
		}
		ok = ok && good
		t.Components = l
	}
	if n, good := d.integer(attrs["rate_limit"], 1, maxRateLimit, " requests per second"); good {
		t.RateLimit = n
	} else if attrs["rate_limit"] != nil {
		ok = false
	}
	return t, ok
}

// maxRateLimit bounds a token's rate_limit (requests per second).
const maxRateLimit = 1_000_000
