package main

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/testutil"
)

// No password, given in --dsn (URL, its query, or key/value form), in
// PGPASSWORD or in a .pgpass file, is ever written: not on standard output
// or error, not in any file, not in the database's ledger or dead letters.
// Every command that takes --dsn is run on every failure path that can be
// provoked: the server gone, a database or role that does not exist, the
// schema missing, a bulk load refused, and an interrupted run. Each must
// still name the database it tried.
func TestNoPassword_OnEveryFailurePath(t *testing.T) {
	bin := buildBinary(t)
	const pwURL, pwQuery, pwKV, pwEnv, pwFile = "urlS3cretPW", "querySecr3tPW", "kvSecr3tPW", "envSecr3tPW", "fileSecr3tPW"
	secrets := []string{pwURL, pwQuery, pwKV, pwEnv, pwFile}
	dir := t.TempDir()
	pgpass := filepath.Join(dir, "pgpass")
	if err := os.WriteFile(pgpass, []byte("*:*:*:*:"+pwFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGPASSWORD", pwEnv)
	t.Setenv("PGPASSFILE", pgpass)
	in := genPG(t)
	db := pgtest.NewDatabase(t)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	withPW := func(host, dbname, user string) []string {
		v := *u
		v.Host, v.Path, v.User = host, "/"+dbname, url.UserPassword(user, pwURL)
		q := v
		q.User = url.User(user)
		q.RawQuery = "password=" + pwQuery
		kv := "host=" + v.Hostname() + " port=" + v.Port() + " dbname=" + dbname + " user=" + user + " password=" + pwKV
		return []string{v.String(), q.String(), kv}
	}
	user, dbname := u.User.Username(), strings.TrimPrefix(u.Path, "/")
	var dsns []string
	dsns = append(dsns, withPW(u.Host, dbname, user)...)
	dsns = append(dsns, withPW("127.0.0.1:1", dbname, user)...)             // the server gone
	dsns = append(dsns, withPW(u.Host, "no_such_db_backfill", user)...)     // no such database
	dsns = append(dsns, withPW(u.Host, dbname, "no_such_role_backfill")...) // no such role
	commands := func(dsn string) [][]string {
		return [][]string{
			{"run", "-q", "--in", in, "--sink", "postgres", "--dsn", dsn}, // schema missing, or no server
			{"status", "--sink", "postgres", "--dsn", dsn},
			{"schema", "--dsn", dsn, "--pg-schema", "bad\"name"},
			{"load", "--plan", filepath.Join(dir, "plan.json"), "--out", filepath.Join(dir, "job"), "--shard", "0", "--sink", "postgres", "--dsn", dsn},
			{"audit", "--sink", "postgres", "--dsn", dsn},
			{"keysearch", "--sink", "postgres", "--dsn", dsn, "--out", filepath.Join(dir, "scheme.json")},
			{"granule-write", "--dsn", dsn, "--archive", filepath.Join(dir, "dla"), "-"},
			{"granule-recover", "--dsn", dsn, "--archive", filepath.Join(dir, "dla")},
			{"granule-schema", "--dsn", dsn},
		}
	}
	if code, out := call("plan", "--in", in, "--shards", "1", "--out", filepath.Join(dir, "plan.json")); code != cli.ExitOK {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
	if code, out := call("run", "-q", "--plan", filepath.Join(dir, "plan.json"), "--shard", "0", "--out", filepath.Join(dir, "job")); code != cli.ExitOK {
		t.Fatalf("map: exit %d\n%s", code, out)
	}
	var written bytes.Buffer
	failures := 0
	for _, dsn := range dsns {
		for _, args := range commands(dsn) {
			var out, errb bytes.Buffer
			code := exitCode(run(context.Background(), args, cli.Stdio{In: strings.NewReader("{}\n"), Out: &out, Err: &errb}), &errb)
			written.Write(out.Bytes())
			written.Write(errb.Bytes())
			if code == cli.ExitFailure {
				failures++
				if !strings.Contains(errb.String(), "postgres ") || !strings.Contains(errb.String(), "@") {
					t.Errorf("backfill %s: the failure does not name the database:\n%s", args[0], errb.String())
				}
			}
		}
	}
	if failures < 20 {
		t.Errorf("only %d failures provoked", failures)
	}
	// A bulk load into a schema that holds rows is refused.
	if code, out := call("run", "-q", "--in", in, "--sink", "postgres", "--dsn", dsns[0], "--create-schema"); code != cli.ExitRejects {
		t.Fatalf("load: exit %d\n%s", code, out)
	}
	for _, dsn := range dsns[:3] {
		var errb bytes.Buffer
		if code := exitCode(run(context.Background(), []string{"run", "-q", "--in", in, "--sink", "postgres", "--dsn", dsn, "--bulk"},
			cli.Stdio{In: strings.NewReader(""), Out: &written, Err: &errb}), &errb); code == cli.ExitOK || code == cli.ExitRejects {
			t.Errorf("bulk into a loaded schema: exit %d", code)
		}
		written.Write(errb.Bytes())
	}
	// Interrupted during a load, as a process: the command that finishes
	// the job is printed without the password.
	pgtest.Exec(t, db, "DROP SCHEMA backfill CASCADE")
	watch := pgtest.Connect(t, db)
	interrupted := 0
	for _, dsn := range dsns[:3] {
		cmd := exec.Command(bin, "run", "-q", "--workers", "1", "--in", in, "--sink", "postgres", "--dsn", dsn, "--create-schema")
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &written, &stderr
		since := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var werr error
		if copying(t, watch, db, since, exited, &werr) {
			cmd.Process.Signal(syscall.SIGINT)
			werr = <-exited
		}
		written.Write(stderr.Bytes())
		if code := testutil.ExitCode(werr); code != cli.ExitInterrupted || !strings.Contains(stderr.String(), "to finish, run: "+bin+" run") {
			t.Errorf("interrupted: exit %d, stderr:\n%s", code, stderr.String())
		}
		interrupted++
		// The database's own records: the ledger's errors, the dead letters.
		rows, err := watch.Query(context.Background(), `SELECT coalesce(error, '') FROM backfill.ledger
			UNION ALL SELECT message FROM backfill.dead_letters`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			written.WriteString(s + "\n")
		}
		rows.Close()
		pgtest.Exec(t, db, "DROP SCHEMA IF EXISTS backfill CASCADE")
	}
	t.Logf("%d failures, %d interrupted runs, %d bytes written", failures, interrupted, written.Len())
	// Every file written.
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && path != pgpass {
			b, _ := os.ReadFile(path)
			written.Write(b)
		}
		return nil
	})
	for _, s := range secrets {
		if i := bytes.Index(written.Bytes(), []byte(s)); i >= 0 {
			lo, hi := max(0, i-200), min(written.Len(), i+100)
			t.Errorf("the password %q was written:\n%s", s, written.Bytes()[lo:hi])
		}
	}
}
