package records

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/cumulus/cumulusdb"
	"github.com/backfill-dev/backfill/cumulus/jsvalue"
	"github.com/backfill-dev/backfill/cumulus/message"
)

var finalStatus = map[any]bool{"completed": true, "failed": true}

// writeGranules is Cumulus's writeGranulesFromMessage: each granule
// succeeds, is dropped or fails on its own; any failure makes the message's
// error.
func (w *Writer) writeGranules(ctx context.Context, in Input, execCID *int64) (Result, error) {
	m := in.Message
	var res Result
	list, _ := jsvalue.Obj(m["payload"])["granules"].([]any)
	if len(list) == 0 {
		return res, nil
	}
	mc := &msgContext{}
	arn, ok := message.ExecutionARN(m)
	if !ok {
		arn = "null"
	}
	mc.executionURL = executionURL(arn, w.region)
	if in.StartDate != nil {
		mc.processingStart = isoMs(*in.StartDate)
		if in.StopDate != nil {
			mc.processingEnd = isoMs(*in.StopDate)
		} else {
			mc.processingEnd = isoMs(w.now())
		}
	}
	meta := jsvalue.Obj(m["meta"])
	mc.provider, mc.providerPresent = meta["provider"]
	exc, excPresent := m["exception"]
	mc.errorObj = parseException(exc, excPresent)
	mc.errorText = exceptionText(exc, in.Exception)
	mc.workflowStatus, mc.statusPresent = meta["status"]
	mc.collectionID = collectionID(m)
	mc.pdrName, mc.pdrPresent = jsvalue.Get(m, "payload", "pdr", "name")
	mc.queryFields, mc.queryPresent = jsvalue.Get(m, "meta", "granule", "queryFields")
	start, err := workflowStart(m)
	if err != nil {
		return res, &MessageError{"writeGranulesFromMessage called without a valid workflow start time in the Cumulus Message, all granules failed to write"}
	}
	mc.workflowStartTime = start

	var errs []error
	for _, g := range list {
		id := jsvalue.String(jsvalue.Obj(g)["granuleId"], true)
		out, err := w.writeGranule(ctx, mc, g, execCID)
		res.Granules = append(res.Granules, GranuleResult{GranuleID: id, Outcome: out, Err: err})
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return res, &AggregateError{errs}
	}
	return res, nil
}

// granuleRow translates an API record to its granules row
// (translateApiGranuleToPostgresGranuleWithoutNilsRemoved), with its
// collection's cumulus_id. A date that does not convert is the third
// value, not the error: Cumulus meets it only when it writes the row,
// after the schema check, so the caller returns it after that check.
func (w *Writer) granuleRow(ctx context.Context, rec map[string]any) (row, int64, error, error) {
	var badDate error
	if s, ok := rec["status"]; ok && s == nil {
		return nil, 0, nil, errors.New("ValidationError: status cannot be null on a granule, granules must have a status")
	}
	var r row
	add := func(col, typ, key string) {
		if v, ok := rec[key]; ok {
			r.add(col, typ, v)
		}
	}
	var pdrCID, providerCID *int64
	var err error
	if v := rec["pdrName"]; v != nil {
		if pdrCID, err = w.lookup(ctx, "pdrs", map[string]any{"name": v}); err != nil {
			return nil, 0, nil, err
		}
		if pdrCID == nil {
			return nil, 0, nil, &RecordDoesNotExist{"pdrs", whereJSON(map[string]any{"name": v})}
		}
	}
	if v := rec["provider"]; v != nil {
		if providerCID, err = w.lookup(ctx, "providers", map[string]any{"name": v}); err != nil {
			return nil, 0, nil, err
		}
		if providerCID == nil {
			return nil, 0, nil, &RecordDoesNotExist{"providers", whereJSON(map[string]any{"name": v})}
		}
	}
	cid := rec["collectionId"].(string)
	i := strings.LastIndex(cid, "___")
	name, version := cid[:i], cid[i+3:]
	collCID, err := w.lookup(ctx, "collections", map[string]any{"name": name, "version": version})
	if err != nil {
		return nil, 0, nil, err
	}
	if collCID == nil {
		return nil, 0, nil, &RecordDoesNotExist{"collections", fmt.Sprintf(`{"name":%q,"version":%q}`, name, version)}
	}
	add("granule_id", "text", "granuleId")
	add("status", "text", "status")
	r.add("collection_cumulus_id", "integer", collCID)
	add("producer_granule_id", "text", "producerGranuleId")
	add("published", "boolean", "published")
	add("duration", "real", "duration")
	add("time_to_archive", "real", "timeToArchive")
	add("time_to_process", "real", "timeToPreprocess")
	add("product_volume", "bigint", "productVolume")
	add("error", "jsonb", "error")
	add("cmr_link", "text", "cmrLink")
	if _, ok := rec["pdrName"]; ok {
		r.add("pdr_cumulus_id", "integer", pdrCID)
	}
	if _, ok := rec["provider"]; ok {
		r.add("provider_cumulus_id", "integer", providerCID)
	}
	add("query_fields", "jsonb", "queryFields")
	for _, d := range [][2]string{
		{"beginning_date_time", "beginningDateTime"}, {"ending_date_time", "endingDateTime"},
		{"last_update_date_time", "lastUpdateDateTime"}, {"processing_end_date_time", "processingEndDateTime"},
		{"processing_start_date_time", "processingStartDateTime"}, {"production_date_time", "productionDateTime"},
		{"timestamp", "timestamp"}, {"created_at", "createdAt"}, {"updated_at", "updatedAt"},
	} {
		v, ok := rec[d[1]]
		if !ok {
			continue
		}
		if v == nil {
			r.add(d[0], "timestamptz", nil)
			continue
		}
		s, err := jsDate(v)
		if err != nil {
			badDate = cmp.Or(badDate, fmt.Errorf("%s: %w", d[1], err))
			continue
		}
		r.add(d[0], "timestamptz", s)
	}
	return r, *collCID, badDate, nil
}

// writeGranule builds, checks and writes one granule.
func (w *Writer) writeGranule(ctx context.Context, mc *msgContext, g any, execCID *int64) (Outcome, error) {
	rec, err := w.granuleRecord(mc, g, w.now())
	if err != nil {
		return Failed, err
	}
	r, collCID, badDate, err := w.granuleRow(ctx, rec)
	if err != nil {
		return Failed, err
	}
	granuleID := rec["granuleId"]
	var direct pgx.Tx
	if w.direct != nil && r.safeIn("granules") {
		direct = w.direct
	}
	tx, other, err := beginGranule(ctx, w.q, direct, jsvalue.String(granuleID, true), collCID)
	if err != nil {
		return Failed, err
	}
	defer tx.Rollback(ctx)
	if other {
		return Failed, fmt.Errorf("Error: A granule already exists for granuleId: %s with collectionId: %s", jsvalue.String(granuleID, true), rec["collectionId"])
	}
	if err := cumulusdb.Validate(rec); err != nil {
		tx.Rollback(ctx)
		var se *cumulusdb.SchemaError
		if errors.As(err, &se) && finalStatus[rec["status"]] {
			if ferr := w.markFailedOnSchemaError(ctx, rec, mc.errorText, collCID, se); ferr != nil {
				return Failed, ferr
			}
			return MarkedFailed, fmt.Errorf("Error: Granule/granule files failed schema validation and will be updated in the datastore with the error and a status of failed: %w", err)
		}
		return Failed, err
	}
	if badDate != nil {
		return Failed, badDate
	}
	id, written, err := upsertGranule(ctx, tx, r, rec, execCID)
	if err != nil {
		return Failed, err
	}
	if !written {
		return Dropped, tx.Commit(ctx)
	}
	if err := tx.Commit(ctx); err != nil {
		return Failed, err
	}
	if _, hasFiles := rec["files"]; hasFiles && finalStatus[rec["status"]] {
		if err := w.writeFiles(ctx, id, rec, mc.errorText); err != nil {
			return Failed, err
		}
	}
	return Written, nil
}

// upsertGranule is GranulePgModel.upsert with write constraints and the
// execution join row; written is false when the constraints dropped it.
func upsertGranule(ctx context.Context, tx granuleTx, r row, rec map[string]any, execCID *int64) (int64, bool, error) {
	createdV, ok := rec["createdAt"]
	if !ok || !jsvalue.Truthy(createdV) {
		b, _ := json.Marshal(rec)
		return 0, false, fmt.Errorf("Error: Granule upsert called with write constraints but no createdAt set: %s", b)
	}
	createdMs, err := jsDateMs(createdV)
	if err != nil {
		return 0, false, err
	}
	sql, args := r.insertSQL("granules")
	status := rec["status"]
	where := "granules.created_at <= to_timestamp(" + epochSeconds(createdMs) + ")"
	var set string
	if status == "running" || status == "queued" {
		set = mergeOnly(r, "status", "timestamp", "updated_at", "created_at")
		if execCID != nil {
			if status == "running" {
				where += fmt.Sprintf(" AND NOT EXISTS (SELECT 1 FROM executions WHERE cumulus_id = %d AND status IN ('completed', 'failed', 'unknown'))", *execCID)
			} else {
				where += fmt.Sprintf(" AND NOT EXISTS (SELECT 1 FROM executions WHERE cumulus_id = %d)", *execCID)
			}
		}
	} else {
		set = r.mergeAll()
	}
	sql += " ON CONFLICT (granule_id, collection_cumulus_id) DO UPDATE SET " + set + " WHERE " + where + " RETURNING cumulus_id"
	if execCID != nil {
		// The execution's join row in the same statement: one round trip.
		sql = "WITH granule AS (" + sql + `), joined AS (INSERT INTO granules_executions (granule_cumulus_id, execution_cumulus_id)
			SELECT cumulus_id, ` + strconv.FormatInt(*execCID, 10) + ` FROM granule
			ON CONFLICT (granule_cumulus_id, execution_cumulus_id) DO UPDATE SET granule_cumulus_id = EXCLUDED.granule_cumulus_id)
			SELECT cumulus_id FROM granule`
	}
	var id int64
	err = tx.QueryRow(ctx, sql, args...).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return id, true, nil
}

// writeFiles is Cumulus's _writeGranuleFiles: every file upserted on its
// own; when all succeed the granule's other files are deleted, else the
// granule is marked failed with the error (not the message's error). Its
// error is that of marking the granule failed, which fails the granule's
// write as it does in Cumulus.
func (w *Writer) writeFiles(ctx context.Context, granuleCID int64, rec map[string]any, errorText string) error {
	files, _ := rec["files"].([]any)
	kept := []int64{}
	var failures []string
	rows := make([]row, len(files))
	for i, f := range files {
		fo := jsvalue.Obj(f)
		for _, c := range [][3]string{
			{"bucket", "text", "bucket"}, {"key", "text", "key"}, {"checksum_type", "text", "checksumType"},
			{"checksum_value", "text", "checksum"}, {"file_name", "text", "fileName"}, {"file_size", "bigint", "size"},
			{"source", "text", "source"}, {"type", "text", "type"},
		} {
			// Every column, an absent field as NULL: Cumulus inserts them all,
			// and its conflict update copies them all, so a rewrite without
			// a field clears it.
			rows[i].add(c[0], c[1], fo[c[2]])
		}
		rows[i].add("granule_cumulus_id", "bigint", granuleCID)
	}
	if w.direct != nil && allSafe(rows) {
		// One statement for every file and the removal of the others; a
		// failure aborts the batch's transaction, which is then written
		// again message by message.
		_, err := w.direct.Exec(ctx, filesSQL(rows, granuleCID))
		if err == nil {
			return nil
		}
		failures, rows = append(failures, err.Error()), nil
	}
	for _, r := range rows {
		sql, args := r.insertSQL("files")
		sql += " ON CONFLICT (bucket, key) DO UPDATE SET " + r.mergeAll() + " RETURNING cumulus_id"
		var id int64
		if err := w.q.QueryRow(ctx, sql, args...).Scan(&id); err != nil {
			failures = append(failures, err.Error())
			continue
		}
		kept = append(kept, id)
	}
	if len(failures) == 0 {
		_, err := w.q.Exec(ctx, "DELETE FROM files WHERE granule_cumulus_id = $1 AND cumulus_id <> ALL($2)", granuleCID, kept)
		if err == nil {
			return nil
		}
		failures = append(failures, err.Error())
	}
	var errs []any
	if !jsvalue.Empty(rec["error"]) {
		errs = append(errs, json.RawMessage(errorText))
	}
	errs = append(errs, errorEntry{Error: "Failed writing files to PostgreSQL.", Cause: "AggregateError: " + strings.Join(failures, "; ")})
	_, err := w.q.Exec(ctx, "UPDATE granules SET status = 'failed', error = $2::jsonb WHERE cumulus_id = $1", granuleCID, mustJSON(map[string]any{"errors": mustJSON(errs)}))
	return err
}

// allSafe tells whether the file rows cannot fail on their data, one by
// one and together: no (bucket, key) twice, which one statement could not
// write twice.
func allSafe(rows []row) bool {
	seen := make(map[[2]string]bool, len(rows))
	for _, r := range rows {
		if !r.safeIn("files") {
			return false
		}
		k := [2]string{*r[0].val, *r[1].val}
		if seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}

// filesSQL upserts the file rows and deletes the granule's other files in
// one statement, the values inline as literals.
func filesSQL(rows []row, granuleCID int64) string {
	written := "SELECT NULL::bigint AS cumulus_id WHERE false"
	if len(rows) > 0 {
		names := make([]string, len(rows[0]))
		for i, c := range rows[0] {
			names[i] = quoteIdent(c.name)
		}
		values := make([]string, len(rows))
		for i, r := range rows {
			vals := make([]string, len(r))
			for k, c := range r {
				vals[k] = "NULL::" + c.typ
				if c.val != nil {
					vals[k] = quoteLiteral(*c.val) + "::" + c.typ
				}
			}
			values[i] = "(" + strings.Join(vals, ", ") + ")"
		}
		written = "INSERT INTO files (" + strings.Join(names, ", ") + ") VALUES " + strings.Join(values, ", ") +
			" ON CONFLICT (bucket, key) DO UPDATE SET " + rows[0].mergeAll() + " RETURNING cumulus_id"
	}
	return "WITH written AS (" + written + ") DELETE FROM files WHERE granule_cumulus_id = " +
		strconv.FormatInt(granuleCID, 10) + " AND cumulus_id NOT IN (SELECT cumulus_id FROM written)"
}

// quoteLiteral is s as an SQL escape string literal, read the same
// whatever standard_conforming_strings says.
func quoteLiteral(s string) string {
	return "E'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", "''") + "'"
}

// markFailedOnSchemaError is updateGranuleStatusToFailed after a schema
// error of a final-status granule: the existing row becomes failed with
// the error; an error when there is no row.
func (w *Writer) markFailedOnSchemaError(ctx context.Context, rec map[string]any, errorText string, collCID int64, se *cumulusdb.SchemaError) error {
	var errs []any
	if jsvalue.Truthy(rec["error"]) {
		errs = append(errs, json.RawMessage(errorText))
	}
	errs = append(errs, errorEntry{
		Error: "Failed writing granule record due to SchemaValdationError.",
		Cause: schemaCause{Name: "SchemaValidationError", Detail: se.Detail},
	})
	tag, err := w.q.Exec(ctx, "UPDATE granules SET status = 'failed', error = $3::jsonb WHERE granule_id = $1 AND collection_cumulus_id = $2",
		jsvalue.String(rec["granuleId"], true), collCID, mustJSON(map[string]any{"errors": mustJSON(errs)}))
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return &RecordDoesNotExist{"granules", fmt.Sprintf(`{"granule_id":%q,"collection_cumulus_id":%d}`, jsvalue.String(rec["granuleId"], true), collCID)}
	}
	return nil
}

// errorEntry is one entry of a granule's error.errors, in Cumulus's key
// order (the entries are stored as a JSON string, so the order shows).
type errorEntry struct {
	Error string `json:"Error"`
	Cause any    `json:"Cause"`
}

// schemaCause is JSON.stringify of Cumulus's SchemaValidationError: its own
// enumerable properties.
type schemaCause struct {
	Name   string `json:"name"`
	Detail string `json:"detail"`
}

// mustJSON is JSON.stringify: no HTML escaping.
func mustJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // cannot fail: every value given is built here from decoded JSON
	return strings.TrimSuffix(b.String(), "\n")
}
