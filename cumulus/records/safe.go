package records

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// Inside a batch, a statement runs under a savepoint so that its failure
// undoes only itself. Where the row shows that the statement cannot fail
// on its data, it runs without one: fewer statements for the server. Should
// such a statement fail after all, the batch's transaction is aborted, the
// statements after it fail too, and the batch is written again message by
// message, each statement committing on its own: the verdicts stay the
// ones Cumulus gives, only slower.

// constraints are what a row of a table must meet to be written: the
// columns that must be given and not null, those that may be absent but
// not null, and the values a checked column takes.
type constraints struct {
	required, notNull []string
	oneOf             map[string][]string
}

var tableConstraints = map[string]constraints{
	"executions": {
		required: []string{"arn", "status"},
		notNull:  []string{"created_at", "updated_at"},
		oneOf:    map[string][]string{"status": {"running", "completed", "failed", "unknown"}},
	},
	"granules": {
		required: []string{"granule_id", "status", "collection_cumulus_id", "producer_granule_id"},
		notNull:  []string{"created_at", "updated_at"},
		oneOf:    map[string][]string{"status": {"running", "completed", "failed", "queued"}},
	},
	"files": {
		required: []string{"bucket", "key", "granule_cumulus_id"},
	},
}

// safeIn tells whether the row cannot fail on its data when written into
// table: every constraint met and every value one its column's type reads.
func (r row) safeIn(table string) bool {
	c := tableConstraints[table]
	for _, name := range c.required {
		if !r.has(name) {
			return false
		}
	}
	for _, col := range r {
		if col.val == nil {
			if slices.Contains(c.required, col.name) || slices.Contains(c.notNull, col.name) {
				return false
			}
			continue
		}
		if allowed, checked := c.oneOf[col.name]; checked && !slices.Contains(allowed, *col.val) {
			return false
		}
		if !readable(col.typ, *col.val) {
			return false
		}
	}
	return true
}

// readable tells whether PostgreSQL reads v as a value of typ.
func readable(typ, v string) bool {
	switch typ {
	case "text":
		return !strings.ContainsRune(v, 0)
	case "jsonb":
		// jsonb refuses \u0000; a top-level array goes as an array
		// literal, which is not JSON unless empty ({}).
		return json.Valid([]byte(v)) && !strings.Contains(strings.ToLower(v), `\u0000`)
	case "integer", "bigint":
		return isDecimalInt(v, 9) || (typ == "bigint" && isDecimalInt(v, 18))
	case "real":
		f, err := strconv.ParseFloat(v, 64)
		return err == nil && (f != f || f > -3e38 && f < 3e38 || v == "Infinity" || v == "-Infinity")
	case "boolean":
		return v == "true" || v == "false"
	case "timestamptz":
		// ISO strings of jsDate; years before 4713 BC are out of range.
		return len(v) > 0 && v[0] != '-' && v[0] != '+'
	}
	return false
}

// isDecimalInt tells an optionally signed integer of at most digits digits.
func isDecimalInt(v string, digits int) bool {
	v = strings.TrimPrefix(v, "-")
	if v == "" || len(v) > digits {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}
