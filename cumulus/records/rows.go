package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/cumulus/jsvalue"
	"github.com/backfill-dev/backfill/cumulus/message"
)

// col is one column of a row to insert: its value as text (nil: NULL) and
// its SQL type.
type col struct {
	name string
	val  *string
	typ  string
}

type row []col

func (r *row) add(name, typ string, v any) { *r = append(*r, col{name, textOf(v), typ}) }

func (r row) has(name string) bool {
	for _, c := range r {
		if c.name == name {
			return true
		}
	}
	return false
}

// insertSQL is INSERT INTO table (cols) VALUES ($n::type …).
func (r row) insertSQL(table string) (string, []any) {
	names := make([]string, len(r))
	ph := make([]string, len(r))
	args := make([]any, len(r))
	for i, c := range r {
		names[i] = quoteIdent(c.name)
		ph[i] = fmt.Sprintf("$%d::%s", i+1, c.typ)
		args[i] = c.val
	}
	return "INSERT INTO " + table + " (" + strings.Join(names, ", ") + ") VALUES (" + strings.Join(ph, ", ") + ")", args
}

func quoteIdent(s string) string { return `"` + s + `"` }

// mergeAll is DO UPDATE SET every inserted column.
func (r row) mergeAll() string {
	sets := make([]string, len(r))
	for i, c := range r {
		sets[i] = quoteIdent(c.name) + " = EXCLUDED." + quoteIdent(c.name)
	}
	return strings.Join(sets, ", ")
}

func mergeOnly(r row, names ...string) string {
	var sets []string
	for _, n := range names {
		if r.has(n) {
			sets = append(sets, quoteIdent(n)+" = EXCLUDED."+quoteIdent(n))
		}
	}
	return strings.Join(sets, ", ")
}

// epochSeconds is Cumulus's translateDateToUTC as SQL text.
func epochSeconds(ms int64) string { return jsvalue.FormatNumber(float64(ms) / 1000) }

func workflowStart(m map[string]any) (any, error) {
	cm, ok := m["cumulus_meta"].(map[string]any)
	if !ok {
		return nil, errors.New("TypeError: Cannot read properties of undefined (reading 'workflow_start_time')")
	}
	v := cm["workflow_start_time"]
	if !jsvalue.Truthy(v) {
		return nil, &MessageError{"getMessageWorkflowStartTime on a message without a workflow_start_time"}
	}
	return v, nil
}

func durationOf(start any, stop any, stopPresent bool) float64 {
	if !stopPresent || stop == nil {
		return 0
	}
	return (jsvalue.Number(stop, true) - jsvalue.Number(start, true)) / 1000
}

func isoMs(ms int64) string { return jsDateMust(float64(ms)) }

func jsDateMust(v float64) string {
	s, _ := jsDate(v)
	return s
}

// writeExecution is Cumulus's writeExecutionRecordFromMessage.
func (w *Writer) writeExecution(ctx context.Context, m map[string]any, now int64, collectionCID, asyncCID, parentCID *int64) (*int64, error) {
	meta := jsvalue.Obj(m["meta"])
	cmeta := jsvalue.Obj(m["cumulus_meta"])
	arn, hasARN := message.ExecutionARN(m)
	start, err := workflowStart(m)
	if err != nil {
		return nil, err
	}
	created, err := jsDate(start)
	if err != nil {
		return nil, err
	}
	status, statusPresent := meta["status"]
	var r row
	if hasARN {
		r.add("arn", "text", arn)
		r.add("url", "text", executionURL(arn, w.region))
	} else {
		r.add("arn", "text", nil)
	}
	if statusPresent {
		r.add("status", "text", status)
	}
	if v, ok := cmeta["cumulus_version"]; ok {
		r.add("cumulus_version", "text", v)
	}
	// The jsonb columns take a top-level array as Cumulus's driver sends
	// it: an empty one is stored as {}, any other fails the message.
	if v, ok := meta["workflow_tasks"]; ok {
		r.add("tasks", "jsonb", asDriverSends(v))
	}
	if v, ok := meta["workflow_name"]; ok {
		r.add("workflow_name", "text", v)
	}
	r.add("created_at", "timestamptz", created)
	r.add("timestamp", "timestamptz", isoMs(now))
	r.add("updated_at", "timestamptz", isoMs(now))
	exc, excPresent := m["exception"]
	r.add("error", "jsonb", asDriverSends(parseException(exc, excPresent)))
	if payload, ok := m["payload"]; ok {
		if status == "running" {
			r.add("original_payload", "jsonb", asDriverSends(payload))
		} else {
			r.add("final_payload", "jsonb", asDriverSends(payload))
		}
	}
	stop, stopPresent := cmeta["workflow_stop_time"]
	r.add("duration", "real", durationOf(start, stop, stopPresent))
	if asyncCID != nil {
		r.add("async_operation_cumulus_id", "integer", asyncCID)
	}
	if collectionCID != nil {
		r.add("collection_cumulus_id", "integer", collectionCID)
	}
	if parentCID != nil {
		r.add("parent_cumulus_id", "bigint", parentCID)
	}
	sql, args := r.insertSQL("executions")
	set := r.mergeAll()
	if status == "running" {
		set = mergeOnly(r, "created_at", "updated_at", "timestamp", "original_payload")
	}
	sql += " ON CONFLICT (arn) DO UPDATE SET " + set + " RETURNING cumulus_id"
	var id int64
	if err := w.via(r, "executions").QueryRow(ctx, sql, args...).Scan(&id); err != nil {
		return nil, fmt.Errorf("writing execution %s: %w", arn, err)
	}
	return &id, nil
}

// countOf is (payload[k] ?? []).length.
func countOf(payload map[string]any, k string) float64 {
	switch x := payload[k].(type) {
	case nil:
		return 0
	case []any:
		return float64(len(x))
	case string:
		return float64(len([]rune(x)))
	}
	return 0
}

// writePDR is Cumulus's writePdr.
func (w *Writer) writePDR(ctx context.Context, m map[string]any, now int64, collectionCID, providerCID, execCID *int64) error {
	payload := jsvalue.Obj(m["payload"])
	pdrV, has := payload["pdr"]
	if !has {
		return nil
	}
	if collectionCID == nil {
		return errors.New("Error: Collection reference is required for a PDR")
	}
	if providerCID == nil {
		return errors.New("Error: Provider reference is required for a PDR")
	}
	pdr := jsvalue.Obj(pdrV)
	running, completed, failed := countOf(payload, "running"), countOf(payload, "completed"), countOf(payload, "failed")
	total := running + completed + failed
	progress := 0.0
	if running > 0 && total > 0 {
		progress = (total - running) / total * 100
	} else if running == 0 && total > 0 {
		progress = 100
	}
	start, err := workflowStart(m)
	if err != nil {
		return err
	}
	created, err := jsDate(start)
	if err != nil {
		return err
	}
	status := jsvalue.Obj(m["meta"])["status"]
	var r row
	if v, ok := pdr["name"]; ok {
		r.add("name", "text", v)
	}
	if v, ok := jsvalue.Obj(m["meta"])["status"]; ok {
		r.add("status", "text", v)
	}
	panSent, ok := pdr["PANSent"]
	if !ok || panSent == nil {
		panSent = false
	}
	r.add("pan_sent", "boolean", panSent)
	panMsg, ok := pdr["PANmessage"]
	if !ok || panMsg == nil {
		panMsg = "N/A"
	}
	r.add("pan_message", "text", panMsg)
	r.add("stats", "jsonb", map[string]any{"processing": running, "completed": completed, "failed": failed, "total": total})
	r.add("progress", "real", progress)
	if execCID != nil {
		r.add("execution_cumulus_id", "bigint", execCID)
	}
	r.add("collection_cumulus_id", "integer", collectionCID)
	r.add("provider_cumulus_id", "integer", providerCID)
	r.add("created_at", "timestamptz", created)
	r.add("updated_at", "timestamptz", isoMs(now))
	r.add("timestamp", "timestamptz", isoMs(now))
	r.add("duration", "real", (float64(now)-jsvalue.Number(start, true))/1000)
	startMs, err := jsDateMs(start)
	if err != nil {
		return err
	}
	where := "pdrs.created_at <= to_timestamp(" + epochSeconds(startMs) + ")"
	if status == "running" {
		where += " AND (pdrs.execution_cumulus_id != EXCLUDED.execution_cumulus_id OR pdrs.progress < EXCLUDED.progress)"
	}
	sql, args := r.insertSQL("pdrs")
	sql += " ON CONFLICT (name) DO UPDATE SET " + r.mergeAll() + " WHERE " + where
	tx, err := w.q.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("writing PDR %s: %w", jsvalue.String(pdr["name"], true), err)
	}
	return tx.Commit(ctx)
}

// writeJoinsOnly links the execution to every granule row of the
// message's granule IDs, in any collection, as Cumulus does when granule
// writes are off for the workflow (writeGranuleExecutionAssociationsFrom
// Message): every granule must then be an object with a string granuleId,
// or the message fails whole.
func (w *Writer) writeJoinsOnly(ctx context.Context, m map[string]any, execCID int64) error {
	list, _ := jsvalue.Obj(m["payload"])["granules"].([]any)
	var ids []string
	for _, g := range list {
		id, ok := jsvalue.Obj(g)["granuleId"].(string)
		if !ok {
			return errors.New("TypeError: Invalid granule: missing granuleId")
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := w.q.Exec(ctx, `INSERT INTO granules_executions (granule_cumulus_id, execution_cumulus_id)
		SELECT cumulus_id, $2 FROM granules WHERE granule_id = ANY($1)
		ON CONFLICT (granule_cumulus_id, execution_cumulus_id) DO NOTHING`, ids, execCID)
	return err
}

var _ = json.Marshal
var _ = pgx.ErrNoRows
