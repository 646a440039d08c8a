package pgnet

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Where names the database of cfg as user@host:port/database: with no
// --dsn and no PG* variables these are the defaults libpq takes too (the
// database named after the user).
func Where(cfg *pgx.ConnConfig) string {
	db := cfg.Database
	if db == "" {
		db = cfg.User // what the server takes when none is given
	}
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, db)
}

// Named says that err is of the database of cfg (Where), in one line.
func Named(cfg *pgx.ConnConfig, err error) error {
	return &oneLine{msg: "postgres " + Where(cfg) + ": " + flatten(err.Error()), err: err}
}

// oneLine is an error said in one line: pgx's connection errors give each
// host tried on a line of its own.
type oneLine struct {
	msg string
	err error
}

func (e *oneLine) Error() string { return e.msg }
func (e *oneLine) Unwrap() error { return e.err }

// flatten puts a message of several lines on one: pgx's "failed to connect
// to `user=... database=...`:" heading (the caller names the database) is
// dropped, and a host's error repeated (tried with TLS, then without) is
// said once.
func flatten(s string) string {
	var parts []string
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if i == 0 {
			line = strings.TrimSpace(connectHeading.ReplaceAllString(line, ""))
			line = strings.TrimSuffix(line, ":")
		}
		if line != "" && !slices.Contains(parts, line) {
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, ": ")
}

var connectHeading = regexp.MustCompile("failed to connect to `[^`]*`:?\\s*")

// Redact replaces the password of dsn, wherever it occurs in msg.
func Redact(msg, dsn string) string {
	pw := ""
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		pw, _ = u.User.Password()
	}
	if pw == "" {
		for _, f := range strings.Fields(dsn) {
			if v, ok := strings.CutPrefix(f, "password="); ok {
				pw = strings.Trim(v, "'")
			}
		}
	}
	if pw != "" {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
		if e := url.QueryEscape(pw); e != pw {
			msg = strings.ReplaceAll(msg, e, "xxxxx")
		}
	}
	return msg
}

// keyPassword is the password of a key/value connection string.
var keyPassword = regexp.MustCompile(`(^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// WithoutPassword returns the connection string dsn without its password,
// and whether it had one.
func WithoutPassword(dsn string) (string, bool) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "postgres://(unreadable; left out)", true
		}
		hidden := false
		if _, ok := u.User.Password(); ok {
			u.User, hidden = url.User(u.User.Username()), true
		}
		if q := u.Query(); q.Has("password") {
			q.Del("password")
			u.RawQuery, hidden = q.Encode(), true
		}
		return u.String(), hidden
	}
	if !keyPassword.MatchString(dsn) {
		return dsn, false
	}
	return strings.TrimSpace(keyPassword.ReplaceAllString(dsn, "$1")), true
}
