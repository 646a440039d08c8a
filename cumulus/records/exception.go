package records

import (
	"encoding/json"
	"strings"

	"github.com/backfill-dev/backfill/cumulus/jsvalue"
)

// exceptionText is JSON.stringify(parseException(message.exception)) with
// the keys in the order of text, the exception as the input held it (nil:
// unknown, and an object's keys are sorted).
func exceptionText(exc any, text json.RawMessage) string {
	var b strings.Builder
	switch exc.(type) {
	case nil:
		return "{}"
	case map[string]any, []any:
		if text != nil {
			if s, err := jsvalue.StringifyText(text); err == nil {
				return s
			}
		}
		b.WriteString(jsvalue.Stringify(exc))
	default:
		b.WriteString(`{"Error":"Unknown Error","Cause":`) // parseException's order
		b.WriteString(jsvalue.Stringify(exc))
		b.WriteByte('}')
	}
	return b.String()
}
