// Package jsurl builds URLs as Cumulus's JavaScript does: a provider's
// URL as @cumulus/common's buildURL makes it over Node's WHATWG URL, and
// the url-join package a file's source is joined with. Both are held to
// Cumulus's own code by the tests.
package jsurl

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/backfill-dev/backfill/cumulus/jsvalue"
)

// ProviderURL is @cumulus/common's buildURL of a provider (meta.provider): new
// URL(protocol + "://" + host), its port set to the provider's port (not
// for s3), serialized without a trailing slash. The URL is parsed as the
// WHATWG URL standard (Node's URL) parses it, for what provider hosts hold:
// a special scheme's host is lowercased, ends at "/", "\\", "?" or "#", and
// loses its scheme's default port (https://h:443 is https://h); a host
// that is itself a URL (http + "https://h:40521") has the host "https" and
// the path "//h:40521", as Cumulus writes it.
func ProviderURL(p map[string]any) (string, error) {
	proto, ok := p["protocol"]
	if !ok || proto == nil {
		return "", errors.New("TypeError: protocol is required")
	}
	host, ok := p["host"]
	if !ok || host == nil {
		return "", errors.New("TypeError: host is required")
	}
	scheme, h := jsvalue.String(proto, true), jsvalue.String(host, true)
	u, err := parseURL(scheme, h)
	if err != nil {
		return "", fmt.Errorf("TypeError: Invalid URL: %s://%s", scheme, h)
	}
	if port, ok := p["port"]; ok && jsvalue.Truthy(port) && scheme != "s3" {
		u.setPort(jsvalue.String(port, true))
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// defaultPorts are the WHATWG special schemes' default ports.
var defaultPorts = map[string]string{"http": "80", "https": "443", "ftp": "21", "ws": "80", "wss": "443", "file": ""}

// whatwgURL is a URL as the WHATWG standard holds it, for buildURL.
type whatwgURL struct {
	scheme, host, port, rest string // rest: the path, query and fragment, as given
}

// parseURL parses scheme + "://" + hostAndRest. It covers what provider
// hosts hold (a name, a port, a path, a URL); user info and IPv6 hosts are
// refused, as they never name a provider.
func parseURL(scheme, hostAndRest string) (*whatwgURL, error) {
	if scheme == "" || strings.ContainsAny(scheme, ":/?#@[] ") {
		return nil, errors.New("bad scheme")
	}
	scheme = strings.ToLower(scheme)
	_, special := defaultPorts[scheme]
	ends := "/?#"
	if special {
		ends += "\\"
	}
	auth, rest := hostAndRest, ""
	if i := strings.IndexAny(hostAndRest, ends); i >= 0 {
		auth, rest = hostAndRest[:i], hostAndRest[i:]
	}
	if strings.ContainsAny(auth, "@[]") {
		return nil, errors.New("user info or IPv6 host")
	}
	host, port := auth, ""
	if i := strings.LastIndexByte(auth, ':'); i >= 0 {
		host, port = auth[:i], auth[i+1:]
		if strings.Trim(port, "0123456789") != "" {
			return nil, errors.New("bad port")
		}
	}
	if special {
		if host == "" || strings.ContainsAny(host, " %") {
			return nil, errors.New("bad host")
		}
		host = strings.ToLower(host)
	}
	u := &whatwgURL{scheme: scheme, host: host, rest: strings.ReplaceAll(rest, "\\", "/")}
	if port != "" && !u.setPort(port) {
		return nil, errors.New("bad port")
	}
	return u, nil
}

// setPort is the URL's port setter: the leading digits of v, dropped when
// they are the scheme's default; false when they are out of range (the
// setter then leaves the port as it was).
func (u *whatwgURL) setPort(v string) bool {
	digits := v[:len(v)-len(strings.TrimLeft(v, "0123456789"))]
	if digits == "" {
		return true
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n > 65535 {
		return false
	}
	u.port = strconv.Itoa(n)
	if d, ok := defaultPorts[u.scheme]; ok && d == u.port {
		u.port = ""
	}
	return true
}

func (u *whatwgURL) String() string {
	s := u.scheme + "://" + u.host
	if u.port != "" {
		s += ":" + u.port
	}
	rest := u.rest
	if _, special := defaultPorts[u.scheme]; special && !strings.HasPrefix(rest, "/") {
		rest = "/" + rest
	}
	return s + rest
}

// Join is the url-join package (v4) that Cumulus joins a file's
// source with, step for step: a plain protocol first part is joined to
// the next; the protocol gets its two slashes (three for file:); each part
// loses its leading slashes (but the first) and its trailing ones (but the
// last, whose are made one); the parts are joined by "/"; a slash before
// "?", "&" or "#" goes; every "?" after the first becomes "&". Slashes
// inside a part are left as they are (http://https//host stays so).
func Join(parts ...string) string {
	if len(parts) == 0 {
		return ""
	}
	parts = append([]string(nil), parts...)
	if plainProtocol.MatchString(parts[0]) && len(parts) > 1 {
		parts = append([]string{parts[0] + parts[1]}, parts[2:]...)
	}
	if strings.HasPrefix(parts[0], "file:///") {
		parts[0] = protocolSlashes.ReplaceAllString(parts[0], "$1:///")
	} else {
		parts[0] = protocolSlashes.ReplaceAllString(parts[0], "$1://")
	}
	var kept []string
	for i, c := range parts {
		if c == "" {
			continue
		}
		if i > 0 {
			c = strings.TrimLeft(c, "/")
		}
		if i < len(parts)-1 {
			c = strings.TrimRight(c, "/")
		} else if t := strings.TrimRight(c, "/"); t != c {
			c = t + "/"
		}
		kept = append(kept, c)
	}
	s := slashBeforeParams.ReplaceAllString(strings.Join(kept, "/"), "$1")
	if first, rest, ok := strings.Cut(s, "?"); ok {
		s = first + "?" + strings.ReplaceAll(rest, "?", "&")
	}
	return s
}

var (
	plainProtocol     = regexp.MustCompile(`^[^/:]+:/*$`)
	protocolSlashes   = regexp.MustCompile(`^([^/:]+):/*`)
	slashBeforeParams = regexp.MustCompile(`/(\?|&|#[^!])`)
)
